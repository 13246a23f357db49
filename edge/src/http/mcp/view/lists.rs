//! The view's lists: every session's tools and prompts under
//! `{name}__{item}`, sessions in the order of their names; resources and
//! templates under their own URIs, each URI once (the first session by
//! name that declares it is the one that serves it, as [`super::members`]
//! routes a read). The page size and cursors are the session lists'; at
//! 2026-07-28 a view's list stays fresh only [`VIEW_TTL_MS`], since the
//! sessions in it come and go.

use openclaw_proxy_core::Caller;
use openclaw_proxy_proto::session_name::prefixed;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::members::Members;
use crate::http::mcp::methods::tasks;
use crate::http::mcp::methods::{page, page_answer_ttl};
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::Answer;
use crate::http::mcp::transport::request::Request;

/// How long a client may treat a view's list as fresh (2026-07-28
/// `ttlMs`): a session of the user's may appear or end at any moment;
/// clients holding a stream hear of it at once.
pub const VIEW_TTL_MS: u64 = 5_000;

#[derive(Deserialize)]
struct Paginated {
    #[serde(default)]
    cursor: Option<String>,
}

fn cursor(request: &Request) -> Result<Option<String>, Rejected> {
    let Paginated { cursor } = request.params_as()?;
    Ok(cursor)
}

/// A tool as the view lists it: as the session's own list has it for this
/// caller (only the tools it may use, as the operator's policy shows them,
/// `execution` at the revisions that have it), under its prefixed name.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ViewTool {
    name: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: String,
    input_schema: Box<RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    execution: Option<Value>,
}

/// What the per-session lists decide besides the tools themselves.
pub(super) struct ToolRules<'a> {
    pub caller: &'a Caller,
    pub policy: Option<&'a crate::policy::Live>,
    /// Whether entries carry `execution`.
    pub shows_execution: bool,
}

pub(super) fn tools(
    members: &Members,
    request: &Request,
    rules: &ToolRules<'_>,
) -> Result<Answer, Rejected> {
    let cursor = cursor(request)?;
    let execution = |support| {
        rules
            .shows_execution
            .then(|| tasks::execution(support))
            .flatten()
    };
    let mut all: Vec<ViewTool> = Vec::new();
    for member in members.iter() {
        match rules.policy {
            Some(policy) => {
                all.extend(
                    policy
                        .tools_for(&member.record, rules.caller)
                        .into_iter()
                        .map(|view| ViewTool {
                            name: prefixed(&member.name, &view.name),
                            description: view.description.to_string(),
                            input_schema: view.input_schema,
                            execution: execution(view.task_support),
                        }),
                );
            }
            None => {
                let tools = member.record.tools();
                all.extend(
                    tools
                        .iter()
                        .filter(|tool| rules.caller.may_use(tool))
                        .map(|tool| ViewTool {
                            name: prefixed(&member.name, &tool.name),
                            description: tool.description.to_string(),
                            input_schema: tool.input_schema.to_raw(),
                            execution: execution(tool.task_support),
                        }),
                );
            }
        }
    }
    let (range, next) = page(all.len(), cursor.as_deref())?;
    Ok(page_answer_ttl(
        request,
        "tools",
        &all[range],
        next,
        VIEW_TTL_MS,
    ))
}

pub(super) fn prompts(members: &Members, request: &Request) -> Result<Answer, Rejected> {
    let cursor = cursor(request)?;
    let all: Vec<Value> = members
        .iter()
        .flat_map(|member| {
            let catalog = member.record.catalog();
            catalog
                .prompts
                .iter()
                .map(|prompt| {
                    let mut entry = prompt.to_mcp();
                    entry["name"] = Value::String(prefixed(&member.name, &prompt.name));
                    entry
                })
                .collect::<Vec<_>>()
        })
        .collect();
    paged(request, "prompts", &all, cursor.as_deref())
}

pub(super) fn resources(members: &Members, request: &Request) -> Result<Answer, Rejected> {
    let cursor = cursor(request)?;
    let mut seen = std::collections::HashSet::new();
    let all: Vec<Value> = members
        .iter()
        .flat_map(|member| member.record.catalog().resources.to_vec())
        .filter(|resource| seen.insert(resource.uri.clone()))
        .map(|resource| resource.to_mcp())
        .collect();
    paged(request, "resources", &all, cursor.as_deref())
}

pub(super) fn templates(members: &Members, request: &Request) -> Result<Answer, Rejected> {
    let cursor = cursor(request)?;
    let mut seen = std::collections::HashSet::new();
    let all: Vec<Value> = members
        .iter()
        .flat_map(|member| member.record.catalog().resource_templates.to_vec())
        .filter(|template| seen.insert(template.uri_template.clone()))
        .map(|template| template.to_mcp())
        .collect();
    paged(request, "resourceTemplates", &all, cursor.as_deref())
}

fn paged(
    request: &Request,
    key: &'static str,
    all: &[Value],
    cursor: Option<&str>,
) -> Result<Answer, Rejected> {
    let (range, next) = page(all.len(), cursor)?;
    Ok(page_answer_ttl(
        request,
        key,
        &all[range],
        next,
        VIEW_TTL_MS,
    ))
}

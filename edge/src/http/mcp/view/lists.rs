//! The view's lists: every session's tools and prompts under
//! `{name}__{item}`, sessions in the order of their names; resources and
//! templates under their own URIs, each URI once (the first session by
//! name that declares it is the one that serves it, as [`super::members`]
//! routes a read). The page size and cursors are the session lists'; at
//! 2026-07-28 a view's list stays fresh only [`VIEW_TTL_MS`], since the
//! sessions in it come and go.

use openclaw_proxy_core::Caller;
use openclaw_proxy_proto::session_name::prefixed;
use serde::Deserialize;
use serde_json::Value;

use super::members::Members;
use crate::http::mcp::methods::{ToolEntry, page, page_answer_ttl};
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

/// `tools/list` of the view: the tools `caller` may see (their
/// requirements, as on each session's own URL), `execution` shown when the
/// request's revision has it.
pub(super) fn tools(
    members: &Members,
    request: &Request,
    caller: &Caller,
    shows_execution: bool,
) -> Result<Answer, Rejected> {
    let cursor = cursor(request)?;
    let sets: Vec<_> = members
        .iter()
        .map(|member| (member, member.record.tools()))
        .collect();
    let visible: Vec<_> = sets
        .iter()
        .flat_map(|(member, tools)| tools.iter().map(move |tool| (member, tool)))
        .filter(|(_, tool)| caller.may_use(tool))
        .collect();
    let names: Vec<String> = visible
        .iter()
        .map(|(member, tool)| prefixed(&member.name, &tool.name))
        .collect();
    let (range, next) = page(names.len(), cursor.as_deref())?;
    let entries: Vec<ToolEntry<'_>> = visible
        .iter()
        .map(|(_, tool)| *tool)
        .zip(&names)
        .skip(range.start)
        .take(range.len())
        .map(|(tool, name)| {
            let mut entry = ToolEntry::of(tool, shows_execution);
            entry.name = name;
            entry
        })
        .collect();
    Ok(page_answer_ttl(
        request,
        "tools",
        &entries,
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

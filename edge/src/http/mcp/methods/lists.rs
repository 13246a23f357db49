//! `tools/list`, `resources/list`, `resources/templates/list` and
//! `prompts/list`: answered from what the session declared, one page at a
//! time. A tool's schema is written as the text it is kept as, so a list
//! costs its answer's bytes and no tree (`openclaw_proxy_proto::schema`
//! says why that matters).
//!
//! At 2026-07-28 a list says how long it stays fresh (`ttlMs`) and that it
//! is this caller's own (`cacheScope: "private"`); earlier revisions get the
//! list as they know it.

use openclaw_proxy_proto::tools::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Context, TTL_MS, hub_refusal};
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::Answer;
use crate::http::mcp::transport::request::{Request, Revision};

/// Entries per page of a list; a longer list hands out a `nextCursor`.
pub const PAGE_SIZE: usize = 100;

/// The params of a list request.
#[derive(Deserialize)]
struct Paginated {
    #[serde(default)]
    cursor: Option<String>,
}

/// One page of a list, with what the revision adds.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Page<'a, T: Serialize> {
    #[serde(flatten)]
    items: Items<'a, T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_scope: Option<&'static str>,
}

/// The items under their list's key.
struct Items<'a, T> {
    key: &'static str,
    items: &'a [T],
}

impl<T: Serialize> Serialize for Items<'_, T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.key, self.items)?;
        map.end()
    }
}

fn page_answer<T: Serialize>(
    request: &Request,
    key: &'static str,
    items: &[T],
    next_cursor: Option<String>,
) -> Answer {
    page_answer_ttl(request, key, items, next_cursor, TTL_MS)
}

/// One page of a list that stays fresh `ttl_ms` at 2026-07-28.
pub(crate) fn page_answer_ttl<T: Serialize>(
    request: &Request,
    key: &'static str,
    items: &[T],
    next_cursor: Option<String>,
    ttl_ms: u64,
) -> Answer {
    let per_request = request.revision == Revision::PerRequest;
    Answer::result(
        &request.id,
        Page {
            items: Items { key, items },
            next_cursor,
            result_type: per_request.then_some("complete"),
            ttl_ms: per_request.then_some(ttl_ms),
            cache_scope: per_request.then_some("private"),
        },
    )
}

/// The range of `len` items on the page the `cursor` a previous page
/// handed out names (the offset of its first entry, as text), and the
/// cursor of the next page.
pub(crate) fn page(
    len: usize,
    cursor: Option<&str>,
) -> Result<(std::ops::Range<usize>, Option<String>), Rejected> {
    let start = match cursor {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|start| *start <= len)
            .ok_or_else(|| {
                Rejected::invalid_params(
                    "the cursor is not one this server handed out: list again without a cursor",
                )
            })?,
    };
    let end = len.min(start + PAGE_SIZE);
    let next = (end < len).then(|| end.to_string());
    Ok((start..end, next))
}

/// A tool as `tools/list` lists it: no description when it has none, the
/// schema as its kept text.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolEntry<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    description: &'a str,
    input_schema: Box<RawValue>,
    /// `execution.taskSupport`, at the revisions that have it.
    #[serde(skip_serializing_if = "Option::is_none")]
    execution: Option<Value>,
}

impl<'a> ToolEntry<'a> {
    fn of(tool: &'a Tool, shows_execution: bool) -> Self {
        Self {
            name: &tool.name,
            description: &tool.description,
            input_schema: tool.input_schema.to_raw(),
            execution: shows_execution
                .then(|| crate::http::mcp::methods::tasks::execution(tool.task_support))
                .flatten(),
        }
    }
}

pub(super) async fn tools(context: &Context<'_>, request: &Request) -> Result<Answer, Rejected> {
    let Paginated { cursor } = request.params_as()?;
    if let Some(policy) = &context.state.config.policy {
        return policy_tools(context, request, policy, cursor.as_deref()).await;
    }
    let tools = context
        .state
        .hub
        .tools(context.session_id)
        .await
        .map_err(|error| hub_refusal(&error))?;
    // Only the tools this caller may see, before paging: a page's
    // cursor counts what the caller was shown.
    let visible: Vec<&Tool> = tools
        .iter()
        .filter(|tool| context.caller.may_use(tool))
        .collect();
    let (range, next) = page(visible.len(), cursor.as_deref())?;
    let shows = crate::http::mcp::methods::tasks::shows_execution(context, request);
    let entries: Vec<ToolEntry<'_>> = visible[range]
        .iter()
        .map(|tool| ToolEntry::of(tool, shows))
        .collect();
    Ok(page_answer(request, "tools", &entries, next))
}

/// `tools/list` under the operator's policy: the tools as this caller sees
/// them (`crate::policy`).
async fn policy_tools(
    context: &Context<'_>,
    request: &Request,
    policy: &crate::policy::Live,
    cursor: Option<&str>,
) -> Result<Answer, Rejected> {
    let hub = &context.state.hub;
    let record = hub
        .session_record(context.session_id)
        .await
        .map_err(|error| hub_refusal(&error))?;
    let views = policy.tools_for(&record, &context.caller);
    let (range, next) = page(views.len(), cursor)?;
    let shows = crate::http::mcp::methods::tasks::shows_execution(context, request);
    let entries: Vec<ToolEntry<'_>> = views[range]
        .iter()
        .map(|view| ToolEntry {
            name: &view.name,
            description: &view.description,
            input_schema: view.input_schema.clone(),
            execution: shows
                .then(|| crate::http::mcp::methods::tasks::execution(view.task_support))
                .flatten(),
        })
        .collect();
    Ok(page_answer(request, "tools", &entries, next))
}

/// A list of the session's catalog, its entries rendered by `entry`.
async fn catalog_list<T>(
    context: &Context<'_>,
    request: &Request,
    key: &'static str,
    items: impl FnOnce(&openclaw_proxy_core::catalog::Catalog) -> &[T],
    entry: impl Fn(&T) -> Value,
) -> Result<Answer, Rejected> {
    let Paginated { cursor } = request.params_as()?;
    let catalog = context
        .state
        .hub
        .catalog(context.session_id)
        .await
        .map_err(|error| hub_refusal(&error))?;
    let all = items(&catalog);
    let (range, next) = page(all.len(), cursor.as_deref())?;
    let entries: Vec<Value> = all[range].iter().map(entry).collect();
    Ok(page_answer(request, key, &entries, next))
}

pub(super) async fn resources(
    context: &Context<'_>,
    request: &Request,
) -> Result<Answer, Rejected> {
    catalog_list(
        context,
        request,
        "resources",
        |c| &c.resources,
        |r| r.to_mcp(),
    )
    .await
}

pub(super) async fn templates(
    context: &Context<'_>,
    request: &Request,
) -> Result<Answer, Rejected> {
    catalog_list(
        context,
        request,
        "resourceTemplates",
        |c| &c.resource_templates,
        |t| t.to_mcp(),
    )
    .await
}

pub(super) async fn prompts(context: &Context<'_>, request: &Request) -> Result<Answer, Rejected> {
    catalog_list(context, request, "prompts", |c| &c.prompts, |p| p.to_mcp()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_hand_out_cursors_until_the_end() {
        let (first, next) = page(250, None).expect("first");
        assert_eq!(first, 0..PAGE_SIZE);
        let (second, next) = page(250, next.as_deref()).expect("second");
        assert_eq!(second.start, PAGE_SIZE);
        let (third, next) = page(250, next.as_deref()).expect("third");
        assert_eq!(third.len(), 50);
        assert_eq!(next, None);
        assert!(page(250, Some("x")).is_err());
        assert!(page(250, Some("251")).is_err());
        assert_eq!(page(0, None).expect("empty"), (0..0, None));
    }
}

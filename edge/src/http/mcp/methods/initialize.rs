//! `initialize` (up to 2025-11-25): the revision is negotiated and the
//! server says what it serves. A stateless server keeps nothing of it: the
//! client names its revision again in every request's header.

use openclaw_proxy_core::escape::Outside;
use rmcp::model::{
    Implementation, InitializeRequestParams, InitializeResult, ProtocolVersion, ServerCapabilities,
};

use super::Context;
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::Answer;
use crate::http::mcp::transport::request::{Request, supported};

/// What the server serves: tools, resources with subscriptions, prompts,
/// completions and logging (deprecated from 2026-07-28; clients of every
/// earlier revision still set a level), each list announcing its changes.
const CAPABILITIES: &str = r#"{
    "tools": {"listChanged": true},
    "resources": {"subscribe": true, "listChanged": true},
    "prompts": {"listChanged": true},
    "completions": {},
    "logging": {}
}"#;

/// What the server is and serves, for `initialize` and `server/discover`
/// alike.
pub(super) fn server_info() -> InitializeResult {
    let capabilities: ServerCapabilities = serde_json::from_str(CAPABILITIES).unwrap_or_default();
    InitializeResult::new(capabilities)
        .with_server_info(Implementation::new(
            "openclaw-proxy",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("Tools registered by an app session; each call runs inside the app.")
}

/// The revision a client that asks for `requested` gets: the same when this
/// server speaks it over `initialize`, else the newest that has
/// `initialize` (the client then decides whether it can speak that).
fn negotiate(requested: &ProtocolVersion) -> ProtocolVersion {
    let has_initialize = requested.as_str() <= ProtocolVersion::LATEST_WITH_INITIALIZE.as_str();
    if has_initialize && supported(requested.as_str()).is_some() {
        requested.clone()
    } else {
        ProtocolVersion::LATEST_WITH_INITIALIZE
    }
}

/// Answers `initialize`, with the one line a client's start is worth at
/// INFO: its name and version (outside values, quoted), never its
/// capabilities.
pub(super) fn answer(context: &Context<'_>, request: &Request) -> Result<Answer, Rejected> {
    let params: InitializeRequestParams = request.params_as()?;
    let mut result = server_info();
    result.protocol_version = negotiate(&params.protocol_version);
    tracing::info!(
        session = Outside::session(context.session_id).field(),
        client_name = Outside::new(&params.client_info.name).field(),
        client_version = Outside::new(&params.client_info.version).field(),
        "MCP client initialized"
    );
    if !context.state.tasks.enabled() {
        return Ok(Answer::result(&request.id, result));
    }
    // The typed capabilities have no `tasks` (2025-11-25): added by name.
    let mut result = serde_json::to_value(result).unwrap_or_default();
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(serde_json::Value::as_object_mut)
    {
        capabilities.insert(
            "tasks".to_owned(),
            crate::http::mcp::methods::tasks::capability(),
        );
    }
    Ok(Answer::result(&request.id, result))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_capabilities_read_as_written() {
        let info = serde_json::to_value(server_info()).expect("json");
        assert_eq!(info["capabilities"]["resources"]["subscribe"], true);
        assert_eq!(info["capabilities"]["prompts"]["listChanged"], true);
        assert!(info["capabilities"]["completions"].is_object());
        assert!(info["capabilities"]["logging"].is_object());
    }

    #[test]
    fn a_known_revision_is_kept_and_others_get_the_newest_with_initialize() {
        for known in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
            let version: ProtocolVersion =
                serde_json::from_value(serde_json::json!(known)).expect("version");
            assert_eq!(negotiate(&version).as_str(), known);
        }
        for other in ["2026-07-28", "2099-01-01", "1999-01-01"] {
            let version: ProtocolVersion =
                serde_json::from_value(serde_json::json!(other)).expect("version");
            assert_eq!(negotiate(&version), ProtocolVersion::LATEST_WITH_INITIALIZE);
        }
    }
}

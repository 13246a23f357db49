//! `logging/setLevel`: the least severe app log record the session's
//! clients hear of, until another level is set. MCP deprecates logging from
//! 2026-07-28 (SEP-2577), where a request names its level in `_meta`;
//! clients of every earlier revision still set one here.

use openclaw_proxy_core::escape;
use openclaw_proxy_core::progress::LogLevel;
use serde::Deserialize;

use super::{Context, hub_refusal};
use crate::http::mcp::transport::Rejected;
use crate::http::mcp::transport::answer::Answer;
use crate::http::mcp::transport::request::Request;

#[derive(Deserialize)]
struct SetLevel {
    level: String,
}

pub(super) async fn set_level(
    context: &Context<'_>,
    request: &Request,
) -> Result<Answer, Rejected> {
    let SetLevel { level } = request.params_as()?;
    let level = LogLevel::parse(&level).ok_or_else(|| {
        Rejected::invalid_params(format!(
            "Invalid params: unknown log level {}; MCP names debug, info, notice, warning, error, critical, alert and emergency",
            escape::quoted(&level)
        ))
    })?;
    context
        .state
        .hub
        .set_log_level(context.session_id, level)
        .await
        .map_err(|error| hub_refusal(&error))?;
    Ok(Answer::result(&request.id, serde_json::json!({})))
}

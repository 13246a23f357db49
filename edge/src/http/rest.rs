//! Session REST: `POST /v1/chat/sessions` and `DELETE /v1/chat/sessions/{id}`.
//!
//! The body is the documented snake_case one; the original implementation's
//! camelCase spelling (`deviceId`, `inputSchema`, ...) is accepted too. All
//! four metadata fields and `tools` are required, as documented; unknown
//! fields are ignored so newer apps keep working.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use openclaw_proxy_core::proto;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ApiError;
use super::{EdgeState, check_app_token};

/// The documented session registration body.
#[derive(Debug, Deserialize)]
pub struct CreateSessionBody {
    #[serde(alias = "deviceId")]
    device_id: String,
    #[serde(alias = "deviceName")]
    device_name: String,
    #[serde(alias = "appVersion")]
    app_version: String,
    #[serde(alias = "chatId")]
    chat_id: String,
    tools: Vec<ToolBody>,
}

/// One tool of the registration body.
#[derive(Debug, Deserialize)]
pub struct ToolBody {
    name: String,
    #[serde(default)]
    description: Option<String>,
    #[serde(default, alias = "inputSchema")]
    input_schema: Option<Value>,
    #[serde(default)]
    path: Option<String>,
}

/// The documented registration answer.
#[derive(Debug, Serialize)]
pub struct CreateSessionReply {
    #[serde(rename = "mcpSessionId")]
    mcp_session_id: String,
    bridge_url: String,
    mcp_url: String,
}

/// `POST /v1/chat/sessions`.
pub async fn create_session(
    State(state): State<EdgeState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CreateSessionReply>, ApiError> {
    check_app_token(&state, &headers)?;
    let body = read_body(body, state.config.max_body_bytes)?;
    let parsed: CreateSessionBody = parse_json(&body)?;
    let request = proto::CreateSessionRequest {
        metadata: Some(proto::SessionMetadata {
            device_id: parsed.device_id,
            device_name: parsed.device_name,
            app_version: parsed.app_version,
            chat_id: parsed.chat_id,
        }),
        tools: parsed
            .tools
            .into_iter()
            .map(|tool| proto::ToolDefinition {
                name: tool.name,
                description: tool.description.unwrap_or_default(),
                input_schema_json: tool
                    .input_schema
                    .map(|schema| schema.to_string())
                    .unwrap_or_default(),
                path: tool.path.unwrap_or_default(),
            })
            .collect(),
    };
    let session_id = state.hub.create_session(request)?.session_id;
    let base = base_url(state.config.public_url.as_deref(), &headers);
    let ws_base = match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => format!("ws://{base}"),
    };
    Ok(Json(CreateSessionReply {
        bridge_url: format!("{ws_base}/v1/chat/sessions/{session_id}/bridge"),
        mcp_url: format!("{base}/v1/mcp/{session_id}"),
        mcp_session_id: session_id,
    }))
}

/// `DELETE /v1/chat/sessions/{session_id}`: idempotent.
pub async fn delete_session(
    State(state): State<EdgeState>,
    headers: HeaderMap,
    Path(session_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    check_app_token(&state, &headers)?;
    state
        .hub
        .delete_session(proto::DeleteSessionRequest { session_id });
    Ok(Json(serde_json::json!({"ok": true})))
}

/// Turns a body rejection into an error that names the problem.
pub(crate) fn read_body(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::BodyTooLarge { limit }
        } else {
            ApiError::UnreadableBody(rejection.body_text())
        }
    })
}

/// Parses a JSON body; type errors name the offending field (`tools[0].name`).
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(body);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            ApiError::MalformedJson(inner.to_string())
        } else if path == "." {
            ApiError::InvalidBody(inner.to_string())
        } else {
            ApiError::InvalidBody(format!("{path}: {inner}"))
        }
    })?;
    deserializer
        .end()
        .map_err(|error| ApiError::MalformedJson(error.to_string()))?;
    Ok(value)
}

/// The base URL for `bridge_url` and `mcp_url`: the configured public URL, or
/// the request's own scheme (`X-Forwarded-Proto` when a proxy set it) and Host.
fn base_url(public_url: Option<&str>, headers: &HeaderMap) -> String {
    if let Some(public_url) = public_url {
        return public_url.to_owned();
    }
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .filter(|host| !host.is_empty())
        .unwrap_or("127.0.0.1:8000");
    let scheme = headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .map(|proto| proto.split(',').next().unwrap_or_default().trim())
        .filter(|proto| proto.eq_ignore_ascii_case("https"))
        .map_or("http", |_| "https");
    format!("{scheme}://{host}")
}

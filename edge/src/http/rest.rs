//! Session REST: `POST /v1/chat/sessions`, and `GET` and `DELETE
//! /v1/chat/sessions/{id}`.
//!
//! Who may do what is the hub's decision ([`openclaw_proxy_core::Hub::authorize`]):
//! creation takes the app token; `GET` and `DELETE` take the session's own
//! `session_token` (or the app token unless session tokens are required).
//! Every check reads the headers only and comes before the body is read, so
//! a stranger cannot make the server read megabytes; creation also insists
//! on `Content-Type: application/json`, which a web page cannot send without
//! a CORS preflight.
//!
//! The body is the documented snake_case one or the original implementation's
//! camelCase one (`deviceId`, `inputSchema`, ...), or both spellings at once
//! when they agree ([`super::spelling`]). Only what the original required is
//! required: the device id and the app version. `device_name`, `chat_id`,
//! `tools`, and a tool's `description`, `input_schema` and `path` default as
//! in the original (`""`, none, `[]`, `""`, `{}`, none); `null` counts as
//! absent. Unknown fields are ignored so newer apps keep working.

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::{HeaderMap, Uri};
use openclaw_proxy_core::metrics::Surface;
use openclaw_proxy_core::{ClientAddr, Credential, Origin, Transport, proto};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::ApiError;
use super::public_url::{RequestHead, base_url};
use super::request::{
    ConnectionInfo, SessionIdPath, authorization, check_app_token, check_session_token, parse_json,
    read_body, refusal, require_json,
};
use super::spelling::pick;
use super::state::EdgeState;
use super::tool_body::{DeclarationsBody, ToolBody, tool_definitions};

/// The session registration body, each two-spelling field under both keys.
#[derive(Debug, Deserialize)]
pub struct CreateSessionBody {
    device_id: Option<String>,
    #[serde(rename = "deviceId")]
    device_id_camel: Option<String>,
    device_name: Option<String>,
    #[serde(rename = "deviceName")]
    device_name_camel: Option<String>,
    app_version: Option<String>,
    #[serde(rename = "appVersion")]
    app_version_camel: Option<String>,
    chat_id: Option<String>,
    #[serde(rename = "chatId")]
    chat_id_camel: Option<String>,
    tools: Option<Vec<ToolBody>>,
    #[serde(flatten)]
    declarations: DeclarationsBody,
    /// The OAuth subject the session is bound to.
    owner: Option<OwnerBody>,
    /// The session's name in its owner's one-URL view.
    name: Option<String>,
}

/// `"owner": {"subject": "...", "issuer": "..."}`; the issuer defaults to
/// the configured one.
#[derive(Debug, Deserialize)]
struct OwnerBody {
    subject: String,
    #[serde(default)]
    issuer: Option<String>,
}

impl CreateSessionBody {
    /// The core's request, or the first problem found, naming its field.
    fn into_request(self) -> Result<proto::CreateSessionRequest, ApiError> {
        let invalid = ApiError::InvalidBody;
        let device_id = pick(
            "device_id",
            self.device_id,
            "deviceId",
            self.device_id_camel,
        )
        .map_err(invalid)?
        .ok_or_else(|| invalid("missing field \"device_id\" (or \"deviceId\")".into()))?;
        let app_version = pick(
            "app_version",
            self.app_version,
            "appVersion",
            self.app_version_camel,
        )
        .map_err(invalid)?
        .ok_or_else(|| invalid("missing field \"app_version\" (or \"appVersion\")".into()))?;
        let device_name = pick(
            "device_name",
            self.device_name,
            "deviceName",
            self.device_name_camel,
        )
        .map_err(invalid)?;
        let chat_id =
            pick("chat_id", self.chat_id, "chatId", self.chat_id_camel).map_err(invalid)?;
        let tools = tool_definitions(self.tools.unwrap_or_default())?;
        let declarations = self.declarations.into_declarations()?;
        Ok(proto::CreateSessionRequest {
            metadata: Some(proto::SessionMetadata {
                device_id,
                device_name: device_name.unwrap_or_default(),
                app_version,
                chat_id: chat_id.unwrap_or_default(),
            }),
            tools,
            resources: declarations.resources.unwrap_or_default(),
            resource_templates: declarations.resource_templates.unwrap_or_default(),
            prompts: declarations.prompts.unwrap_or_default(),
            owner: self.owner.map(|owner| proto::SessionOwner {
                subject: owner.subject,
                issuer: owner.issuer.unwrap_or_default(),
            }),
            name: self.name.unwrap_or_default(),
        })
    }
}

/// The documented registration answer.
#[derive(Debug, Serialize)]
pub struct CreateSessionReply {
    #[serde(rename = "mcpSessionId")]
    mcp_session_id: String,
    bridge_url: String,
    mcp_url: String,
    /// The app side's token for this session only (`ocps_…`).
    session_token: String,
    /// The MCP side's token for this session only (`ocpm_…`).
    mcp_token: String,
    /// The session's name in its owner's one-URL view, as assigned.
    name: String,
}

/// `POST /v1/chat/sessions`.
pub async fn create_session(
    State(state): State<EdgeState>,
    headers: HeaderMap,
    uri: Uri,
    connection: Option<Extension<ConnectionInfo>>,
    body: Body,
) -> Result<Json<CreateSessionReply>, ApiError> {
    check_app_token(&state, &headers, Surface::Rest)?;
    require_json(&headers)?;
    let limit = state.config.max_body_bytes;
    let body = read_body(body, limit).await?;
    let request = parse_create_session(&body)?;
    let origin = Origin::new(
        Transport::Rest,
        connection.as_ref().map(|Extension(info)| info.remote),
    );
    let client = connection.as_ref().map(|Extension(info)| {
        let forwarded_for = headers
            .get("x-forwarded-for")
            .and_then(|value| value.to_str().ok());
        openclaw_proxy_core::limits::client_address(
            info.remote.ip(),
            forwarded_for,
            &state.hub.config().limits.trusted_proxies,
        )
    });
    let created = state.hub.create_session(request, origin, client).await?;
    let session_id = created.session_id;
    let head = RequestHead {
        headers: &headers,
        uri: &uri,
        connection: connection.as_ref().map(|Extension(info)| *info),
    };
    let base = base_url(state.config.public_url.as_deref(), &head);
    let ws_base = match base.split_once("://") {
        Some(("https", rest)) => format!("wss://{rest}"),
        Some((_, rest)) => format!("ws://{rest}"),
        None => format!("ws://{base}"),
    };
    Ok(Json(CreateSessionReply {
        bridge_url: format!("{ws_base}/v1/chat/sessions/{session_id}/bridge"),
        mcp_url: format!("{base}/v1/mcp/{session_id}"),
        mcp_session_id: session_id,
        session_token: created.session_token,
        mcp_token: created.mcp_token,
        name: created.name,
    }))
}

/// `GET /v1/chat/sessions/{session_id}`: the session as the hub describes it
/// (metadata, tools, whether a bridge is attached); 404 once it is gone.
pub async fn get_session(
    State(state): State<EdgeState>,
    headers: HeaderMap,
    SessionIdPath(session_id): SessionIdPath,
) -> Result<Json<Value>, ApiError> {
    check_session_token(&state, &session_id, Surface::Rest, &headers).await?;
    let catalog = state.hub.catalog(&session_id).await?;
    let session = state
        .hub
        .get_session(proto::GetSessionRequest { session_id })
        .await?;
    let metadata = session.metadata.unwrap_or_default();
    let tools: Vec<Value> = session
        .tools
        .into_iter()
        .map(|tool| {
            let schema = serde_json::from_str::<Value>(&tool.input_schema_json)
                .unwrap_or_else(|_| serde_json::json!({"type": "object"}));
            serde_json::json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": schema,
                "path": (!tool.path.is_empty()).then_some(tool.path),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({
        "mcpSessionId": session.session_id,
        "device_id": metadata.device_id,
        "device_name": metadata.device_name,
        "app_version": metadata.app_version,
        "chat_id": (!metadata.chat_id.is_empty()).then_some(metadata.chat_id),
        "tools": tools,
        "resources": catalog.resources.iter().map(|r| r.to_mcp()).collect::<Vec<_>>(),
        "resource_templates": catalog.resource_templates.iter().map(|t| t.to_mcp()).collect::<Vec<_>>(),
        "prompts": catalog.prompts.iter().map(|p| p.to_mcp()).collect::<Vec<_>>(),
        "bridge_connected": session.bridge_connected,
        "calls_in_flight": session.calls_in_flight,
        "name": session.name,
        "owner": session.owner.map(|owner| serde_json::json!({
            "subject": owner.subject,
            "issuer": owner.issuer,
        })),
    })))
}

/// `DELETE /v1/chat/sessions/{session_id}`: idempotent, as the hub decides
/// ([`openclaw_proxy_core::Hub::delete`]).
pub async fn delete_session(
    State(state): State<EdgeState>,
    headers: HeaderMap,
    SessionIdPath(session_id): SessionIdPath,
    client: Option<Extension<ClientAddr>>,
) -> Result<Json<Value>, ApiError> {
    let origin = Origin::new(Transport::Rest, client.map(|Extension(addr)| addr.0));
    let credential = Credential::app(authorization(&headers));
    state
        .hub
        .delete(&session_id, credential, origin)
        .await
        .map_err(|error| refusal(&state, Surface::Rest, error))?;
    Ok(Json(serde_json::json!({"ok": true})))
}

/// The body of `PUT /v1/chat/sessions/{id}/tools`: the creation body's tool
/// array, which replaces the session's tools, and any of its other lists,
/// which replace theirs (a list left out stays as it is).
#[derive(Debug, Deserialize)]
pub struct UpdateToolsBody {
    tools: Vec<ToolBody>,
    #[serde(flatten)]
    declarations: DeclarationsBody,
}

/// `PUT /v1/chat/sessions/{session_id}/tools` (the session token, or the app
/// token where allowed): replaces the session's tools, validated as at
/// creation, and the other lists the body carries. Answers `{"ok": true,
/// "tools": n, "resources": n, "resource_templates": n, "prompts": n}`.
pub async fn update_tools(
    State(state): State<EdgeState>,
    headers: HeaderMap,
    SessionIdPath(session_id): SessionIdPath,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    check_session_token(&state, &session_id, Surface::Rest, &headers).await?;
    require_json(&headers)?;
    let body = read_body(body, state.config.max_body_bytes).await?;
    let update = parse_update_tools(&body)?;
    let updated = state.hub.update_tools(&session_id, update).await?;
    Ok(Json(serde_json::json!({
        "ok": true,
        "tools": updated.tools,
        "resources": updated.resources,
        "resource_templates": updated.resource_templates,
        "prompts": updated.prompts,
    })))
}

/// A `POST /v1/chat/sessions` body, parsed and checked up to the core's
/// request (the core then validates the tools); the error names the field.
#[doc(hidden)]
pub fn parse_create_session(body: &[u8]) -> Result<proto::CreateSessionRequest, ApiError> {
    parse_json::<CreateSessionBody>(body)?.into_request()
}

/// A `PUT /v1/chat/sessions/{id}/tools` body, parsed up to the core's
/// update.
#[doc(hidden)]
pub fn parse_update_tools(body: &[u8]) -> Result<proto::UpdateTools, ApiError> {
    let body = parse_json::<UpdateToolsBody>(body)?;
    let tools = tool_definitions(body.tools)?;
    Ok(body.declarations.into_declarations()?.into_update(tools))
}

//! OAuth on the MCP endpoints: access tokens checked before the hub decides,
//! and how a client finds where to get one.
//!
//! An MCP client that meets a 401 reads `WWW-Authenticate: Bearer
//! resource_metadata="…"` (RFC 9728), fetches that document, signs its user
//! in at the authorization server it names, and asks for a token whose
//! audience is the resource (RFC 8707). The resource is the MCP endpoint's
//! public URL, `{public URL}/v1/mcp`, or one session's URL below it: each
//! has its metadata at the RFC's per-path location
//! (`/.well-known/oauth-protected-resource/v1/mcp/{id}`), and a token for
//! either opens that session (when its subject owns it). The metadata's
//! URLs are built on the base the proxy knows itself by
//! ([`crate::http::public_url`]); the resource, which says whom a token is
//! for, never on the request's headers: it is `OPENCLAW_PROXY_OAUTH_AUDIENCE`,
//! else below `OPENCLAW_PROXY_PUBLIC_URL`, else below the address the client
//! connected to, which the server allows on a loopback listen address only.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use openclaw_proxy_core::OAuthIdentity;
use openclaw_proxy_core::auth::{bearer, digest};
use openclaw_proxy_core::metrics::Surface;
use serde_json::json;

use super::McpState;
use crate::http::error::{ApiError, token_challenge};
use crate::http::public_url::{Base as PublicBase, RequestHead, base_url};
use crate::oauth::Verifier;

/// Where RFC 9728 puts the metadata, before the resource's path.
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The MCP endpoint's path below the base URL.
const MCP_PATH: &str = "/v1/mcp";

/// The base URL, split into its origin and path prefix.
struct Base {
    origin: String,
    prefix: String,
}

impl Base {
    /// The base URL the request reached ([`base_url`]): where its client
    /// finds the metadata.
    fn of(state: &McpState, head: &RequestHead<'_>) -> Self {
        Self::split(&base_url(state.config.public_url.as_deref(), head))
    }

    fn split(base: &str) -> Self {
        let after_scheme = base.find("://").map_or(0, |at| at + 3);
        let (origin, prefix) = match base[after_scheme..].find('/') {
            Some(slash) => base.split_at(after_scheme + slash),
            None => (base, ""),
        };
        Self {
            origin: origin.to_owned(),
            prefix: prefix.to_owned(),
        }
    }

    /// The metadata URL of the resource at `{prefix}/v1/mcp[/{id}]`.
    fn metadata_url(&self, session_id: Option<&str>) -> String {
        let path = match session_id {
            Some(id) => format!("{MCP_PATH}/{id}"),
            None => MCP_PATH.to_owned(),
        };
        format!("{}{METADATA_PATH}{}{path}", self.origin, self.prefix)
    }
}

/// The identity of a request's access token, when OAuth is on and the
/// bearer is a JWT that is neither the OpenClaw token nor a session token;
/// `None` leaves the bearer to the static checks. A refused token is the
/// answer (counted among the auth failures).
pub(super) async fn verify(
    state: &McpState,
    head: &RequestHead<'_>,
    session_id: Option<&str>,
) -> Result<Option<Arc<OAuthIdentity>>, ApiError> {
    let Some(verifier) = state.oauth.as_deref() else {
        return Ok(None);
    };
    let Some(token) = bearer(
        head.headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    ) else {
        return Ok(None);
    };
    if token.split('.').count() != 3 {
        return Ok(None);
    }
    let key = digest(token);
    let global = &state.hub.config().openclaw_token;
    if !global.is_open() && global.matches_digest(&key) {
        return Ok(None);
    }
    let session_id = session_id.filter(|id| !id.is_empty());
    let configured = verifier.settings().audience.as_deref();
    // Without a configured audience the resource is `{base}/v1/mcp`, or
    // the session's URL below it: compared piece by piece, with no URL
    // built for a request whose token is good.
    let base = PublicBase::own(state.config.public_url.as_deref(), head);
    let accepts = |audience: &str| match configured {
        Some(configured) => audience == configured,
        None => base
            .strip_from(audience)
            .and_then(|rest| rest.strip_prefix(MCP_PATH))
            .is_some_and(|rest| {
                rest.is_empty() || session_id.is_some_and(|id| rest.strip_prefix('/') == Some(id))
            }),
    };
    // Boxed: the verification (a key fetch among its states) is kilobytes,
    // and every MCP request's future would otherwise carry it.
    match Box::pin(verifier.verify_digested(token, key, accepts)).await {
        Ok(identity) => Ok(Some(identity)),
        Err(error) => {
            state.hub.metrics().auth_failure(Surface::Mcp);
            Err(error.into())
        }
    }
}

/// The answer to a refused MCP request: with OAuth on, its challenge names
/// the resource's metadata, and a presented credential that failed is
/// `invalid_token` (RFC 6750) unless the refusal already says more.
pub(super) fn refusal(
    state: &McpState,
    head: &RequestHead<'_>,
    session_id: Option<&str>,
    error: ApiError,
) -> Response {
    // The challenge is built from its parts, never from the header the
    // error rendered: the token's refusal adds its own, which are valid
    // in a header whatever the token said.
    let token_params = match &error {
        ApiError::Token(token) => Some(token_challenge(token)),
        _ => None,
    };
    let mut response = error.into_response();
    if state.oauth.is_none() {
        return response;
    }
    let challenged = response
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .is_some_and(|value| value.as_bytes().starts_with(b"Bearer"));
    if !challenged {
        return response;
    }
    // The resource is the URL the client used: one session's, or the
    // endpoint routed by `MCP-Session-Id`.
    let by_header = head.uri.path().trim_end_matches('/').ends_with(MCP_PATH);
    let session_id = session_id.filter(|id| !id.is_empty() && !by_header);
    let mut params = format!(
        "Bearer resource_metadata=\"{}\"",
        Base::of(state, head).metadata_url(session_id)
    );
    let presented = bearer(
        head.headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok()),
    )
    .is_some();
    match token_params {
        Some(more) => {
            params.push_str(", ");
            params.push_str(&more);
        }
        None if presented => params.push_str(", error=\"invalid_token\""),
        None => {}
    }
    if let Ok(value) = HeaderValue::from_str(&params) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// `GET /.well-known/oauth-protected-resource[{prefix}/v1/mcp[/{id}]]`: the
/// RFC 9728 metadata of the MCP endpoint, or of one session's URL; 404
/// when OAuth is off or the path names no MCP resource.
pub async fn metadata(State(state): State<McpState>, request: Request) -> Response {
    let head = RequestHead::of(&request);
    if let Err(error) = state.guard.check(head.headers, head.uri) {
        return error.into_response();
    }
    let not_found = || {
        ApiError::NotFound(
            openclaw_proxy_core::escape::truncated(request.uri().path()).into_owned(),
        )
        .into_response()
    };
    let Some(verifier) = state.oauth.as_deref() else {
        return not_found();
    };
    let base = Base::of(&state, &head);
    let resource_path = request
        .uri()
        .path()
        .strip_prefix(METADATA_PATH)
        .unwrap_or_default();
    let session_id = match resource_path
        .strip_prefix(base.prefix.as_str())
        .unwrap_or(resource_path)
    {
        "" | MCP_PATH => None,
        path => match path
            .strip_prefix(MCP_PATH)
            .and_then(|rest| rest.strip_prefix('/'))
        {
            Some(id) if !id.is_empty() && !id.contains('/') => Some(id),
            _ => return not_found(),
        },
    };
    let settings = verifier.settings();
    let mut document = json!({
        "resource": resource(&state, &head, verifier, session_id),
        "authorization_servers": [settings.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "openclaw-proxy MCP endpoint",
    });
    if !settings.required_scopes.is_empty() {
        document["scopes_supported"] = json!(settings.required_scopes);
    }
    (StatusCode::OK, Json(document)).into_response()
}

/// The resource: the configured audience, else the MCP endpoint's URL (one
/// session's with `session_id`) below the base no header names
/// ([`PublicBase::own`]).
fn resource(
    state: &McpState,
    head: &RequestHead<'_>,
    verifier: &Verifier,
    session_id: Option<&str>,
) -> String {
    if let Some(audience) = &verifier.settings().audience {
        return audience.clone();
    }
    let base = PublicBase::own(state.config.public_url.as_deref(), head).url();
    match session_id {
        Some(id) => format!("{base}{MCP_PATH}/{id}"),
        None => format!("{base}{MCP_PATH}"),
    }
}

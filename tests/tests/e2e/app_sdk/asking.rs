//! The example apps' `confirm_echo`, which asks the user through the MCP
//! client before it echoes. rmcp's client, with an elicitation handler as an
//! agent host has one, answers the app's form at 2025-11-25 (a request on the
//! call's SSE answer, the response POSTed back) and at 2026-07-28 (an
//! `input_required` result, the call retried with the answer): the result
//! carries what the user filled in when they accept, and says so when they
//! decline.

use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::json;

use openclaw_proxy_tests::*;

/// What the user types into the form when they accept.
const NOTE: &str = "written by the user";

/// A host whose user answers every form with `action` (and [`NOTE`] when
/// accepting); keeps the messages it was shown.
#[derive(Clone)]
struct User {
    action: ElicitationAction,
    shown: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for User {
    fn get_info(&self) -> ClientConfig {
        let capabilities = ClientCapabilities::builder().enable_elicitation().build();
        let mut info = ClientConfig::new(capabilities, Implementation::new("example-user", "0"));
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        info
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Err(ErrorData::invalid_params(
                "the example asks with a form",
                None,
            ));
        };
        if let Ok(mut shown) = self.shown.lock() {
            shown.push(message);
        }
        let result = ElicitResult::new(self.action.clone());
        Ok(match self.action {
            ElicitationAction::Accept => result.with_content(json!({"note": NOTE})),
            _ => result,
        })
    }
}

/// The user's host connected to the session at `version`: `initialize`
/// up to 2025-11-25, `server/discover` at 2026-07-28.
async fn connect(
    server: &TestServer,
    session_id: &str,
    user: User,
    version: &ProtocolVersion,
) -> RunningService<RoleClient, User> {
    let url = format!("{}/v1/mcp/{session_id}", server.http_url());
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(OPENCLAW_TOKEN);
    let transport = StreamableHttpClientTransport::with_client(http_client(), config);
    let connected = if *version == ProtocolVersion::V_2026_07_28 {
        let mode = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        no_hang(user.serve_with_lifecycle(transport, mode)).await
    } else {
        no_hang(user.serve(transport)).await
    };
    connected.expect("the host connects")
}

/// Calls the example's `confirm_echo` at both revisions, its user accepting
/// and then declining.
pub(super) async fn confirm_echo_through(server: &TestServer, session_id: &str) {
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        for action in [ElicitationAction::Accept, ElicitationAction::Decline] {
            let user = User {
                action: action.clone(),
                shown: Arc::default(),
            };
            let client = connect(server, session_id, user.clone(), &version).await;
            let result = no_hang(client.call_tool(call("confirm_echo", json!({"text": "hi"}))))
                .await
                .unwrap_or_else(|error| panic!("confirm_echo at {version}: {error}"));
            let _ = client.cancel().await;
            let shown = user.shown.lock().map(|s| s.clone()).unwrap_or_default();
            assert_eq!(shown, ["Echo \"hi\" back?"], "at {version}");
            assert_ne!(result.is_error, Some(true), "at {version}: {result:?}");
            if action == ElicitationAction::Accept {
                assert_eq!(
                    result.structured_content,
                    Some(json!({"echoed_text": "hi", "note": NOTE})),
                    "at {version}: {result:?}"
                );
            } else {
                assert_eq!(
                    texts(&result),
                    ["The user chose decline: nothing was echoed."],
                    "at {version}: {result:?}"
                );
            }
        }
    }
}

//! The example apps' `confirm_echo`, which asks the user through the MCP
//! client before it echoes. rmcp's client, with an elicitation handler as an
//! agent host has one, answers the app's form at 2025-11-25 (a request on the
//! call's SSE answer, the response POSTed back) and at 2026-07-28 (an
//! `input_required` result, the call retried with the answer): the result
//! carries what the user filled in when they accept, and says so when they
//! decline.
//!
//! And a prompt and a resource whose app asks the user while it answers
//! (`ctx.elicit` in a prompt's and a read's handler): the same host gets
//! them at both revisions (an SSE answer up to 2025-11-25, `input_required`
//! rounds at 2026-07-28), and raw 2026-07-28 retries that name another
//! request, or come from a client that declared no elicitation, are told
//! why.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use openclaw_proxy_app::{
    App, CallContext as AppCall, Elicitation, McpError, Prompt, PromptMessage, ReadRequest,
    ReadResourceResult, Resource, ResourceContents, Serving,
};
use openclaw_proxy_tests::prometheus::Scrape;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    GetPromptRequestParams, Implementation, ProtocolVersion, ReadResourceRequestParams,
    ResourceContents as ReadContents,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde_json::{Value, json};

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
        let capabilities: ClientCapabilities =
            serde_json::from_value(serde_json::json!({"elicitation": {}})).unwrap_or_default();
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

/// The prompt and the resource of [`asking_app`], and what each asks.
const BRIEFING: &str = "briefing";
const BRIEFING_QUESTION: &str = "What should the briefing cover?";
const NOTES: &str = "notes://today";
const NOTES_QUESTION: &str = "Whose notes?";

/// What the user answered, or the action they took instead.
fn answered(
    answer: Result<openclaw_proxy_app::ElicitResult, openclaw_proxy_app::AskError>,
) -> Result<String, McpError> {
    let answer = answer.map_err(|error| McpError::internal(error.to_string()))?;
    Ok(answer
        .content
        .and_then(|content| {
            content
                .get("note")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("{:?}", answer.action)))
}

fn note_form(question: &str) -> Elicitation {
    Elicitation::form(
        question,
        json!({"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"]}),
    )
}

/// A gRPC app (the app crate) whose prompt and resource each ask the user
/// one question and put the answer in what they return.
async fn asking_app(server: &TestServer) -> Serving {
    let briefing = Prompt::with_arguments(
        BRIEFING,
        "A briefing on what the user says.",
        [],
        |_: Value, call: AppCall| async move {
            let note = answered(call.elicit(note_form(BRIEFING_QUESTION)).await)?;
            Ok::<_, McpError>(vec![PromptMessage::user(format!("Brief me on: {note}"))])
        },
    );
    let other =
        Prompt::with_arguments("other", "Asks nothing.", [], |_: Value, _: AppCall| async {
            Ok::<_, McpError>(vec![PromptMessage::user("other")])
        });
    let notes = Resource::new(
        NOTES,
        "notes",
        |read: ReadRequest, call: AppCall| async move {
            let note = answered(call.elicit(note_form(NOTES_QUESTION)).await)?;
            let contents = ResourceContents::text(read.uri(), format!("Notes of {note}"));
            Ok::<_, McpError>(ReadResourceResult::new([contents]))
        },
    );
    App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .prompt(briefing)
        .prompt(other)
        .resource(notes)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving")
}

fn pending(server: &TestServer) -> f64 {
    Scrape::parse(&server.hub.render_metrics())
        .expect("metrics")
        .value("openclaw_proxy_client_requests_pending", &[])
}

#[tokio::test]
async fn a_prompt_and_a_read_whose_app_asks_the_user_are_answered_at_both_revisions() {
    let server = TestServer::start().await;
    let serving = asking_app(&server).await;
    let session_id = serving.session().session_id;
    for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
        let user = User {
            action: ElicitationAction::Accept,
            shown: Arc::default(),
        };
        let client = connect(&server, &session_id, user.clone(), &version).await;
        let prompt = no_hang(client.get_prompt(GetPromptRequestParams::new(BRIEFING)))
            .await
            .unwrap_or_else(|error| panic!("prompts/get at {version}: {error}"));
        let texts: Vec<_> = prompt
            .messages
            .iter()
            .filter_map(|message| message.content.as_text().map(|text| text.text.as_str()))
            .collect();
        assert_eq!(texts, [format!("Brief me on: {NOTE}")], "at {version}");
        let read = no_hang(client.read_resource(ReadResourceRequestParams::new(NOTES)))
            .await
            .unwrap_or_else(|error| panic!("resources/read at {version}: {error}"));
        let texts: Vec<_> = read
            .contents
            .iter()
            .filter_map(|contents| match contents {
                ReadContents::TextResourceContents { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, [format!("Notes of {NOTE}")], "at {version}");
        let _ = client.cancel().await;
        let shown = user.shown.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(shown, [BRIEFING_QUESTION, NOTES_QUESTION], "at {version}");
    }
    eventually("nothing pending", Duration::from_secs(10), || async {
        pending(&server) == 0.0
    })
    .await;
}

/// POSTs a 2026-07-28 `prompts/get` of `prompt` whose client declares
/// `capabilities`, with `more` params (answers, state).
async fn get_2026(mcp_url: &str, prompt: &str, capabilities: Value, more: Value) -> Value {
    let mut params = json!({"name": prompt, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }});
    if let (Some(params), Some(more)) = (params.as_object_mut(), more.as_object()) {
        params.extend(more.clone());
    }
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "prompts/get", "params": params});
    let reply = mcp_post(mcp_url, &body)
        .bearer_auth(OPENCLAW_TOKEN)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "prompts/get")
        .header("mcp-name", prompt)
        .send()
        .await;
    assert_eq!(reply.status(), 200, "{}", reply.text());
    reply.json()
}

#[tokio::test]
async fn a_prompts_rounds_take_only_its_own_retry_and_a_client_that_cannot_be_asked_is_named() {
    let server = TestServer::start().await;
    let serving = asking_app(&server).await;
    let mcp_url = format!(
        "{}/v1/mcp/{}",
        server.http_url(),
        serving.session().session_id
    );
    let eliciting = json!({"elicitation": {"form": {}}});

    let first = get_2026(&mcp_url, BRIEFING, eliciting.clone(), json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{first}");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert_eq!(request["params"]["message"], BRIEFING_QUESTION, "{first}");
    let state = result["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    let answers = json!({key.clone(): {"action": "accept", "content": {"note": "the harbour"}}});

    // Another prompt's retry cannot take this call; it stays parked.
    let retry = json!({"inputResponses": answers, "requestState": state});
    let wrong = get_2026(&mcp_url, "other", eliciting.clone(), retry.clone()).await;
    let message = wrong["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(wrong["error"]["code"], -32602, "{wrong}");
    assert!(
        message.contains("another request") && message.contains(BRIEFING),
        "{wrong}"
    );

    let done = get_2026(&mcp_url, BRIEFING, eliciting.clone(), retry.clone()).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert_eq!(
        done["result"]["messages"][0]["content"]["text"], "Brief me on: the harbour",
        "{done}"
    );
    // Resumed once: the same state again finds no call.
    let again = get_2026(&mcp_url, BRIEFING, eliciting, retry).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(
        again["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("no call waits")),
        "{again}"
    );

    // A client that declared no elicitation: the app is told why at once,
    // and its error names the capability.
    let refused = get_2026(&mcp_url, BRIEFING, json!({"sampling": {}}), json!({})).await;
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("did not declare the elicitation capability"),
        "{refused}"
    );
    eventually("nothing pending", Duration::from_secs(10), || async {
        pending(&server) == 0.0
    })
    .await;
}

/// A tool the crate declares with `confirm_with` and `timeout`: the proxy
/// keeps both (its session shows them), asks the user the app's question
/// before the app sees a call, and a declined call never reaches the app.
#[tokio::test]
async fn a_tool_declared_to_be_confirmed_is_asked_about_first_with_the_apps_question() {
    let server = TestServer::start().await;
    let ran = Arc::new(Mutex::new(0_u32));
    let counted = ran.clone();
    let tool = openclaw_proxy_app::Tool::with_schema(
        "erase",
        "Erases the notes.",
        json!({"type": "object"}),
        move |_: Value, _: AppCall| {
            if let Ok(mut ran) = counted.lock() {
                *ran += 1;
            }
            async { Ok::<_, openclaw_proxy_app::ToolError>("erased") }
        },
    )
    .confirm_with("Erase every note?")
    .timeout(Duration::from_millis(1_500));
    let serving = App::builder(server.http_url())
        .app_token(APP_TOKEN)
        .tool(tool)
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving");
    let session_id = serving.session().session_id;

    let request = openclaw_proxy_core::proto::GetSessionRequest {
        session_id: session_id.clone(),
    };
    let session = server.hub.get_session(request).await.expect("the session");
    let declared = &session.tools[0];
    assert_eq!(
        declared
            .confirm
            .as_ref()
            .map(|confirm| confirm.message.as_str()),
        Some("Erase every note?")
    );
    assert_eq!(
        declared.timeout_seconds, 2,
        "1.5 s rounds up to whole seconds"
    );

    for action in [ElicitationAction::Decline, ElicitationAction::Accept] {
        let user = User {
            action: action.clone(),
            shown: Arc::default(),
        };
        let client = connect(
            &server,
            &session_id,
            user.clone(),
            &ProtocolVersion::V_2025_11_25,
        )
        .await;
        let result = no_hang(client.call_tool(call("erase", json!({}))))
            .await
            .expect("tools/call answered");
        let _ = client.cancel().await;
        let shown = user.shown.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(shown.len(), 1, "asked once: {shown:?}");
        assert!(shown[0].starts_with("Erase every note?"), "{shown:?}");
        let runs = ran.lock().map(|ran| *ran).unwrap_or_default();
        if action == ElicitationAction::Decline {
            assert_eq!(result.is_error, Some(true), "{result:?}");
            assert_eq!(runs, 0, "a declined call reached the app");
        } else {
            assert_ne!(result.is_error, Some(true), "{result:?}");
            assert_eq!(texts(&result), ["erased"], "{result:?}");
            assert_eq!(runs, 1);
        }
    }
    let _ = serving.shutdown().await;
}

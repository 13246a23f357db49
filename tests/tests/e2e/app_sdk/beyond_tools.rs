//! Resources, resource templates, prompts, completions and log records of an
//! app written with the app crate, seen by the official Rust SDK's MCP
//! client through the real server: the proxy lists them from the
//! declaration and carries `resources/read`, `prompts/get` and
//! `completion/complete` over the gRPC bridge as `mcp_request`.

use openclaw_proxy_app::schemars::JsonSchema;
use openclaw_proxy_app::{
    CallContext, Completion, CompletionRef, CompletionRequest, Content, GetPromptResult, LogLevel,
    McpError, Prompt, PromptMessage, ReadRequest, Resource, ResourceContents, ResourceLink,
    ResourceTemplate, Role, Serving, Tool, ToolError, Update,
};
use openclaw_proxy_tests::*;
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::ServiceError;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Reported, app};

/// A 1×1 PNG, as base64.
const PNG: &str = openclaw_proxy_tests::conformance::PNG_1X1;
/// A tiny WAV, as base64.
const WAV: &str = openclaw_proxy_tests::conformance::WAV_SILENCE;

#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "openclaw_proxy_app::schemars")]
struct SummariseArgs {
    /// The note to summarise.
    note: String,
    /// How to write the summary.
    style: Option<String>,
}

/// A notes app: two resources (text and binary), a template for notes by
/// id, a prompt that uses every content type, completions, and a tool and
/// a resource that write log records.
fn notes_app(url: &str, reported: &Reported) -> openclaw_proxy_app::AppBuilder {
    let readme = Resource::new(
        "notes:///readme",
        "readme",
        |read: ReadRequest, _: CallContext| async move {
            Ok::<_, McpError>(
                ResourceContents::text(read.uri(), "# Notes\nAsk for notes:///notes/{id}.")
                    .mime_type("text/markdown"),
            )
        },
    )
    .title("Read me")
    .description("How the notes are organised.")
    .mime_type("text/markdown")
    .size(36);
    let logo = Resource::new(
        "notes:///logo.png",
        "logo",
        |read: ReadRequest, _: CallContext| async move {
            Ok::<_, McpError>(ResourceContents::blob(read.uri(), PNG).mime_type("image/png"))
        },
    )
    .mime_type("image/png");
    let logged = Resource::new(
        "notes:///logged",
        "logged",
        |read: ReadRequest, call: CallContext| async move {
            call.log(LogLevel::Warning, "reader", json!({"read": read.uri()}))
                .await;
            Ok::<_, McpError>(ResourceContents::text(read.uri(), "logged"))
        },
    );
    let note = ResourceTemplate::new(
        "notes:///notes/{id}",
        "note",
        |read: ReadRequest, _: CallContext| async move {
            match read.variable("id") {
                Some(id @ ("1" | "2")) => {
                    Ok(ResourceContents::text(read.uri(), format!("Note {id}"))
                        .mime_type("text/plain"))
                }
                _ => Err(McpError::resource_not_found(read.uri())),
            }
        },
    )
    .title("A note")
    .description("One note, by id.")
    .mime_type("text/plain");
    let summarise = Prompt::new(
        "summarise_note",
        "Summarise one note.",
        |args: SummariseArgs, _: CallContext| async move {
            let style = args.style.unwrap_or_else(|| "brief".to_owned());
            let uri = format!("notes:///notes/{}", args.note);
            Ok::<_, McpError>(
                GetPromptResult::new([
                    PromptMessage::user(format!("Summarise note {} ({style}).", args.note)),
                    PromptMessage::user(Content::resource(
                        ResourceContents::text(&uri, "Note body").mime_type("text/plain"),
                    )),
                    PromptMessage::user(Content::resource_link(
                        ResourceLink::new(&uri, "note").mime_type("text/plain"),
                    )),
                    PromptMessage::user(Content::image(PNG, "image/png")),
                    PromptMessage::new(Role::Assistant, Content::audio(WAV, "audio/wav")),
                ])
                .description(format!("A {style} summary")),
            )
        },
    )
    .title("Summarise a note");
    let logging_tool = Tool::with_schema(
        "log_and_answer",
        "Writes a debug and an info record, then answers.",
        json!({"type": "object"}),
        |_: Value, call: CallContext| async move {
            call.log(LogLevel::Debug, "notes", "too detailed").await;
            call.log(LogLevel::Info, "notes", json!({"step": "answering"}))
                .await;
            Ok::<_, ToolError>(json!({"done": true}))
        },
    );
    app(url, vec![logging_tool], reported)
        .resource(readme)
        .resource(logo)
        .resource(logged)
        .resource_template(note)
        .prompt(summarise)
        .completion(|request: CompletionRequest, _: CallContext| async move {
            let choices: &[&str] = match (request.reference(), request.argument()) {
                (CompletionRef::Prompt(_), "style") => &["brief", "bulleted", "detailed"],
                (CompletionRef::ResourceTemplate(_), "id") => &["1", "2"],
                _ => &[],
            };
            let prefix = request.value().to_owned();
            Ok::<_, McpError>(Completion::new(
                choices
                    .iter()
                    .filter(|choice| choice.starts_with(&prefix))
                    .copied(),
            ))
        })
}

/// The notes app serving on `server`.
async fn serve_notes(server: &TestServer) -> Serving {
    notes_app(&server.http_url(), &Reported::default())
        .build()
        .expect("valid app")
        .serve()
        .await
        .expect("serving")
}

/// The JSON-RPC error a request failed with.
fn rpc_error(error: ServiceError) -> rmcp::model::ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => panic!("expected a JSON-RPC error, got {other}"),
    }
}

fn json_of(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("serialisable")
}

#[tokio::test]
async fn resources_templates_and_prompts_are_listed_through_mcp() {
    let server = TestServer::start().await;
    let serving = serve_notes(&server).await;
    let client = mcp_connect(
        &server.http_url(),
        &serving.session().session_id,
        Route::Path,
    )
    .await;

    let resources = json_of(
        no_hang(client.list_all_resources())
            .await
            .expect("resources/list"),
    );
    assert_eq!(
        resources[0],
        json!({"uri": "notes:///readme", "name": "readme", "title": "Read me",
               "description": "How the notes are organised.", "mimeType": "text/markdown", "size": 36}),
        "{resources}"
    );
    let uris: Vec<&str> = resources
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|resource| resource["uri"].as_str())
        .collect();
    assert_eq!(
        uris,
        ["notes:///readme", "notes:///logo.png", "notes:///logged"]
    );

    let templates = json_of(
        no_hang(client.list_all_resource_templates())
            .await
            .expect("resources/templates/list"),
    );
    assert_eq!(
        templates,
        json!([{"uriTemplate": "notes:///notes/{id}", "name": "note", "title": "A note",
                "description": "One note, by id.", "mimeType": "text/plain"}])
    );

    let prompts = json_of(
        no_hang(client.list_all_prompts())
            .await
            .expect("prompts/list"),
    );
    assert_eq!(prompts[0]["name"], "summarise_note");
    assert_eq!(prompts[0]["title"], "Summarise a note");
    assert_eq!(prompts[0]["description"], "Summarise one note.");
    let mut arguments = prompts[0]["arguments"]
        .as_array()
        .cloned()
        .expect("arguments");
    arguments.sort_by_key(|argument| argument["name"].as_str().map(str::to_owned));
    assert_eq!(
        arguments,
        [
            json!({"name": "note", "description": "The note to summarise.", "required": true}),
            json!({"name": "style", "description": "How to write the summary.", "required": false}),
        ]
    );
    let _ = client.cancel().await;
    serving.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_resource_is_read_as_text_and_as_a_blob() {
    let server = TestServer::start().await;
    let serving = serve_notes(&server).await;
    let client = mcp_connect(
        &server.http_url(),
        &serving.session().session_id,
        Route::Path,
    )
    .await;

    let text = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///readme")))
        .await
        .expect("resources/read of text");
    assert_eq!(
        json_of(&text.contents),
        json!([{"uri": "notes:///readme", "mimeType": "text/markdown",
                "text": "# Notes\nAsk for notes:///notes/{id}."}])
    );
    let blob = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///logo.png")))
        .await
        .expect("resources/read of a blob");
    assert_eq!(
        json_of(&blob.contents),
        json!([{"uri": "notes:///logo.png", "mimeType": "image/png", "blob": PNG}])
    );
    let _ = client.cancel().await;
    serving.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_uri_that_fits_a_template_is_read_through_its_handler() {
    let server = TestServer::start().await;
    let serving = serve_notes(&server).await;
    let client = mcp_connect(
        &server.http_url(),
        &serving.session().session_id,
        Route::Path,
    )
    .await;

    let note = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///notes/2")))
        .await
        .expect("resources/read through the template");
    assert_eq!(
        json_of(&note.contents),
        json!([{"uri": "notes:///notes/2", "mimeType": "text/plain", "text": "Note 2"}])
    );
    // The template's handler decides that note 9 does not exist.
    let missing = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///notes/9")))
        .await
        .map(|result| json_of(&result))
        .expect_err("no note 9");
    let missing = rpc_error(missing);
    assert_eq!(missing.code.0, -32002, "{missing:?}");
    assert_eq!(missing.data, Some(json!({"uri": "notes:///notes/9"})));
    let _ = client.cancel().await;
    serving.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn an_unknown_uri_is_resource_not_found_carrying_the_uri() {
    let server = TestServer::start().await;
    let serving = serve_notes(&server).await;
    let session_id = serving.session().session_id;
    let uri = "notes:///nothing/here";

    let client = mcp_connect(&server.http_url(), &session_id, Route::Path).await;
    let refused = no_hang(client.read_resource(ReadResourceRequestParams::new(uri)))
        .await
        .map(|result| json_of(&result))
        .expect_err("an unknown URI");
    let refused = rpc_error(refused);
    assert_eq!(
        refused.code.0, -32002,
        "2025-11-25 names -32002: {refused:?}"
    );
    assert!(refused.message.contains(uri), "{refused:?}");
    assert_eq!(refused.data, Some(json!({"uri": uri})));
    let _ = client.cancel().await;

    // 2026-07-28 names "invalid params" for it (SEP-2164), still with the URI.
    let stateless = mcp_connect_stateless(&server.http_url(), &session_id).await;
    let refused = no_hang(stateless.read_resource(ReadResourceRequestParams::new(uri)))
        .await
        .map(|result| json_of(&result))
        .expect_err("an unknown URI at 2026-07-28");
    let refused = rpc_error(refused);
    assert_eq!(refused.code.0, -32602, "{refused:?}");
    assert_eq!(refused.data, Some(json!({"uri": uri})));
    let _ = stateless.cancel().await;
    serving.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_prompt_is_got_with_its_arguments_and_every_content_type() {
    let server = TestServer::start().await;
    let serving = serve_notes(&server).await;
    let client = mcp_connect(
        &server.http_url(),
        &serving.session().session_id,
        Route::Path,
    )
    .await;

    let arguments = json!({"note": "2", "style": "bulleted"});
    let Value::Object(arguments) = arguments else {
        unreachable!("an object");
    };
    let prompt = no_hang(
        client.get_prompt(GetPromptRequestParams::new("summarise_note").with_arguments(arguments)),
    )
    .await
    .expect("prompts/get");
    assert_eq!(prompt.description.as_deref(), Some("A bulleted summary"));
    assert_eq!(
        json_of(&prompt.messages),
        json!([
            {"role": "user", "content": {"type": "text", "text": "Summarise note 2 (bulleted)."}},
            {"role": "user", "content": {"type": "resource", "resource":
                {"uri": "notes:///notes/2", "mimeType": "text/plain", "text": "Note body"}}},
            {"role": "user", "content": {"type": "resource_link", "uri": "notes:///notes/2",
                "name": "note", "mimeType": "text/plain"}},
            {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
            {"role": "assistant", "content": {"type": "audio", "data": WAV, "mimeType": "audio/wav"}}
        ])
    );

    let unknown = no_hang(client.get_prompt(GetPromptRequestParams::new("no_such_prompt")))
        .await
        .map(|result| json_of(&result))
        .expect_err("an unknown prompt");
    let unknown = rpc_error(unknown);
    assert_eq!(unknown.code.0, -32602, "{unknown:?}");
    assert!(unknown.message.contains("no_such_prompt"), "{unknown:?}");
    let missing = no_hang(client.get_prompt(GetPromptRequestParams::new("summarise_note")))
        .await
        .map(|result| json_of(&result))
        .expect_err("a missing argument");
    let missing = rpc_error(missing);
    assert_eq!(missing.code.0, -32602, "{missing:?}");
    assert!(missing.message.contains("`note`"), "{missing:?}");
    let _ = client.cancel().await;
    serving.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn completion_suggestions_come_from_the_apps_handler() {
    let server = TestServer::start().await;
    let serving = serve_notes(&server).await;
    let client = mcp_connect(
        &server.http_url(),
        &serving.session().session_id,
        Route::Path,
    )
    .await;

    let styles = no_hang(client.complete_prompt_argument("summarise_note", "style", "b", None))
        .await
        .expect("completion/complete for a prompt");
    assert_eq!(styles.values, ["brief", "bulleted"]);
    let ids = no_hang(client.complete_resource_argument("notes:///notes/{id}", "id", "", None))
        .await
        .expect("completion/complete for a template");
    assert_eq!(ids.values, ["1", "2"]);
    let unknown = no_hang(client.complete_prompt_argument("no_such_prompt", "style", "", None))
        .await
        .map(|completion| json_of(&completion))
        .expect_err("an unknown prompt");
    assert_eq!(rpc_error(unknown).code.0, -32602);
    let _ = client.cancel().await;
    serving.shutdown().await.expect("shutdown");
}

/// Log records: MCP deprecates logging from 2026-07-28 (SEP-2577) but
/// keeps it for the clients of 2025-11-25 that use it, as this test does.
#[allow(deprecated, reason = "rmcp marks MCP logging deprecated (SEP-2577)")]
mod logs {
    use std::time::Duration;

    use rmcp::model::{
        ClientCapabilities, ClientConfig, Implementation, LoggingLevel,
        LoggingMessageNotificationParam, ReadResourceRequestParams, SetLevelRequestParams,
    };
    use rmcp::service::{NotificationContext, RunningService};
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::{ClientHandler, RoleClient, ServiceExt};
    use serde_json::json;
    use tokio::sync::mpsc;

    use openclaw_proxy_tests::*;

    use super::serve_notes;

    /// An MCP client that keeps the log records it receives.
    #[derive(Clone)]
    struct LogReader {
        records: mpsc::UnboundedSender<LoggingMessageNotificationParam>,
    }

    impl ClientHandler for LogReader {
        fn get_info(&self) -> ClientConfig {
            ClientConfig::new(
                ClientCapabilities::default(),
                Implementation::new("openclaw-proxy-tests-logs", "0"),
            )
        }

        async fn on_logging_message(
            &self,
            params: LoggingMessageNotificationParam,
            _context: NotificationContext<RoleClient>,
        ) {
            let _ = self.records.send(params);
        }
    }

    /// A client on the session's MCP URL that hands over every log record it
    /// receives.
    async fn log_reader(
        base: &str,
        session_id: &str,
    ) -> (
        RunningService<RoleClient, LogReader>,
        mpsc::UnboundedReceiver<LoggingMessageNotificationParam>,
    ) {
        let (records, received) = mpsc::unbounded_channel();
        let config =
            StreamableHttpClientTransportConfig::with_uri(format!("{base}/v1/mcp/{session_id}"))
                .auth_header(OPENCLAW_TOKEN);
        let transport =
            StreamableHttpClientTransport::with_client(openclaw_proxy_tests::http_client(), config);
        let client = LogReader { records }
            .serve(transport)
            .await
            .expect("MCP client connects");
        (client, received)
    }

    /// The next record received, within a bound.
    async fn next_record(
        received: &mut mpsc::UnboundedReceiver<LoggingMessageNotificationParam>,
    ) -> LoggingMessageNotificationParam {
        tokio::time::timeout(Duration::from_secs(10), received.recv())
            .await
            .expect("a log record within 10 s")
            .expect("the client is alive")
    }

    #[tokio::test]
    async fn log_records_written_during_a_call_reach_the_client_at_its_level() {
        let server = TestServer::start().await;
        let serving = serve_notes(&server).await;
        let (client, mut received) =
            log_reader(&server.http_url(), &serving.session().session_id).await;
        no_hang(client.set_level(SetLevelRequestParams::new(LoggingLevel::Info)))
            .await
            .expect("logging/setLevel");

        let result = no_hang(client.call_tool(call("log_and_answer", json!({}))))
            .await
            .expect("tools/call");
        assert_eq!(result.structured_content, Some(json!({"done": true})));
        // The debug record was written first: had it been passed on, it would
        // arrive before the info one.
        let record = next_record(&mut received).await;
        assert_eq!(record.level, LoggingLevel::Info, "{record:?}");
        assert_eq!(record.logger.as_deref(), Some("notes"));
        assert_eq!(record.data, json!({"step": "answering"}));

        // A resource's handler logs for its read the same way.
        no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///logged")))
            .await
            .expect("resources/read");
        let record = next_record(&mut received).await;
        assert_eq!(record.level, LoggingLevel::Warning, "{record:?}");
        assert_eq!(record.logger.as_deref(), Some("reader"));
        assert_eq!(record.data, json!({"read": "notes:///logged"}));
        assert!(received.try_recv().is_err(), "no other record");
        let _ = client.cancel().await;
        serving.shutdown().await.expect("shutdown");
    }
}

#[tokio::test]
async fn an_update_while_serving_replaces_the_listed_resources_and_prompts() {
    let server = TestServer::start().await;
    let serving = serve_notes(&server).await;
    let session_id = serving.session().session_id;
    let fresh = Resource::new(
        "notes:///fresh",
        "fresh",
        |read: ReadRequest, _: CallContext| async move {
            Ok::<_, McpError>(ResourceContents::text(read.uri(), "new"))
        },
    );
    no_hang(serving.update(Update::new().resources([fresh]).prompts([])))
        .await
        .expect("the proxy takes the update");

    let client = mcp_connect(&server.http_url(), &session_id, Route::Path).await;
    let resources = json_of(
        no_hang(client.list_all_resources())
            .await
            .expect("resources/list"),
    );
    assert_eq!(
        resources,
        json!([{"uri": "notes:///fresh", "name": "fresh"}])
    );
    let prompts = no_hang(client.list_all_prompts())
        .await
        .expect("prompts/list");
    assert!(prompts.is_empty(), "{prompts:?}");
    let templates = no_hang(client.list_all_resource_templates())
        .await
        .expect("resources/templates/list");
    assert_eq!(templates.len(), 1, "templates were left as they were");
    let read = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///fresh")))
        .await
        .expect("the new resource is read");
    assert_eq!(json_of(&read.contents)[0]["text"], "new");
    let gone = no_hang(client.read_resource(ReadResourceRequestParams::new("notes:///readme")))
        .await
        .map(|result| json_of(&result))
        .expect_err("the old resource is gone");
    assert_eq!(rpc_error(gone).code.0, -32002);
    let _ = client.cancel().await;
    serving.shutdown().await.expect("shutdown");
}

//! Property tests of the edge's parsers of outside input: the WebSocket
//! bridge's frame parser, the REST bodies and their two spellings, the
//! MCP server's reading of JSON-RPC messages, and the Host/Origin guard.
//!
//! For each: arbitrary input never panics; valid input is accepted and
//! keeps its values; invalid input gets an error whose text is bounded and
//! holds no raw control character (it is sent to the client and may be
//! logged).

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt;
use openclaw_proxy_core::Inbound;
use openclaw_proxy_core::proto::{self, app_message};
use openclaw_proxy_edge::EdgeConfig;
use openclaw_proxy_edge::http::mcp::jsonrpc;
use openclaw_proxy_edge::http::{guard, rest, spelling, ws};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Longest refusal text accepted from any parser.
const TEXT_LIMIT: usize = 2048;

/// A refusal's text: bounded, no raw control characters.
fn check_text(text: &str) -> Result<(), TestCaseError> {
    prop_assert!(
        text.len() <= TEXT_LIMIT,
        "{} bytes: {text:.200}",
        text.len()
    );
    prop_assert!(
        !text.chars().any(char::is_control),
        "a raw control character in {text:?}"
    );
    Ok(())
}

/// The body of a response built in memory (ready at once).
fn body_of(response: Response) -> (StatusCode, Value) {
    let status = response.status();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .now_or_never()
        .expect("an in-memory body is ready")
        .expect("body");
    (status, serde_json::from_slice(&bytes).expect("a JSON body"))
}

/// Any JSON value, with strings of any characters (control characters
/// included) and numbers of every kind.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| {
            serde_json::Number::from_f64(f).map(Value::Number)
        }),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// A JSON object whose keys are mostly the ones `keys` names, with any
/// values: the shapes a parser reads, filled with wrong types.
fn object_with(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        4 => prop::sample::select(keys).prop_map(str::to_owned),
        1 => any::<String>(),
    ];
    prop::collection::vec((key, json_value()), 0..8)
        .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<_, _>>()))
}

/// `value` as JSON text, compact or pretty (pretty text has newlines between
/// tokens, which a raw-value parser keeps).
fn render(value: &Value, pretty: bool) -> String {
    if pretty {
        serde_json::to_string_pretty(value).expect("JSON")
    } else {
        value.to_string()
    }
}

/// A valid MCP tool name.
fn tool_name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.-]{1,128}"
}

mod websocket_frames {
    use super::*;

    const KEYS: &[&str] = &[
        "type",
        "request_id",
        "requestId",
        "ok",
        "content",
        "error",
        "progress",
        "total",
        "message",
        "tools",
    ];

    fn frame_type() -> impl Strategy<Value = Value> {
        prop_oneof![
            prop::sample::select(
                &["invoke_result", "progress", "update_tools", "pong", "ping"][..]
            )
            .prop_map(Value::from),
            json_value(),
        ]
    }

    /// The text of every refusal a frame can produce: the error frame's
    /// message, or the problem a malformed result or progress report is
    /// failed with.
    fn check_parsed(parsed: Result<Option<Inbound>, String>) -> Result<(), TestCaseError> {
        match parsed {
            Err(problem) | Ok(Some(Inbound::Malformed { problem, .. })) => check_text(&problem),
            Ok(_) => Ok(()),
        }
    }

    proptest! {
        #[test]
        fn any_text_is_parsed_or_refused_without_panicking(text in any::<String>()) {
            check_parsed(ws::parse_app_frame(&text))?;
        }

        #[test]
        fn any_frame_shaped_object_is_parsed_or_refused(
            mut frame in object_with(KEYS),
            kind in frame_type(),
            pretty in any::<bool>(),
        ) {
            frame["type"] = kind;
            check_parsed(ws::parse_app_frame(&render(&frame, pretty)))?;
        }

        #[test]
        fn a_wrongly_typed_field_of_a_call_is_named_in_a_clean_message(
            kind in prop::sample::select(&["invoke_result", "progress"][..]),
            field in prop::sample::select(&["ok", "progress", "total", "message"][..]),
            value in json_value(),
            pretty in any::<bool>(),
        ) {
            let frame = json!({"type": kind, "request_id": "S:1", field: value});
            check_parsed(ws::parse_app_frame(&render(&frame, pretty)))?;
        }

        #[test]
        fn text_that_is_not_an_object_is_refused(value in json_value()) {
            prop_assume!(!value.is_object());
            let refused = ws::parse_app_frame(&value.to_string());
            prop_assert!(refused.is_err(), "{value}");
            check_text(&refused.err().unwrap_or_default())?;
        }

        #[test]
        fn a_result_keeps_its_id_flag_and_content_text(
            request_id in any::<String>(),
            camel in any::<bool>(),
            ok in any::<bool>(),
            content in json_value(),
        ) {
            let key = if camel { "requestId" } else { "request_id" };
            let frame = json!({"type": "invoke_result", key: request_id, "ok": ok, "content": content});
            let parsed = ws::parse_app_frame(&frame.to_string());
            let Ok(Some(Inbound::Message(proto::AppMessage {
                kind: Some(app_message::Kind::Result(result)),
            }))) = parsed
            else {
                return Err(TestCaseError::fail(format!("{frame}: {parsed:?}")));
            };
            prop_assert_eq!(result.request_id, request_id);
            prop_assert_eq!(result.ok, ok);
            // `null` is "no content", carried as empty text.
            let expected = if content.is_null() { String::new() } else { content.to_string() };
            prop_assert_eq!(result.content_json, expected);
        }

        #[test]
        fn a_progress_report_keeps_its_values(
            request_id in any::<String>(),
            progress in any::<i32>(),
            total in proptest::option::of(any::<u16>()),
            message in any::<String>(),
        ) {
            let mut frame = json!({"type": "progress", "request_id": request_id,
                                   "progress": progress, "message": message});
            if let Some(total) = total {
                frame["total"] = json!(total);
            }
            let parsed = ws::parse_app_frame(&frame.to_string());
            let Ok(Some(Inbound::Message(proto::AppMessage {
                kind: Some(app_message::Kind::Progress(report)),
            }))) = parsed
            else {
                return Err(TestCaseError::fail(format!("{frame}: {parsed:?}")));
            };
            prop_assert_eq!(report.request_id, request_id);
            prop_assert_eq!(report.progress, f64::from(progress));
            prop_assert_eq!(report.total, total.map(f64::from));
            prop_assert_eq!(report.message, message);
        }

        #[test]
        fn a_tool_update_keeps_its_tools(
            names in prop::collection::vec(tool_name(), 0..5),
            description in any::<String>(),
        ) {
            let tools: Vec<Value> = names
                .iter()
                .map(|name| json!({"name": name, "description": description}))
                .collect();
            let frame = json!({"type": "update_tools", "tools": tools});
            let parsed = ws::parse_app_frame(&frame.to_string());
            let Ok(Some(Inbound::Message(proto::AppMessage {
                kind: Some(app_message::Kind::UpdateTools(update)),
            }))) = parsed
            else {
                return Err(TestCaseError::fail(format!("{frame}: {parsed:?}")));
            };
            let got: Vec<&str> = update.tools.iter().map(|tool| tool.name.as_str()).collect();
            prop_assert_eq!(got, names.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert!(update.tools.iter().all(|tool| tool.description == description));
        }
    }
}

mod rest_bodies {
    use super::*;
    use openclaw_proxy_edge::http::error::ApiError;

    const KEYS: &[&str] = &[
        "device_id",
        "deviceId",
        "device_name",
        "deviceName",
        "app_version",
        "appVersion",
        "chat_id",
        "chatId",
        "tools",
    ];
    const TOOL_KEYS: &[&str] = &[
        "name",
        "description",
        "input_schema",
        "inputSchema",
        "path",
        "timeout_seconds",
        "timeoutSeconds",
    ];

    /// A refused body: a 4xx JSON error whose message is bounded.
    fn check_refusal(error: ApiError) -> Result<(), TestCaseError> {
        let (status, body) = body_of(error.into_response());
        prop_assert!(status.is_client_error(), "{status}: {body}");
        prop_assert!(body["error"]["code"].is_string(), "{body}");
        check_text(body["error"]["message"].as_str().unwrap_or_default())
    }

    fn body_with_tools() -> impl Strategy<Value = Value> {
        (
            object_with(KEYS),
            prop::collection::vec(object_with(TOOL_KEYS), 0..4),
            any::<bool>(),
        )
            .prop_map(|(mut body, tools, as_array)| {
                if as_array {
                    body["tools"] = Value::Array(tools.into_iter().collect());
                }
                body
            })
    }

    proptest! {
        #[test]
        fn any_bytes_are_parsed_or_refused_with_a_bounded_error(body in any::<Vec<u8>>()) {
            if let Err(error) = rest::parse_create_session(&body) {
                check_refusal(error)?;
            }
            if let Err(error) = rest::parse_update_tools(&body) {
                check_refusal(error)?;
            }
        }

        #[test]
        fn any_body_shaped_object_is_parsed_or_refused(body in body_with_tools(), pretty in any::<bool>()) {
            let text = render(&body, pretty);
            if let Err(error) = rest::parse_create_session(text.as_bytes()) {
                check_refusal(error)?;
            }
            let update = json!({"tools": body["tools"]}).to_string();
            if let Err(error) = rest::parse_update_tools(update.as_bytes()) {
                check_refusal(error)?;
            }
        }

        #[test]
        fn a_valid_body_keeps_its_values_in_either_spelling(
            device_id in any::<String>(),
            app_version in any::<String>(),
            device_name in proptest::option::of(any::<String>()),
            chat_id in proptest::option::of(any::<String>()),
            names in prop::collection::vec(tool_name(), 0..4),
            timeout in any::<u32>(),
            spelling in 0..3_u8,
        ) {
            let mut body = Map::new();
            let mut put = |snake: &str, camel: &str, value: Value| {
                if spelling != 1 {
                    body.insert(snake.to_owned(), value.clone());
                }
                if spelling != 0 {
                    body.insert(camel.to_owned(), value);
                }
            };
            put("device_id", "deviceId", json!(device_id));
            put("app_version", "appVersion", json!(app_version));
            put("device_name", "deviceName", json!(device_name));
            put("chat_id", "chatId", json!(chat_id));
            let tools: Vec<Value> = names
                .iter()
                .map(|name| json!({"name": name, "input_schema": {"type": "object"},
                                   "timeout_seconds": timeout}))
                .collect();
            body.insert("tools".into(), Value::Array(tools.clone()));
            let text = Value::Object(body).to_string();
            let request = rest::parse_create_session(text.as_bytes());
            let request = match request {
                Ok(request) => request,
                Err(error) => return Err(TestCaseError::fail(format!("{text}: {error}"))),
            };
            let metadata = request.metadata.unwrap_or_default();
            prop_assert_eq!(metadata.device_id, device_id);
            prop_assert_eq!(metadata.app_version, app_version);
            prop_assert_eq!(metadata.device_name, device_name.unwrap_or_default());
            prop_assert_eq!(metadata.chat_id, chat_id.unwrap_or_default());
            let got: Vec<&str> = request.tools.iter().map(|tool| tool.name.as_str()).collect();
            prop_assert_eq!(&got, &names.iter().map(String::as_str).collect::<Vec<_>>());
            let object_schema = r#"{"type":"object"}"#;
            prop_assert!(request.tools.iter().all(|tool| tool.timeout_seconds == timeout
                && tool.input_schema_json == object_schema), "{:?}", request.tools);
            let update = json!({"tools": tools}).to_string();
            let updated = rest::parse_update_tools(update.as_bytes());
            prop_assert_eq!(updated.map(|update| update.tools.len()).ok(), Some(names.len()));
        }

        #[test]
        fn two_spellings_that_differ_are_refused_naming_both(
            first in any::<String>(),
            second in any::<String>(),
        ) {
            prop_assume!(first != second);
            let body = json!({"device_id": first, "deviceId": second, "app_version": "1"});
            let refused = rest::parse_create_session(body.to_string().as_bytes());
            let Err(error) = refused else {
                return Err(TestCaseError::fail(format!("{body} was accepted")));
            };
            let (status, reply) = body_of(error.into_response());
            prop_assert_eq!(status, StatusCode::BAD_REQUEST);
            let message = reply["error"]["message"].as_str().unwrap_or_default();
            prop_assert!(message.contains("\"device_id\"") && message.contains("\"deviceId\""));
        }

        #[test]
        fn pick_accepts_one_spelling_or_agreeing_both(
            snake in proptest::option::of(any::<u8>()),
            camel in proptest::option::of(any::<u8>()),
        ) {
            let picked = spelling::pick("a_b", snake, "aB", camel);
            match (snake, camel) {
                (Some(a), Some(b)) if a != b => {
                    let error = picked.err().unwrap_or_default();
                    prop_assert!(error.contains("\"a_b\"") && error.contains("\"aB\""));
                }
                _ => prop_assert_eq!(picked, Ok(snake.or(camel))),
            }
        }
    }
}

mod mcp_messages {
    use super::*;
    use openclaw_proxy_edge::http::mcp::transport::Rejected;
    use openclaw_proxy_edge::http::mcp::transport::request::{
        Message, Revision, check_media, parse,
    };
    use rmcp::model::{ErrorCode, ProtocolVersion, RequestMetaObject};

    const KEYS: &[&str] = &["jsonrpc", "id", "method", "params"];

    fn method() -> impl Strategy<Value = Value> {
        prop_oneof![
            prop::sample::select(
                &[
                    "tools/call",
                    "tools/list",
                    "initialize",
                    "notifications/cancelled",
                    "notifications/initialized",
                ][..]
            )
            .prop_map(Value::from),
            json_value(),
        ]
    }

    /// Reads `body` at `revision`: the 2026-07-28 headers name the revision
    /// (and a `tools/call`'s method) when `headers` holds none of its own.
    fn read(body: &Value, revision: Revision, headers: &HeaderMap) -> Result<Message, Rejected> {
        parse(&Bytes::from(body.to_string()), &at(revision, headers))
    }

    fn at(revision: Revision, headers: &HeaderMap) -> HeaderMap {
        let mut headers = headers.clone();
        if revision == Revision::PerRequest && !headers.contains_key("mcp-protocol-version") {
            headers.insert(
                "mcp-protocol-version",
                HeaderValue::from_static("2026-07-28"),
            );
        }
        headers
    }

    /// A refusal: a JSON-RPC code, a status a client can act on, and a
    /// bounded message.
    fn check_refusal(rejected: &Rejected) -> Result<(), TestCaseError> {
        prop_assert!(
            rejected.status == StatusCode::OK || rejected.status == StatusCode::BAD_REQUEST,
            "{rejected:?}"
        );
        check_text(&rejected.message)
    }

    fn meta_2026() -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        })
    }

    fn call_body(id: Value, name: &str, arguments: Option<Value>, meta: Option<Value>) -> Value {
        let mut params = json!({"name": name});
        if let Some(arguments) = arguments {
            params["arguments"] = arguments;
        }
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
    }

    fn request_id() -> impl Strategy<Value = Value> {
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<String>().prop_map(Value::from)
        ]
    }

    #[test]
    fn params_that_are_not_an_object_are_invalid_params_naming_the_request() {
        // serde reads a struct from an array too: `[{}, "t"]` would be a
        // call of `t` with `_meta: {}`.
        for params in [
            json!([{}, "", {}, null, null]),
            json!([{}, "echo"]),
            json!(5),
        ] {
            let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params});
            let Err(rejected) = read(&body, Revision::WithInitialize, &HeaderMap::new()) else {
                panic!("{body} was taken");
            };
            assert_eq!(rejected.code, ErrorCode::INVALID_PARAMS, "{rejected:?}");
            assert_eq!(rejected.status, StatusCode::OK);
            assert_eq!(rejected.id, Some(rmcp::model::RequestId::Number(7)));
        }
    }

    #[test]
    fn meta_keys_are_read_or_refused_naming_the_key() {
        let none = HeaderMap::new();
        let with_meta = |meta: Value| call_body(json!(1), "echo", None, Some(meta));
        // Vendor keys, a `null` token and a client's identity are taken.
        for meta in [
            json!({"progressToken": "t", "vendor/key": {"deep": [1, 2]}}),
            json!({"progressToken": null}),
            json!({"io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}}),
            json!({"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}),
        ] {
            assert!(
                read(&with_meta(meta.clone()), Revision::WithInitialize, &none).is_ok(),
                "{meta}"
            );
        }
        // A known key that does not decode, and a `_meta` that is not an
        // object, are invalid params.
        for meta in [
            json!({"progressToken": {"not": "a token"}}),
            json!({"io.modelcontextprotocol/clientInfo": "c"}),
            json!({"traceparent": 7}),
            json!(["progressToken"]),
        ] {
            let rejected = read(&with_meta(meta.clone()), Revision::WithInitialize, &none).err();
            assert_eq!(
                rejected.map(|r| r.code),
                Some(ErrorCode::INVALID_PARAMS),
                "{meta}"
            );
        }
        // At 2026-07-28 the revision and the client's capabilities must be
        // there and readable, as rmcp's `missing_required_keys` judges them.
        let headers = headers_2026("echo");
        let capabilities = "io.modelcontextprotocol/clientCapabilities";
        let revision = "io.modelcontextprotocol/protocolVersion";
        let rmcp_judges_valid = |meta: &Value| {
            serde_json::from_value::<RequestMetaObject>(meta.clone()).is_ok_and(|meta| {
                meta.protocol_version() == Some(ProtocolVersion::V_2026_07_28)
                    && meta
                        .missing_required_keys(&ProtocolVersion::V_2026_07_28)
                        .is_empty()
            })
        };
        for (key, value, valid) in [
            (capabilities, json!({}), true),
            (capabilities, json!({"roots": {"listChanged": true}}), true),
            (capabilities, json!("all"), false),
            (capabilities, json!({"roots": 1}), false),
            (capabilities, Value::Null, false),
            (revision, json!("2026-07-28"), true),
            (revision, Value::Null, false),
            (revision, json!(20260728), false),
            (revision, json!("2025-11-25"), false),
        ] {
            let mut meta = meta_2026();
            meta[key] = value.clone();
            assert_eq!(rmcp_judges_valid(&meta), valid, "rmcp on {key}: {value}");
            let taken = read(&with_meta(meta), Revision::PerRequest, &headers);
            assert_eq!(taken.is_ok(), valid, "{key}: {value}");
            if let Err(rejected) = taken {
                assert_eq!(rejected.status, StatusCode::BAD_REQUEST, "{rejected:?}");
            }
        }
        // A key the server does not read is not judged: its text reaches the
        // app as sent, as the arguments' does.
        let unread = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"vendor/n":1e400}}}"#;
        let Ok(Message::Request(request)) = parse(&Bytes::from_static(unread), &headers) else {
            panic!("taken");
        };
        assert!(
            request
                .meta
                .text
                .map(|raw| raw.get().contains("1e400"))
                .unwrap_or_default()
        );
        let duplicate = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":1,"progressToken":2}}}"#;
        let rejected = parse(&Bytes::from_static(duplicate), &none).err();
        assert_eq!(rejected.map(|r| r.code), Some(ErrorCode::INVALID_PARAMS));
    }

    proptest! {
        #[test]
        fn any_bytes_are_read_or_refused_in_json_rpc_terms(body in any::<Vec<u8>>()) {
            let is_json = serde_json::from_slice::<serde::de::IgnoredAny>(&body).is_ok();
            let _ = jsonrpc::cancelled_request(&body);
            let body = Bytes::from(body);
            for (revision, headers) in [
                (Revision::WithInitialize, HeaderMap::new()),
                (Revision::PerRequest, headers_2026("x")),
            ] {
                match parse(&body, &at(revision, &headers)) {
                    Ok(_) => prop_assert!(is_json),
                    Err(rejected) => {
                        if !is_json {
                            prop_assert_eq!(rejected.code, ErrorCode::PARSE_ERROR);
                        }
                        check_refusal(&rejected)?;
                    }
                }
            }
        }

        #[test]
        fn any_message_shaped_object_is_read_or_refused(
            mut message in object_with(KEYS),
            method in method(),
            pretty in any::<bool>(),
        ) {
            message["method"] = method;
            let text = Bytes::from(render(&message, pretty));
            let _ = jsonrpc::cancelled_request(&text);
            for (revision, headers) in [
                (Revision::WithInitialize, HeaderMap::new()),
                (Revision::PerRequest, headers_2026("x")),
            ] {
                if let Err(rejected) = parse(&text, &at(revision, &headers)) {
                    check_refusal(&rejected)?;
                }
            }
        }

        #[test]
        fn a_plain_tools_call_keeps_its_params_text(
            id in request_id(),
            name in any::<String>(),
            arguments in proptest::option::of(
                prop::collection::vec((any::<String>(), json_value()), 0..4)
                    .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
            ),
            pretty in any::<bool>(),
        ) {
            let body = call_body(id, &name, arguments, None);
            let params = render(&body["params"], pretty);
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{params}}}"#,
                body["id"]
            );
            let Ok(Message::Request(request)) =
                parse(&Bytes::from(text), &HeaderMap::new())
            else {
                return Err(TestCaseError::fail(format!("{body} was not taken")));
            };
            prop_assert_eq!(request.params_text(), params.as_str());
        }

        #[test]
        fn valid_2026_calls_are_taken_and_wrong_headers_refused(
            id in request_id(),
            name in "[a-z_]{1,20}",
            token in prop_oneof![any::<i64>().prop_map(Value::from), any::<String>().prop_map(Value::from)],
        ) {
            let mut meta = meta_2026();
            meta["progressToken"] = token;
            let headers = headers_2026(&name);
            let valid = call_body(id.clone(), &name, None, Some(meta));
            prop_assert!(read(&valid, Revision::PerRequest, &headers).is_ok());
            let plain = call_body(id, &name, None, None);
            prop_assert!(read(&plain, Revision::PerRequest, &headers).is_err());
            let mismatch = |headers: &HeaderMap| {
                read(&valid, Revision::PerRequest, headers).err().map(|rejected| rejected.code)
            };
            prop_assert_eq!(mismatch(&headers_2026(&format!("{name}x"))), Some(ErrorCode::HEADER_MISMATCH));
            let mut other_method = headers.clone();
            other_method.insert("mcp-method", HeaderValue::from_static("tools/list"));
            prop_assert_eq!(mismatch(&other_method), Some(ErrorCode::HEADER_MISMATCH));
            let mut repeated = headers.clone();
            repeated.append("mcp-name", HeaderValue::from_static("x"));
            prop_assert_eq!(mismatch(&repeated), Some(ErrorCode::HEADER_MISMATCH));
        }

        #[test]
        fn a_cancellation_names_its_request_id(
            id in prop_oneof![any::<i64>().prop_map(Value::from), any::<String>().prop_map(Value::from)],
            reason in proptest::option::of(any::<String>()),
        ) {
            let mut params = json!({"requestId": id});
            if let Some(reason) = reason {
                params["reason"] = json!(reason);
            }
            let body = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params});
            let named = jsonrpc::cancelled_request(body.to_string().as_bytes());
            prop_assert_eq!(named, Some(id.to_string()));
        }

        #[test]
        fn any_headers_are_judged_without_panicking(
            values in prop::collection::vec((0..6_usize, any::<Vec<u8>>()), 0..6),
        ) {
            let names = [
                header::ACCEPT,
                header::CONTENT_TYPE,
                header::HeaderName::from_static("mcp-protocol-version"),
                header::HOST,
                header::HeaderName::from_static("mcp-method"),
                header::HeaderName::from_static("mcp-name"),
            ];
            let mut headers = HeaderMap::new();
            for (name, value) in values {
                if let Ok(value) = HeaderValue::from_bytes(&value) {
                    headers.append(names[name].clone(), value);
                }
            }
            if let Err(rejected) = check_media(&headers) {
                check_text(&rejected.message)?;
            }
            let body = Bytes::from(call_body(json!(1), "x", None, None).to_string());
            if let Err(rejected) = parse(&body, &headers) {
                check_text(&rejected.message)?;
            }
        }
    }
}

/// The headers of a 2026-07-28 `tools/call` of `tool`.
fn headers_2026(tool: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2026-07-28"),
    );
    headers.insert("mcp-method", HeaderValue::from_static("tools/call"));
    if let Ok(name) = HeaderValue::from_str(tool) {
        headers.insert("mcp-name", name);
    }
    headers
}

mod host_and_origin {
    use super::*;
    use openclaw_proxy_edge::http::error::ApiError;

    fn loopback_guard() -> guard::HostGuard {
        guard::HostGuard::new(&EdgeConfig {
            allowed_hosts: vec!["proxy.internal".into()],
            allowed_origins: vec!["https://app.example".into()],
            ..EdgeConfig::default()
        })
    }

    fn headers(host: Option<&[u8]>, origin: Option<&[u8]>) -> Option<HeaderMap> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, HeaderValue::from_bytes(host).ok()?);
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, HeaderValue::from_bytes(origin).ok()?);
        }
        Some(headers)
    }

    fn check_refusal(error: ApiError) -> Result<(), TestCaseError> {
        let (status, body) = body_of(error.into_response());
        prop_assert_eq!(status, StatusCode::FORBIDDEN);
        check_text(body["error"]["message"].as_str().unwrap_or_default())
    }

    fn loopback() -> impl Strategy<Value = &'static str> {
        prop::sample::select(
            &[
                "localhost",
                "127.0.0.1",
                "[::1]",
                "LocalHost",
                "proxy.internal",
            ][..],
        )
    }

    proptest! {
        #[test]
        fn any_host_and_origin_are_judged_with_a_bounded_refusal(
            host in proptest::option::of(any::<Vec<u8>>()),
            origin in proptest::option::of(any::<Vec<u8>>()),
        ) {
            let Some(headers) = headers(host.as_deref(), origin.as_deref()) else {
                return Ok(());
            };
            if let Err(error) = loopback_guard().check(&headers, &Uri::from_static("/v1/mcp")) {
                check_refusal(error)?;
            }
        }

        #[test]
        fn loopback_hosts_and_origins_pass_with_any_port(
            host in loopback(),
            port in proptest::option::of(any::<u16>()),
            scheme in prop::sample::select(&["http", "https"][..]),
        ) {
            let authority = match port {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            let origin = if host == "proxy.internal" {
                "https://app.example".to_owned()
            } else {
                format!("{scheme}://{authority}")
            };
            let headers = headers(Some(authority.as_bytes()), Some(origin.as_bytes()))
                .expect("valid header values");
            let checked = loopback_guard().check(&headers, &Uri::from_static("/"));
            prop_assert!(checked.is_ok(), "{authority} {origin}: {checked:?}");
        }

        #[test]
        fn other_hosts_and_origins_are_refused(
            label in "[a-z0-9-]{1,20}",
            port in proptest::option::of(any::<u16>()),
            junk in "[ -~]{0,200}",
        ) {
            let guard = loopback_guard();
            let foreign = match port {
                Some(port) => format!("{label}.example.com:{port}"),
                None => format!("{label}.example.com"),
            };
            let host = headers(Some(foreign.as_bytes()), None).expect("valid header value");
            let refused = guard.check(&host, &Uri::from_static("/"));
            prop_assert!(matches!(refused, Err(ApiError::HostNotAllowed(_))), "{foreign}");
            let origin = format!("https://{foreign}{junk}");
            let Some(origin) = headers(Some(b"localhost"), Some(origin.as_bytes())) else {
                return Ok(());
            };
            let refused = guard.check(&origin, &Uri::from_static("/"));
            prop_assert!(matches!(refused, Err(ApiError::OriginNotAllowed(_))), "{foreign}{junk}");
            if let Err(error) = refused {
                check_refusal(error)?;
            }
        }
    }
}

//! Property tests of the stdin line parser ([`openclaw_proxy_stdio::line`])
//! and the bounded line reader ([`openclaw_proxy_stdio::wire::LineReader`]):
//! any bytes get an answer and never a panic, valid messages come back with
//! their own text, and lines are cut the same way however the input arrives.

use openclaw_proxy_stdio::line::{self, INVALID_REQUEST, Kind, LineError, PARSE_ERROR};
use openclaw_proxy_stdio::wire::LineReader;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON value, nested a few levels.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".{0,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn request_id() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(Value::from),
        ".{0,16}".prop_map(Value::from)
    ]
}

/// The JSON-RPC error line a bad line gets must itself be a valid message.
fn assert_answer_is_json_rpc(error: &LineError) {
    let reply: Value = serde_json::from_str(&line::error_reply(error)).expect("reply is JSON");
    assert_eq!(reply["jsonrpc"], "2.0");
    assert_eq!(reply["error"]["code"], json!(error.code()));
    assert!(
        !reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
    assert!(reply["id"].is_null() || reply["id"].is_string() || reply["id"].is_number());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_bytes_get_a_message_or_an_answer(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        match line::parse(&bytes) {
            Ok(Some(message)) => {
                prop_assert!(serde_json::from_str::<Value>(message.text).is_ok());
            }
            Ok(None) => {}
            Err(error) => assert_answer_is_json_rpc(&error),
        }
    }

    #[test]
    fn invalid_utf8_is_a_parse_error(
        head in ".{0,20}",
        bad in prop_oneof![Just(0xFFu8), Just(0xC0u8), Just(0x80u8)],
        tail in ".{0,20}",
    ) {
        let mut bytes = head.into_bytes();
        let offset = bytes.len();
        bytes.push(bad);
        bytes.extend_from_slice(tail.as_bytes());
        let error = line::parse(&bytes).expect_err("invalid UTF-8");
        prop_assert_eq!(error.code(), PARSE_ERROR);
        let reported = match error {
            LineError::InvalidUtf8 { offset } => offset,
            _ => usize::MAX,
        };
        prop_assert!(reported <= offset, "reported offset {} after the bad byte at {}", reported, offset);
        prop_assert!(error.to_string().contains("UTF-8"));
    }

    #[test]
    fn valid_requests_keep_their_text_id_and_method(
        id in request_id(),
        method in "[a-z/]{1,20}",
        params in prop::collection::btree_map("[a-z]{1,6}", json_value(), 0..4),
        crlf in any::<bool>(),
    ) {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let text = message.to_string();
        let mut bytes = text.clone().into_bytes();
        if crlf {
            bytes.push(b'\r');
        }
        let parsed = line::parse(&bytes).expect("valid").expect("not blank");
        prop_assert_eq!(parsed.kind, Kind::Request);
        prop_assert_eq!(parsed.text, text.as_str());
        let id_text = id.to_string();
        prop_assert_eq!(parsed.id_text(), Some(id_text.as_str()));
        prop_assert_eq!(parsed.method.as_deref(), Some(method.as_str()));
    }

    #[test]
    fn notifications_and_responses_are_told_apart(id in request_id(), result in json_value()) {
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/x"}).to_string();
        prop_assert_eq!(
            line::parse(notification.as_bytes()).expect("valid").expect("message").kind,
            Kind::Notification
        );
        let response = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        prop_assert_eq!(
            line::parse(response.as_bytes()).expect("valid").expect("message").kind,
            Kind::Response
        );
    }

    #[test]
    fn json_that_is_not_an_object_is_an_invalid_request(value in json_value()) {
        prop_assume!(!value.is_object());
        let error = line::parse(value.to_string().as_bytes()).expect_err("not an object");
        prop_assert_eq!(error.code(), INVALID_REQUEST);
        assert_answer_is_json_rpc(&error);
    }

    #[test]
    fn objects_without_a_valid_envelope_answer_the_id_they_carry(
        id in any::<u32>(),
        version in prop_oneof![Just(json!("1.0")), Just(json!(2)), Just(Value::Null)],
    ) {
        let text = json!({"jsonrpc": version, "id": id, "method": "ping"}).to_string();
        let error = line::parse(text.as_bytes()).expect_err("wrong version");
        prop_assert_eq!(error.code(), INVALID_REQUEST);
        prop_assert_eq!(error.id().map(|raw| raw.get().to_owned()), Some(id.to_string()));
    }

    #[test]
    fn lines_are_cut_alike_however_the_input_arrives(
        lines in prop::collection::vec(prop::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..40), 0..12),
        capacity in 1usize..64,
        limit in 1usize..48,
    ) {
        let mut input = Vec::new();
        for line in &lines {
            input.extend_from_slice(line);
            input.push(b'\n');
        }
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let got = runtime.block_on(async {
            let reader = tokio::io::BufReader::with_capacity(capacity, input.as_slice());
            let mut lines = LineReader::new(reader, limit);
            let mut got = Vec::new();
            while let Some(line) = lines.next_line().await.expect("read") {
                got.push(line.map(<[u8]>::to_vec).map_err(|error| error.to_string()));
            }
            got
        });
        let expected: Vec<Result<Vec<u8>, String>> = lines
            .iter()
            .map(|line| {
                if line.len() > limit {
                    Err(LineError::TooLong { limit }.to_string())
                } else {
                    Ok(line.clone())
                }
            })
            .collect();
        prop_assert_eq!(got, expected);
    }
}

#[test]
fn numbers_beyond_f64_keep_their_text() {
    let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"big":123456789012345678901234567890,"huge":1e400,"precise":0.1000000000000000055511151231257827}}}"#;
    let parsed = line::parse(text.as_bytes())
        .expect("valid")
        .expect("message");
    assert_eq!(parsed.text, text);
}

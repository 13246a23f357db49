//! One stdin line of any bytes: `line::parse` returns (never panics), a
//! message it accepts is JSON and keeps its text, and the error line it
//! answers a bad one with is itself a JSON-RPC error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_stdio::line;

fuzz_target!(|data: &[u8]| {
    match line::parse(data) {
        Ok(Some(message)) => {
            assert!(serde_json::from_str::<serde_json::Value>(message.text).is_ok());
            if let Some(id) = message.id_text() {
                assert!(message.text.contains(id));
            }
        }
        Ok(None) => {}
        Err(error) => {
            let reply: serde_json::Value =
                serde_json::from_str(&line::error_reply(&error)).expect("the answer is JSON");
            assert_eq!(reply["error"]["code"], error.code());
        }
    }
});

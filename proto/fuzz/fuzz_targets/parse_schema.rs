//! One input schema of any text: an object schema whose `type`, if any, is
//! `"object"`, or a bounded refusal; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_proto::tools::parse_schema;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_schema(0, text) {
        Ok(schema) => {
            let schema = schema.to_object();
            let kind = schema.get("type");
            assert!(kind.is_none_or(|kind| kind == "object"), "{kind:?}");
        }
        Err(error) => {
            let message = error.to_string();
            assert!(message.len() <= 1024, "{} bytes", message.len());
            assert!(!message.chars().any(char::is_control), "{message:?}");
        }
    }
});

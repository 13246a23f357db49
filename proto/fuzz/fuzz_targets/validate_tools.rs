//! Tool definitions of any text (fields separated by NUL bytes: name,
//! schema, name, schema, ...): validated or refused, never a panic; a
//! refusal names its field and is bounded, without raw control characters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_proto::tools::{Definition, validate_tools};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let fields: Vec<&str> = text.split('\0').collect();
    let definitions: Vec<Definition> = fields
        .chunks(2)
        .map(|pair| Definition {
            name: pair[0].to_owned(),
            input_schema_json: pair.get(1).copied().unwrap_or_default().to_owned(),
            ..Definition::default()
        })
        .collect();
    let count = definitions.len();
    match validate_tools(definitions) {
        Ok(tools) => assert_eq!(tools.len(), count),
        Err(error) => {
            let message = error.to_string();
            assert!(message.starts_with("tools["), "{message}");
            assert!(message.len() <= 1024, "{} bytes", message.len());
            assert!(!message.chars().any(char::is_control), "{message:?}");
        }
    }
});

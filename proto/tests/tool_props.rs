//! Property tests of the tool-definition validator, which every surface
//! (gRPC, REST, the WebSocket bridge, the stdio binary's tool files) runs on
//! what apps send: any definitions are accepted or refused without a panic,
//! valid ones keep their values, and a refusal's text is bounded and holds
//! no raw control character.

use openclaw_proxy_proto::tools::{Definition, ToolError, parse_schema, validate_tools};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Longest refusal text accepted.
const TEXT_LIMIT: usize = 1024;

fn check_error(error: &ToolError) -> Result<(), TestCaseError> {
    let text = error.to_string();
    prop_assert!(
        text.len() <= TEXT_LIMIT,
        "{} bytes: {text:.200}",
        text.len()
    );
    prop_assert!(
        !text.chars().any(char::is_control),
        "a raw control character in {text:?}"
    );
    prop_assert!(text.starts_with("tools["), "{text}");
    Ok(())
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
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

/// Schema text: any text, any JSON, or an object schema with any `type`.
fn schema_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        json_value().prop_map(|value| value.to_string()),
        json_value().prop_map(|kind| json!({"type": kind}).to_string()),
        "[a-z]{1000,2000}".prop_map(|kind| json!({"type": kind}).to_string()),
        Just(String::new()),
        Just("null".to_owned()),
    ]
}

/// A name: often valid, often not (any characters, any length).
fn any_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_.-]{1,128}",
        any::<String>(),
        "[a-z]{120,2000}",
        "[\\x00-\\x1f]{1,10}",
    ]
}

fn valid_name() -> impl Strategy<Value = String> {
    "[A-Za-z0-9_.-]{1,128}"
}

proptest! {
    #[test]
    fn any_definitions_are_accepted_or_refused_with_a_bounded_error(
        definitions in prop::collection::vec((any_name(), schema_text(), any::<String>()), 0..6),
    ) {
        let definitions: Vec<Definition> = definitions
            .into_iter()
            .map(|(name, input_schema_json, description)| Definition {
                name,
                description,
                input_schema_json,
                ..Definition::default()
            })
            .collect();
        match validate_tools(definitions.clone()) {
            Ok(tools) => {
                prop_assert_eq!(tools.len(), definitions.len());
                for (tool, definition) in tools.iter().zip(&definitions) {
                    prop_assert_eq!(&*tool.name, definition.name.as_str());
                    prop_assert_eq!(&*tool.description, definition.description.as_str());
                }
            }
            Err(error) => check_error(&error)?,
        }
    }

    #[test]
    fn any_schema_text_is_parsed_or_refused_with_a_bounded_error(index in any::<usize>(), text in schema_text()) {
        match parse_schema(index, &text) {
            Ok(schema) => {
                let schema = schema.to_object();
                let kind = schema.get("type");
                prop_assert!(kind.is_none() || kind == Some(&json!("object")), "{text}");
            }
            Err(error) => check_error(&error)?,
        }
    }

    #[test]
    fn valid_definitions_keep_their_values(
        names in prop::collection::btree_set(valid_name(), 0..6),
        properties in prop::collection::vec((any::<String>(), json_value()), 0..4),
        path in any::<String>(),
        timeout_seconds in any::<u32>(),
    ) {
        let mut schema: Map<String, Value> = properties.into_iter().collect();
        schema.insert("type".into(), json!("object"));
        let schema_json = Value::Object(schema.clone()).to_string();
        let definitions: Vec<Definition> = names
            .iter()
            .map(|name| Definition {
                name: name.clone(),
                description: String::new(),
                input_schema_json: schema_json.clone(),
                path: path.clone(),
                timeout_seconds,
                confirm: None,
                requires_client: Vec::new(),
                ..Definition::default()
            })
            .collect();
        let tools = validate_tools(definitions);
        let tools = match tools {
            Ok(tools) => tools,
            Err(error) => return Err(TestCaseError::fail(error.to_string())),
        };
        prop_assert_eq!(tools.len(), names.len());
        for (tool, name) in tools.iter().zip(&names) {
            prop_assert_eq!(&*tool.name, name.as_str());
            prop_assert_eq!(&tool.input_schema.to_object(), &schema);
            prop_assert_eq!(&*tool.path, path.as_str());
            prop_assert_eq!(tool.timeout_seconds, timeout_seconds);
        }
    }

    #[test]
    fn invalid_or_duplicate_names_are_refused_naming_the_index(
        valid in valid_name(),
        invalid in any::<String>(),
        at in 0..3_usize,
    ) {
        prop_assume!(!invalid.starts_with("tool_") && valid != "other");
        let ok = |name: String| Definition { name, ..Definition::default() };
        let mut definitions: Vec<Definition> = (0..3).map(|n| ok(format!("tool_{n}"))).collect();
        let valid_name = openclaw_proxy_proto::tools::is_valid_tool_name(&invalid);
        definitions[at] = ok(invalid);
        match validate_tools(definitions) {
            Ok(_) => prop_assert!(valid_name),
            Err(error) => {
                check_error(&error)?;
                prop_assert!(error.to_string().starts_with(&format!("tools[{at}]")), "{error}");
            }
        }
        let duplicated = vec![ok(valid.clone()), ok("other".into()), ok(valid)];
        let refused = validate_tools(duplicated);
        let duplicate = matches!(refused, Err(ToolError::DuplicateName { index: 2, first: 0, .. }));
        prop_assert!(duplicate, "{refused:?}");
    }
}

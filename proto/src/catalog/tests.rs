//! The declaration rules, checked.

use super::*;

fn resource(uri: &str, name: &str) -> ResourceDefinition {
    ResourceDefinition {
        uri: uri.into(),
        name: name.into(),
        ..Default::default()
    }
}

#[test]
fn uris_need_a_scheme_and_no_spaces() {
    assert!(is_uri("test://static-text"));
    assert!(is_uri("notes:///{id}"));
    assert!(is_uri("urn:isbn:0451450523"));
    assert!(!is_uri("no-scheme"));
    assert!(!is_uri("1http://x"));
    assert!(!is_uri("file:///a b"));
    assert!(!is_uri("file:///a\nb"));
    assert!(!is_uri(&format!("x:{}", "a".repeat(MAX_URI_LEN))));
}

#[test]
fn errors_name_the_field() {
    let error = validate_resources(vec![resource("a:1", "one"), resource("a:1", "two")])
        .expect_err("duplicate");
    assert_eq!(
        error.to_string(),
        "resources[1].uri is used by resources[0] already: it must be unique within a session"
    );
    let error = validate_resources(vec![resource("", "x")]).expect_err("empty uri");
    assert!(
        error.to_string().starts_with("resources[0].uri is empty"),
        "{error}"
    );
    let error = validate_resources(vec![resource("a:1", " ")]).expect_err("empty name");
    assert!(
        error.to_string().starts_with("resources[0].name is empty"),
        "{error}"
    );
    let error = validate_resources(vec![ResourceDefinition {
        mime_type: "text".into(),
        ..resource("a:1", "x")
    }])
    .expect_err("mime");
    assert!(
        error.to_string().contains("resources[0].mimeType"),
        "{error}"
    );
    let error = validate_resources(vec![ResourceDefinition {
        annotations_json: r#"{"priority": 3}"#.into(),
        ..resource("a:1", "x")
    }])
    .expect_err("priority");
    assert!(
        error
            .to_string()
            .contains("resources[0].annotations priority"),
        "{error}"
    );
    let error = validate_templates(vec![TemplateDefinition {
        uri_template: "no scheme {id}".into(),
        name: "t".into(),
        ..Default::default()
    }])
    .expect_err("template");
    assert!(
        error
            .to_string()
            .starts_with("resource_templates[0].uriTemplate"),
        "{error}"
    );
    let error = validate_prompts(vec![PromptDefinition {
        name: "p".into(),
        arguments: vec![
            ("a".into(), String::new(), String::new(), true),
            ("a".into(), String::new(), String::new(), false),
        ],
        ..Default::default()
    }])
    .expect_err("duplicate argument");
    assert!(
        error
            .to_string()
            .starts_with("prompts[0].arguments[1].name"),
        "{error}"
    );
    let error = validate_prompts(vec![PromptDefinition {
        name: "has space".into(),
        ..Default::default()
    }])
    .expect_err("name");
    assert!(error.to_string().starts_with("prompts[0].name"), "{error}");
}

#[test]
fn entries_render_as_mcp_objects() {
    let resources = validate_resources(vec![ResourceDefinition {
        uri: "test://static-text".into(),
        name: "static".into(),
        mime_type: "text/plain".into(),
        size: Some(12),
        annotations_json: r#"{"audience":["user"],"priority":0.5}"#.into(),
        icons_json: r#"[{"src":"https://example.com/i.png"}]"#.into(),
        ..Default::default()
    }])
    .expect("valid");
    assert_eq!(
        resources[0].to_mcp(),
        serde_json::json!({
            "uri": "test://static-text", "name": "static", "mimeType": "text/plain", "size": 12,
            "annotations": {"audience": ["user"], "priority": 0.5},
            "icons": [{"src": "https://example.com/i.png"}]
        })
    );
    let prompts = validate_prompts(vec![PromptDefinition {
        name: "greet".into(),
        arguments: vec![("who".into(), String::new(), "Whom".into(), true)],
        ..Default::default()
    }])
    .expect("valid");
    assert_eq!(
        prompts[0].to_mcp(),
        serde_json::json!({"name": "greet", "arguments": [{"name": "who", "description": "Whom", "required": true}]})
    );
}

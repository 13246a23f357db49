//! Values that try to forge the log: a tool name, a session id, a URI or an
//! app's text that spells fields of its own, a line of its own, or more
//! than a log line keeps. The audit test sends them through every route;
//! the hostile-input corpora and the fuzz seeds hold them too.

/// A value that spells audit fields of its own.
pub const FORGED_FIELDS: &str =
    r#"x outcome="ok" duration_ms=1 client=10.9.9.9:1 transport="websocket" forged=1"#;

/// A value that spells an audit line of its own.
pub const FORGED_LINE: &str =
    "x\n2030-01-01T00:00:00.000000Z  INFO audit: event=\"tool_call\" forged=1";

/// The key no log line may hold.
pub const FORGED_KEY: &str = "forged";

/// Every forgery: fields, a line, and one longer than a log line keeps.
pub fn forgeries() -> [String; 3] {
    [
        FORGED_FIELDS.to_owned(),
        FORGED_LINE.to_owned(),
        format!("{} forged=1", "y".repeat(300)),
    ]
}

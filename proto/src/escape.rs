//! Strings from outside the process (tool names, session ids from URLs,
//! header values, an app's error texts, whatever a client or an app sent),
//! made safe to put in a log line or a message.
//!
//! In a log line such a value is an [`Outside`], recorded as a field
//! (`tool = tool.field()`): a string field, which the text format writes in
//! double quotes with its quotes, backslashes and control characters
//! escaped (`tool="x outcome=\"ok\""`), the JSON format as a JSON string,
//! and a span exporter as a string attribute. Written any other way
//! (`%value`, or inside the message) a value with a space and an `=` would
//! read as fields of its own: a caller could write what it likes into the
//! log. [`Outside`] never hands out its text, so it cannot be written
//! unquoted; and it is cut short, so a value cannot blow up a line.
//!
//! In a message (an error text, a `grpc-message` header) a value is
//! [`quoted`] the same way, or [`truncated`] where the message reads better
//! without quotes: control characters escaped, so it cannot forge a line,
//! and cut short.

use std::borrow::Cow;
use std::fmt;

/// Longest part of an outside string that is echoed back, in characters.
pub const ECHO_LIMIT: usize = 128;

/// Longest part of a longer outside text (an app's error, a parser's
/// complaint that quotes its input) a log line keeps, in characters.
pub const TEXT_LIMIT: usize = 512;

/// Characters of a session id in log lines at INFO and above.
const SHORT_ID: usize = 8;

/// A value from outside the process, cut after a limit (an ellipsis marks
/// the cut): the one form in which such a value reaches a log line. Record
/// it with [`Outside::field`]; its `Display` quotes it as `{:?}` does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outside<'a>(Cow<'a, str>);

impl<'a> Outside<'a> {
    /// `value`, cut after [`ECHO_LIMIT`] characters.
    pub fn new(value: &'a str) -> Self {
        Self::within(value, ECHO_LIMIT)
    }

    /// `value`, cut after `limit` characters: for longer texts (an app's
    /// error, a parser's complaint that quotes its input).
    pub fn within(value: &'a str, limit: usize) -> Self {
        match value.char_indices().nth(limit) {
            Some((end, _)) => Self(Cow::Owned(format!("{}…", &value[..end]))),
            None => Self(Cow::Borrowed(value)),
        }
    }

    /// The first 8 characters of a session id (one from a URL may be
    /// anything): enough to correlate, not enough to use, since a session
    /// id is a capability in URLs. No ellipsis: the cut is the point.
    pub fn session(id: &'a str) -> Self {
        Self(Cow::Borrowed(short_id(id)))
    }

    /// The value as a tracing field (`tool = tool.field()`): a string,
    /// which every log format writes quoted and escaped. It offers nothing
    /// else (no `Display`, no `Debug`), so it cannot be written unquoted.
    pub fn field(&self) -> &dyn tracing::Value {
        match &self.0 {
            Cow::Borrowed(text) => text,
            Cow::Owned(text) => text,
        }
    }
}

impl fmt::Display for Outside<'_> {
    /// In double quotes, quotes, backslashes and control characters
    /// escaped, as `{:?}` writes a string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_ref(), f)
    }
}

/// `value` with control characters escaped and cut after [`ECHO_LIMIT`]
/// characters (an ellipsis marks the cut).
pub fn truncated(value: &str) -> Cow<'_, str> {
    truncated_to(value, ECHO_LIMIT)
}

/// [`truncated`] with a limit of `limit` characters, for longer messages that
/// quote outside input (a parser's error, an app's error text).
pub fn truncated_to(value: &str, limit: usize) -> Cow<'_, str> {
    let clean = value.chars().take(limit + 1).all(|c| !c.is_control());
    if clean && value.chars().nth(limit).is_none() {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len().min(limit * 2));
    for (count, c) in value.chars().enumerate() {
        if count == limit {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `value` as an [`Outside`] writes it: in quotes, as `{:?}` shows it
/// (control characters and quotes escaped), cut after [`ECHO_LIMIT`]
/// characters; for messages that quote an outside value, such as a session
/// id or a tool name.
pub fn quoted(value: &str) -> String {
    Outside::new(value).to_string()
}

/// The short form of a session id for log lines at INFO and above: enough
/// to correlate, not enough to use (a session id is a capability in URLs).
pub fn short_id(session_id: &str) -> &str {
    match session_id.char_indices().nth(SHORT_ID) {
        Some((end, _)) => &session_id[..end],
        None => session_id,
    }
}

/// A request id (`"{session_id}:{n}"`) with its session id shortened.
pub fn short_request(request_id: &str) -> String {
    match request_id.rsplit_once(':') {
        Some((session, n)) => format!("{}:{}", short_id(session), truncated_to(n, 20)),
        None => truncated_to(short_id(request_id), 8).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_shortened_for_logs() {
        let id = "6f1c2d3e-58cd-4c01-80e5-8016bcb4f813";
        assert_eq!(short_request(&format!("{id}:12")), "6f1c2d3e:12");
        assert_eq!(short_request(id), "6f1c2d3e");
        assert_eq!(short_id("abc"), "abc");
    }

    #[test]
    fn short_clean_values_pass_unchanged() {
        assert!(matches!(truncated("abc/def"), Cow::Borrowed("abc/def")));
        assert!(matches!(Outside::new("abc").0, Cow::Borrowed("abc")));
    }

    #[test]
    fn quoted_values_are_escaped_and_cut_inside_their_quotes() {
        assert_eq!(quoted("a\r\n\"b\\"), "\"a\\r\\n\\\"b\\\\\"");
        let long = quoted(&"x".repeat(100_000));
        assert!(long.len() < ECHO_LIMIT + 8, "{long}");
        assert!(long.ends_with("…\""), "{long}");
    }

    #[test]
    fn a_forging_value_stays_one_quoted_token() {
        let forged = r#"x outcome="ok" duration_ms=1 client=10.9.9.9:1 forged=1"#;
        let shown = Outside::new(forged).to_string();
        assert_eq!(
            shown,
            r#""x outcome=\"ok\" duration_ms=1 client=10.9.9.9:1 forged=1""#
        );
        assert_eq!(Outside::within("abcdef", 3).to_string(), "\"abc…\"");
    }

    #[test]
    fn session_ids_are_cut_to_their_prefix_on_a_character_boundary() {
        let id = "6f1c2d3e-58cd-4c01-80e5-8016bcb4f813";
        assert_eq!(Outside::session(id).to_string(), "\"6f1c2d3e\"");
        assert_eq!(Outside::session("ä b=1 c=2 d").to_string(), "\"ä b=1 c=\"");
        assert_eq!(Outside::session("abc").to_string(), "\"abc\"");
    }

    #[test]
    fn control_characters_are_escaped_and_long_values_cut() {
        assert_eq!(truncated("a\r\nb"), "a\\r\\nb");
        let long = "x".repeat(1000);
        let cut = truncated(&long);
        assert_eq!(cut.chars().count(), ECHO_LIMIT + 1);
        assert!(cut.ends_with('…'));
    }
}

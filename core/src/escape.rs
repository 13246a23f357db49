//! Strings from outside the process (paths, ids, header values), made safe
//! to put in an error message or a log line: control characters escaped, so
//! a value cannot forge a line, and long values cut short, so a value cannot
//! blow up a message (or a `grpc-message` header) it is echoed in.

use std::borrow::Cow;

/// Longest part of an outside string that is echoed back, in characters.
pub const ECHO_LIMIT: usize = 128;

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

/// `value` in quotes, as `{:?}` shows it (control characters and quotes
/// escaped), cut after [`ECHO_LIMIT`] characters: for messages that quote an
/// outside value, such as a session id or a tool name.
pub fn quoted(value: &str) -> String {
    match value.char_indices().nth(ECHO_LIMIT) {
        Some((end, _)) => format!("{:?}…", &value[..end]),
        None => format!("{value:?}"),
    }
}

/// The short form of a session id for log lines at INFO and above: enough
/// to correlate, not enough to use (a session id is a capability in URLs).
pub fn short_id(session_id: &str) -> &str {
    session_id.get(..8).unwrap_or(session_id)
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
    }

    #[test]
    fn quoted_values_are_escaped_and_cut() {
        assert_eq!(quoted("a\r\n\"b"), "\"a\\r\\n\\\"b\"");
        let long = quoted(&"x".repeat(100_000));
        assert!(long.len() < ECHO_LIMIT + 8, "{long}");
        assert!(long.ends_with("\"…"));
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

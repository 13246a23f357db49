//! Any text as an outside value in a log line or a message: `Outside` (and
//! `quoted`, which is its text) writes it as one token, in double quotes,
//! with no raw control character and no unescaped quote inside, cut to its
//! limit; never a panic. A value that could close its quotes could write
//! fields of its own into the audit log.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_proto::escape::{ECHO_LIMIT, Outside, quoted};

/// Asserts that `shown` is one quoted token of at most `limit` characters
/// (each escaped to at most `\u{10ffff}`, and an ellipsis).
fn one_token(shown: &str, limit: usize) {
    let inside = shown
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or_else(|| panic!("not in quotes: {shown:?}"));
    let mut escaped = false;
    for c in inside.chars() {
        assert!(!c.is_control(), "a raw control character in {shown:?}");
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => panic!("a quote that ends the token early in {shown:?}"),
            _ => {}
        }
    }
    assert!(!escaped, "a dangling escape in {shown:?}");
    assert!(inside.chars().count() <= (limit + 1) * 10, "{} characters", inside.len());
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    one_token(&Outside::new(&text).to_string(), ECHO_LIMIT);
    one_token(&quoted(&text), ECHO_LIMIT);
    one_token(&Outside::within(&text, 16).to_string(), 16);
    one_token(&Outside::session(&text).to_string(), 8);
});

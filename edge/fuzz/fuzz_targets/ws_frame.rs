//! One WebSocket text frame from an app, of any text: the bridge's parser
//! returns (never panics), and every refusal it produces (the error frame's
//! message, or the problem a malformed result fails its call with) is
//! bounded and holds no raw control character.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_core::Inbound;
use openclaw_proxy_edge::http::ws;

fn check(text: &str) {
    assert!(text.len() <= 2048, "{} bytes", text.len());
    assert!(!text.chars().any(char::is_control), "{text:?}");
}

fuzz_target!(|data: &[u8]| {
    // Text frames are UTF-8 (the WebSocket layer refuses anything else).
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match ws::parse_app_frame(text) {
        Err(problem) => check(&problem),
        Ok(Some(Inbound::Malformed { problem, .. })) => check(&problem),
        Ok(_) => {}
    }
});

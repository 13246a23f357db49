//! A session body of any bytes, as `POST /v1/chat/sessions` and
//! `PUT /v1/chat/sessions/{id}/tools` read it: parsed or refused (never a
//! panic), and a refusal is a 4xx; an accepted body nests no deeper than
//! the documented 128 levels, in fields serde skips too.
#![no_main]

use axum::response::IntoResponse;
use http::StatusCode;
use libfuzzer_sys::fuzz_target;
use openclaw_proxy_edge::http::request::{MAX_NESTING, nesting_within};
use openclaw_proxy_edge::http::rest;

fn check(error: openclaw_proxy_edge::http::error::ApiError) {
    let status: StatusCode = error.into_response().status();
    assert!(status.is_client_error(), "{status}");
}

fuzz_target!(|data: &[u8]| {
    match rest::parse_create_session(data) {
        Ok(_) => assert!(nesting_within(data, MAX_NESTING)),
        Err(error) => check(error),
    }
    match rest::parse_update_tools(data) {
        Ok(_) => assert!(nesting_within(data, MAX_NESTING)),
        Err(error) => check(error),
    }
});

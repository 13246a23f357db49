//! An MCP request body of any bytes, at each revision: the MCP server's
//! reading of it and the cancellation lookup return (never panic); bytes
//! that are not JSON are always refused with 400 and `-32700`.
#![no_main]

use axum::http::{HeaderMap, HeaderValue};
use libfuzzer_sys::fuzz_target;
use openclaw_proxy_edge::http::mcp::jsonrpc;
use openclaw_proxy_edge::http::mcp::transport::request::parse;

fuzz_target!(|data: &[u8]| {
    let body = bytes::Bytes::copy_from_slice(data);
    let mut at_2026 = HeaderMap::new();
    at_2026.insert("mcp-protocol-version", HeaderValue::from_static("2026-07-28"));
    at_2026.insert("mcp-method", HeaderValue::from_static("tools/call"));
    for headers in [HeaderMap::new(), at_2026] {
        let read = parse(&body, &headers);
        if serde_json::from_slice::<serde::de::IgnoredAny>(data).is_err() {
            let refused = read.err().map(|rejected| (rejected.status.as_u16(), rejected.code.0));
            assert_eq!(refused, Some((400, -32700)));
        }
    }
    let _ = jsonrpc::cancelled_request(data);
});

//! An MCP request body of any bytes: the JSON-RPC refusal check and the
//! cancellation lookup return (never panic); bytes that are not JSON are
//! always refused with 400.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_edge::http::mcp::jsonrpc;

fuzz_target!(|data: &[u8]| {
    let refused = jsonrpc::refusal(data);
    if std::str::from_utf8(data).is_err() {
        let status = refused.as_ref().map(|response| response.status().as_u16());
        assert_eq!(status, Some(400));
    }
    let _ = jsonrpc::cancelled_request(data);
});

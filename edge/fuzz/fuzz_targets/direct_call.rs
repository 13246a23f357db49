//! An MCP request body of any bytes on the direct `tools/call` path: parsed
//! or left to rmcp, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_edge::http::mcp::direct;

fuzz_target!(|data: &[u8]| {
    let body = bytes::Bytes::copy_from_slice(data);
    let _ = direct::parse(&body, direct::Revision::WithInitialize, &Default::default());
    let _ = direct::parse(&body, direct::Revision::PerRequest, &Default::default());
});

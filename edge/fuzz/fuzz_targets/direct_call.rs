//! An MCP request body of any bytes on the direct `tools/call` path: parsed
//! or left to rmcp, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_edge::http::direct;

fuzz_target!(|data: &[u8]| {
    let _ = direct::parse(&bytes::Bytes::copy_from_slice(data));
});

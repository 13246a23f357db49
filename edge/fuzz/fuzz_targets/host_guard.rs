//! Any `Host` and `Origin` header values (split at the first NUL byte)
//! against the Host/Origin guard: allowed or refused, never a panic.
#![no_main]

use http::{HeaderMap, HeaderValue, Uri, header};
use libfuzzer_sys::fuzz_target;
use openclaw_proxy_edge::EdgeConfig;
use openclaw_proxy_edge::http::guard::HostGuard;

fuzz_target!(|data: &[u8]| {
    let (host, origin) = match data.iter().position(|&byte| byte == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let mut headers = HeaderMap::new();
    if let Ok(host) = HeaderValue::from_bytes(host) {
        headers.insert(header::HOST, host);
    }
    if let Some(Ok(origin)) = origin.map(HeaderValue::from_bytes) {
        headers.insert(header::ORIGIN, origin);
    }
    let guard = HostGuard::new(&EdgeConfig {
        allowed_hosts: vec!["proxy.internal".into(), "api.example:8443".into()],
        allowed_origins: vec!["https://app.example".into()],
        public_url: Some("https://mcp.example.com".into()),
        ..EdgeConfig::default()
    });
    let _ = guard.check(&headers, &Uri::from_static("/v1/mcp"));
});

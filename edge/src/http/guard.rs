//! `Host` and `Origin` checks against DNS rebinding and cross-site requests,
//! on every route: REST, the WebSocket upgrade, MCP and gRPC.
//!
//! A web page can make a browser send requests to a server on loopback by
//! pointing its own domain at 127.0.0.1; the `Host` (and `Origin`) then name
//! the attacker's domain. A page can also post to the server directly from
//! its own origin (a `text/plain` POST needs no CORS preflight). So the server
//! only answers to loopback hosts, the host of `OPENCLAW_PROXY_PUBLIC_URL`,
//! and `OPENCLAW_PROXY_ALLOWED_HOSTS`; a request carrying an `Origin` must
//! come from a loopback origin, the public URL's origin, or one of
//! `OPENCLAW_PROXY_ALLOWED_ORIGINS`. Requests without `Origin` (apps, MCP
//! clients, gRPC) pass the origin check.
//!
//! [`HostGuard::refusal`] runs before authentication, session lookup and
//! the WebSocket upgrade (the server calls it on every request, right after
//! the head limits and before the router, rather than as a middleware layer
//! that would box each request's future once more), so a refused page
//! learns nothing, not even whether a session exists, and never gets a
//! socket. rmcp has the same checks built in, but
//! they run after our routing; they are switched off in [`super::mcp`] in
//! favour of this one. Only the health probes are left out ([`UNGUARDED`]):
//! they reveal nothing, and orchestrators probe them by the pod's address.
//!
//! `*` in either list allows everything (for deployments whose reverse proxy
//! already checks the host).

use axum::http::{HeaderMap, Uri, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Paths served whatever the `Host`: the health and readiness probes.
pub const UNGUARDED: [&str; 2] = ["/health", "/ready"];

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The allowed hosts and origins.
#[derive(Debug)]
pub struct HostGuard {
    any_host: bool,
    hosts: Vec<AllowedHost>,
    any_origin: bool,
    origins: Vec<String>,
}

/// One allowed host, lowercase, taken apart once so that checking a
/// request (every request) allocates nothing.
#[derive(Debug)]
struct AllowedHost {
    /// With a port, the whole authority must match; without, the hostname.
    with_port: bool,
    /// The authority as configured (with a port) or its hostname.
    name: String,
}

impl AllowedHost {
    fn new(host: &str) -> Self {
        let with_port = has_port(host);
        let name = if with_port { host } else { hostname_of(host) };
        Self {
            with_port,
            name: name.to_owned(),
        }
    }

    /// Whether a request's authority (and its hostname) is this host, in
    /// any case.
    fn admits(&self, authority: &str, hostname: &str) -> bool {
        let presented = if self.with_port { authority } else { hostname };
        presented.eq_ignore_ascii_case(&self.name)
    }
}

impl HostGuard {
    /// The policy of `config`.
    pub fn new(config: &crate::config::EdgeConfig) -> Self {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS
            .iter()
            .map(|host| (*host).to_owned())
            .collect();
        let mut origins: Vec<String> = Vec::new();
        if let Some(public) = config.public_url.as_deref()
            && let Some((scheme, authority)) = split_url(public)
        {
            hosts.push(authority.to_ascii_lowercase());
            origins.push(format!("{scheme}://{authority}").to_ascii_lowercase());
        }
        hosts.extend(
            config
                .allowed_hosts
                .iter()
                .map(|host| host.to_ascii_lowercase()),
        );
        origins.extend(
            config
                .allowed_origins
                .iter()
                .map(|origin| origin.trim_end_matches('/').to_ascii_lowercase()),
        );
        Self {
            any_host: hosts.iter().any(|host| host == "*"),
            hosts: hosts.iter().map(|host| AllowedHost::new(host)).collect(),
            any_origin: origins.iter().any(|origin| origin == "*"),
            origins,
        }
    }

    /// The answer to a request whose `Host` or `Origin` is not allowed:
    /// 403, or `PERMISSION_DENIED` to a gRPC request (`grpc`); `None` when
    /// it may go on (the health probes always may).
    pub fn refusal<B>(&self, request: &axum::http::Request<B>, grpc: bool) -> Option<Response> {
        if UNGUARDED.contains(&request.uri().path()) {
            return None;
        }
        let error = self.check(request.headers(), request.uri()).err()?;
        if grpc {
            let status = tonic::Status::permission_denied(error.to_string());
            return Some(super::grpc_answer(status));
        }
        Some(error.into_response())
    }

    /// Refuses a request whose `Host` or `Origin` is not allowed.
    pub fn check(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), ApiError> {
        let host = headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .or_else(|| uri.authority().map(|authority| authority.as_str()))
            .unwrap_or_default();
        if !self.any_host && !self.host_allowed(host) {
            return Err(ApiError::HostNotAllowed(host.to_owned()));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("<not text>");
            if !self.any_origin && !self.origin_allowed(origin) {
                return Err(ApiError::OriginNotAllowed(origin.to_owned()));
            }
        }
        Ok(())
    }

    fn host_allowed(&self, authority: &str) -> bool {
        let hostname = hostname_of(authority);
        self.hosts
            .iter()
            .any(|allowed| allowed.admits(authority, hostname))
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim_end_matches('/').to_ascii_lowercase();
        let Some((scheme, authority)) = split_url(&origin) else {
            return false;
        };
        if matches!(scheme, "http" | "https") && LOOPBACK_HOSTS.contains(&hostname_of(authority)) {
            return true;
        }
        self.origins.contains(&origin)
    }
}

/// `scheme://authority` of a URL, without path.
fn split_url(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    (!authority.is_empty()).then_some((scheme, authority))
}

fn is_bare_ipv6(host: &str) -> bool {
    !host.starts_with('[') && host.bytes().filter(|&byte| byte == b':').nth(1).is_some()
}

fn has_port(authority: &str) -> bool {
    if is_bare_ipv6(authority) {
        return false;
    }
    match authority.strip_prefix('[') {
        Some(rest) => rest
            .split_once(']')
            .is_some_and(|(_, port)| port.starts_with(':')),
        None => authority.contains(':'),
    }
}

/// The host part of an authority: `example.com:8080` → `example.com`,
/// `[::1]:8000` → `::1`.
fn hostname_of(authority: &str) -> &str {
    if is_bare_ipv6(authority) {
        return authority;
    }
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(host, _)| host);
    }
    authority
        .split_once(':')
        .map_or(authority, |(host, _)| host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::EdgeConfig;

    fn guard(hosts: &[&str], origins: &[&str], public: Option<&str>) -> HostGuard {
        HostGuard::new(&EdgeConfig {
            allowed_hosts: hosts.iter().map(|s| (*s).to_owned()).collect(),
            allowed_origins: origins.iter().map(|s| (*s).to_owned()).collect(),
            public_url: public.map(str::to_owned),
            ..EdgeConfig::default()
        })
    }

    #[test]
    fn loopback_hosts_with_any_port() {
        let guard = guard(&[], &[], None);
        for host in [
            "127.0.0.1:8000",
            "localhost",
            "LOCALHOST:1",
            "[::1]:8000",
            "::1",
        ] {
            assert!(guard.host_allowed(host), "{host}");
        }
        for host in [
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil:80",
            "",
        ] {
            assert!(!guard.host_allowed(host), "{host}");
        }
    }

    #[test]
    fn configured_hosts_and_public_url() {
        let guard = guard(
            &["proxy.internal", "api.example:8443"],
            &[],
            Some("https://mcp.example.com/base"),
        );
        assert!(guard.host_allowed("proxy.internal:9000"));
        assert!(guard.host_allowed("api.example:8443"));
        assert!(!guard.host_allowed("api.example:8444"));
        assert!(guard.host_allowed("mcp.example.com"));
        assert!(!guard.host_allowed("other.example.com"));
    }

    #[test]
    fn origins() {
        let guard = guard(
            &[],
            &["https://app.example"],
            Some("https://mcp.example.com"),
        );
        assert!(guard.origin_allowed("http://localhost:3000"));
        assert!(guard.origin_allowed("http://127.0.0.1"));
        assert!(guard.origin_allowed("https://app.example"));
        assert!(guard.origin_allowed("https://mcp.example.com"));
        assert!(!guard.origin_allowed("https://evil.example"));
        assert!(!guard.origin_allowed("null"));
        assert!(!guard.origin_allowed("http://localhost.evil.example"));
    }
}

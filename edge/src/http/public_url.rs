//! The base URL the proxy knows itself by: `OPENCLAW_PROXY_PUBLIC_URL`
//! when set, else the request's own scheme and authority. Every URL the
//! proxy hands out (`bridge_url`, `mcp_url`, the legacy transport's
//! endpoint, the OAuth resource and its metadata) starts with it, so one
//! reverse proxy setting fixes them all.

use axum::http::{HeaderMap, Uri, header};

use super::request::ConnectionInfo;

/// The base URL for `bridge_url` and `mcp_url`: the configured public URL;
/// else the request's own scheme (`X-Forwarded-Proto: https` when a proxy
/// set it) and authority — the `Host` header (HTTP/1) or `:authority`
/// (HTTP/2), used only when it is a well-formed `host[:port]`; else the
/// address the client actually connected to.
pub(crate) fn base_url(public_url: Option<&str>, request: &RequestHead<'_>) -> String {
    if let Some(public_url) = public_url {
        return public_url.to_owned();
    }
    let authority = request
        .headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| request.uri.authority().map(|authority| authority.as_str()))
        .filter(|authority| is_host_and_port(authority))
        .map(str::to_owned)
        .or_else(|| request.connection.map(|info| info.local.to_string()))
        .unwrap_or_else(|| "127.0.0.1:8000".to_owned());
    let scheme = request
        .headers
        .get("x-forwarded-proto")
        .and_then(|value| value.to_str().ok())
        .map(|proto| proto.split(',').next().unwrap_or_default().trim())
        .filter(|proto| proto.eq_ignore_ascii_case("https"))
        .map_or(
            if request.connection.is_some_and(|info| info.tls) {
                "https"
            } else {
                "http"
            },
            |_| "https",
        );
    format!("{scheme}://{authority}")
}

/// What [`base_url`] reads of a request.
pub(crate) struct RequestHead<'a> {
    pub(crate) headers: &'a HeaderMap,
    pub(crate) uri: &'a Uri,
    /// The connection it arrived on, when the server recorded it.
    pub(crate) connection: Option<ConnectionInfo>,
}

impl<'a> RequestHead<'a> {
    /// The head of `request`.
    pub(crate) fn of<B>(request: &'a axum::http::Request<B>) -> Self {
        Self {
            headers: request.headers(),
            uri: request.uri(),
            connection: request.extensions().get::<ConnectionInfo>().copied(),
        }
    }
}

/// Whether `value` is `host[:port]`: a DNS name or IPv4 address, or an IPv6
/// address in brackets, then an optional decimal port. Nothing else may reach
/// the answer's URLs.
fn is_host_and_port(value: &str) -> bool {
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let Some((address, after)) = rest.split_once(']') else {
            return false;
        };
        if address.parse::<std::net::Ipv6Addr>().is_err() {
            return false;
        }
        match after {
            "" => return true,
            _ => match after.strip_prefix(':') {
                Some(port) => (None, Some(port)),
                None => return false,
            },
        }
    } else {
        match value.rsplit_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(value), None),
        }
    };
    let host_ok = host.is_none_or(|host| {
        !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
            })
    });
    let port_ok = port.is_none_or(|port| port.parse::<u16>().is_ok());
    host_ok && port_ok
}

#[cfg(test)]
mod tests {
    use super::is_host_and_port;

    #[test]
    fn host_and_port_accepts_names_addresses_and_ports() {
        for good in [
            "localhost",
            "proxy.example.com:8443",
            "10.0.0.1:80",
            "[::1]:8000",
            "[::1]",
        ] {
            assert!(is_host_and_port(good), "{good}");
        }
    }

    #[test]
    fn host_and_port_refuses_markup_and_junk() {
        for bad in [
            "",
            "evil.com\"><script>",
            "a b",
            "host:port",
            "[zz]:1",
            "a..b",
            "h:99999",
            "x/y",
        ] {
            assert!(!is_host_and_port(bad), "{bad}");
        }
    }
}

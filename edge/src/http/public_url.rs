//! The base URL the proxy knows itself by: `OPENCLAW_PROXY_PUBLIC_URL`
//! when set, else the request's own scheme and authority. Every URL the
//! proxy hands out (`bridge_url`, `mcp_url`, the legacy transport's
//! endpoint, the OAuth resource and its metadata) starts with it, so one
//! reverse proxy setting fixes them all.
//!
//! A request's headers name the URL it was sent to, but anyone can write
//! them: `X-Forwarded-Proto` is read only from a trusted proxy
//! (`OPENCLAW_PROXY_TRUSTED_PROXIES`), and what decides whom a credential
//! is for (the OAuth resource, an access token's audience) never comes from
//! headers at all ([`Base::own`]).

use axum::http::{HeaderMap, Uri, header};

use super::request::ConnectionInfo;

/// The base URL for `bridge_url` and `mcp_url`: the configured public URL;
/// else the request's own scheme (`X-Forwarded-Proto: https` when a trusted
/// proxy set it) and authority — the `Host` header (HTTP/1) or `:authority`
/// (HTTP/2), used only when it is a well-formed `host[:port]`; else the
/// address the client actually connected to.
pub(crate) fn base_url(public_url: Option<&str>, request: &RequestHead<'_>) -> String {
    Base::of(public_url, request).url()
}

/// [`base_url`] in pieces, borrowed from the request where it can be:
/// what a check of a URL against it (an access token's audience, on every
/// request) reads without building it.
pub(crate) enum Base<'a> {
    /// `OPENCLAW_PROXY_PUBLIC_URL`.
    Public(&'a str),
    /// The request's own scheme and authority.
    Own {
        scheme: &'static str,
        authority: std::borrow::Cow<'a, str>,
    },
}

impl<'a> Base<'a> {
    /// The base URL of `request`, as [`base_url`] says.
    pub(crate) fn of(public_url: Option<&'a str>, request: &RequestHead<'a>) -> Self {
        if let Some(public_url) = public_url {
            return Self::Public(public_url);
        }
        let authority = request
            .headers
            .get(header::HOST)
            .and_then(|value| value.to_str().ok())
            .or_else(|| request.uri.authority().map(|authority| authority.as_str()))
            .filter(|authority| is_host_and_port(authority))
            .map(std::borrow::Cow::Borrowed)
            .or_else(|| request.connection.map(|info| info.local.to_string().into()))
            .unwrap_or(std::borrow::Cow::Borrowed(UNKNOWN_ORIGIN));
        Self::Own {
            scheme: scheme(request),
            authority,
        }
    }

    /// The base that names the server to whom a credential is for (the
    /// OAuth resource): the configured public URL, else the origin of the
    /// address the client connected to (`https` over TLS), never anything
    /// the request's headers say. Without a public URL that is the listen
    /// address on loopback, the only place OAuth runs without one
    /// (`ServerConfig::oauth_audience_rule`).
    pub(crate) fn own(public_url: Option<&'a str>, request: &RequestHead<'_>) -> Self {
        if let Some(public_url) = public_url {
            return Self::Public(public_url);
        }
        let connection = request.connection;
        Self::Own {
            scheme: if connection.is_some_and(|info| info.tls) {
                "https"
            } else {
                "http"
            },
            authority: connection
                .map(|info| info.local.to_string().into())
                .unwrap_or(std::borrow::Cow::Borrowed(UNKNOWN_ORIGIN)),
        }
    }

    /// The URL, whole.
    pub(crate) fn url(&self) -> String {
        match self {
            Self::Public(url) => (*url).to_owned(),
            Self::Own { scheme, authority } => format!("{scheme}://{authority}"),
        }
    }

    /// What follows the base URL in `url`, when `url` starts with it.
    pub(crate) fn strip_from<'u>(&self, url: &'u str) -> Option<&'u str> {
        match self {
            Self::Public(base) => url.strip_prefix(base),
            Self::Own { scheme, authority } => url
                .strip_prefix(scheme)
                .and_then(|rest| rest.strip_prefix("://"))
                .and_then(|rest| rest.strip_prefix(authority.as_ref())),
        }
    }
}

/// The authority of a request that arrived on no recorded connection (a
/// router called directly): the default listen address.
const UNKNOWN_ORIGIN: &str = "127.0.0.1:8000";

/// The request's scheme: `https` when it came over TLS or a trusted proxy
/// says so with `X-Forwarded-Proto: https`, else `http`.
fn scheme(request: &RequestHead<'_>) -> &'static str {
    let trusted = request.connection.is_some_and(|info| info.trusted_proxy);
    request
        .headers
        .get("x-forwarded-proto")
        .filter(|_| trusted)
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
        )
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
    use axum::http::{HeaderMap, HeaderValue, Uri, header};

    use super::{Base, ConnectionInfo, RequestHead, base_url, is_host_and_port};

    /// What the check of an audience strips is the URL the proxy hands out:
    /// the two never disagree on where the base ends.
    #[test]
    fn the_base_in_pieces_is_the_base_url() {
        let uri: Uri = "/v1/mcp/s1".parse().unwrap_or_default();
        let mut forwarded = HeaderMap::new();
        forwarded.insert(
            header::HOST,
            HeaderValue::from_static("proxy.example.com:8443"),
        );
        forwarded.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let mut junk_host = HeaderMap::new();
        junk_host.insert(header::HOST, HeaderValue::from_static("evil\"><"));
        let empty = HeaderMap::new();
        for (public_url, headers) in [
            (None, &forwarded),
            (None, &junk_host),
            (None, &empty),
            (Some("https://edge.example.com/proxy"), &forwarded),
        ] {
            let head = RequestHead {
                headers,
                uri: &uri,
                connection: None,
            };
            let url = base_url(public_url, &head);
            let base = Base::of(public_url, &head);
            assert_eq!(base.strip_from(&format!("{url}/v1/mcp")), Some("/v1/mcp"));
            assert_eq!(base.strip_from(&url), Some(""));
            let other = url.replace("://", "://x");
            assert_eq!(base.strip_from(&other), None, "{other} is not below {url}");
            assert_eq!(base.strip_from(&url[..url.len() - 1]), None);
        }
    }

    /// `X-Forwarded-Proto` counts only from a trusted proxy, and the base a
    /// credential is for reads no header at all.
    #[test]
    fn forwarded_headers_count_from_trusted_proxies_only() {
        let uri: Uri = "/v1/mcp/s1".parse().unwrap_or_default();
        let mut forged = HeaderMap::new();
        forged.insert(header::HOST, HeaderValue::from_static("victim.example"));
        forged.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        let connection = |trusted_proxy| ConnectionInfo {
            local: "127.0.0.1:8000"
                .parse()
                .unwrap_or(([127, 0, 0, 1], 8000).into()),
            remote: "127.0.0.1:50000"
                .parse()
                .unwrap_or(([127, 0, 0, 1], 1).into()),
            tls: false,
            trusted_proxy,
        };
        let head = |trusted_proxy| RequestHead {
            headers: &forged,
            uri: &uri,
            connection: Some(connection(trusted_proxy)),
        };
        assert_eq!(base_url(None, &head(false)), "http://victim.example");
        assert_eq!(base_url(None, &head(true)), "https://victim.example");
        for trusted_proxy in [false, true] {
            assert_eq!(
                Base::own(None, &head(trusted_proxy)).url(),
                "http://127.0.0.1:8000"
            );
            assert_eq!(
                Base::own(Some("https://mcp.example.com/p"), &head(trusted_proxy)).url(),
                "https://mcp.example.com/p"
            );
        }
    }

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

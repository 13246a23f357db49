//! How large a request head may be, checked before the `Host` guard and any
//! route.
//!
//! hyper refuses an HTTP/1 request head it has no room for itself, before
//! any service sees it, with an empty body and no hook to give it one: `431`
//! for more header fields than it keeps or more bytes than its read buffer,
//! `414` for a target over 65534 bytes. So hyper is given room above the
//! server's own limits ([`http1_buffer`], [`http1_max_headers`], and for
//! HTTP/2 [`http2_header_list`]: about twice the limits), and [`check`]
//! applies the limits themselves (`OPENCLAW_PROXY_MAX_REQUEST_TARGET_BYTES`,
//! `OPENCLAW_PROXY_MAX_HEADER_BYTES`, `OPENCLAW_PROXY_MAX_HEADERS`) to every
//! request hyper lets through: `414` or `431` with the JSON error every
//! refusal has, or `RESOURCE_EXHAUSTED` to gRPC, naming the setting. A head
//! beyond hyper's room gets hyper's own bodiless refusal (and the
//! connection closes), as does one hyper cannot parse; h2's `431` for a
//! head beyond its room is empty too.

use axum::http::{HeaderMap, Uri};

use super::error::HeadTooLarge;
use crate::config::HeadLimits;

/// Whether a request head (its target and header fields) is within
/// `limits`. The target is checked first, then the number of fields, then
/// their bytes; nothing of the request is quoted.
pub fn check(limits: &HeadLimits, uri: &Uri, headers: &HeaderMap) -> Result<(), HeadTooLarge> {
    let length = target_length(uri);
    if length > limits.max_target_bytes {
        return Err(HeadTooLarge::Target {
            length,
            limit: limits.max_target_bytes,
        });
    }
    let count = headers.len();
    if count > limits.max_headers {
        return Err(HeadTooLarge::Count {
            count,
            limit: limits.max_headers,
        });
    }
    let size = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len())
        .sum();
    if size > limits.max_header_bytes {
        return Err(HeadTooLarge::Bytes {
            size,
            limit: limits.max_header_bytes,
        });
    }
    Ok(())
}

/// Bytes of a request target: its path and query, and its scheme and host
/// when the request names them (an absolute-form HTTP/1 target; every
/// HTTP/2 request, from `:scheme` and `:authority`).
fn target_length(uri: &Uri) -> usize {
    let scheme = uri
        .scheme_str()
        .map_or(0, |scheme| scheme.len() + "://".len());
    let authority = uri
        .authority()
        .map_or(0, |authority| authority.as_str().len());
    let path = uri.path_and_query().map_or(0, |path| path.as_str().len());
    scheme + authority + path
}

/// hyper's own read buffer for an HTTP/1 connection (its `max_buf_size`
/// default, 408 KiB).
const HYPER_DEFAULT_BUFFER: usize = 8192 + 4096 * 100;

/// Header fields hyper keeps on the stack; more cost it an allocation per
/// request.
const HYPER_DEFAULT_HEADERS: usize = 100;

/// What a request line or the pseudo-header fields hold beyond the target
/// (method, version), generously.
const LINE_ROOM: usize = 64;

/// What a header field costs beyond its name and value: `: ` and CRLF on
/// the HTTP/1 wire, 32 bytes in HTTP/2's count (RFC 9113, section 6.5.2).
const HTTP1_FIELD_ROOM: usize = 4;
const HTTP2_FIELD_ROOM: usize = 32;

/// Pseudo-header fields of an HTTP/2 request (`:method`, `:scheme`,
/// `:authority`, `:path`, `:protocol`).
const HTTP2_PSEUDO_FIELDS: usize = 5;

/// The most a request head within `limits` takes on the HTTP/1 wire.
fn http1_head(limits: &HeadLimits) -> usize {
    limits.max_target_bytes
        + limits.max_header_bytes
        + limits.max_headers * HTTP1_FIELD_ROOM
        + LINE_ROOM
}

/// hyper's HTTP/1 read buffer (`max_buf_size`): twice the largest head
/// within the limits, or hyper's own default when that is larger. This is
/// what one connection may hold of a head before hyper refuses it or the
/// header-read timeout closes the connection.
pub fn http1_buffer(limits: &HeadLimits) -> usize {
    (2 * http1_head(limits)).max(HYPER_DEFAULT_BUFFER)
}

/// Header fields hyper must accept in an HTTP/1 request (twice the limit),
/// when that is more than it keeps on the stack by default; `None` leaves
/// hyper's default, which costs no allocation per request (an explicit
/// value makes hyper allocate room for the fields on every request).
pub fn http1_max_headers(limits: &HeadLimits) -> Option<usize> {
    let room = 2 * limits.max_headers;
    (room > HYPER_DEFAULT_HEADERS).then_some(room)
}

/// Header fields hyper accepts in an HTTP/1 request: [`http1_max_headers`],
/// or its own default.
pub fn http1_fields(limits: &HeadLimits) -> usize {
    http1_max_headers(limits).unwrap_or(HYPER_DEFAULT_HEADERS)
}

/// The HTTP/2 header list size (`SETTINGS_MAX_HEADER_LIST_SIZE`) h2
/// accepts: twice the largest head within the limits, as HTTP/2 counts it.
/// Over it h2 answers `431` without a body and resets the stream; over four
/// times it, h2 ends the connection (`COMPRESSION_ERROR`).
pub fn http2_header_list(limits: &HeadLimits) -> u32 {
    let head = limits.max_target_bytes
        + limits.max_header_bytes
        + (limits.max_headers + HTTP2_PSEUDO_FIELDS) * HTTP2_FIELD_ROOM
        + LINE_ROOM;
    u32::try_from(2 * head).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderName, HeaderValue};

    fn headers(fields: impl IntoIterator<Item = (String, String)>) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in fields {
            let name = HeaderName::try_from(name).expect("name");
            let value = HeaderValue::try_from(value).expect("value");
            map.append(name, value);
        }
        map
    }

    #[test]
    fn a_head_within_the_limits_passes() {
        let limits = HeadLimits::default();
        let uri: Uri = format!("/v1/mcp/{}", "a".repeat(8_000))
            .parse()
            .expect("uri");
        let fields = (0..50).map(|n| (format!("x-{n}"), "v".repeat(1200)));
        assert_eq!(check(&limits, &uri, &headers(fields)), Ok(()));
    }

    #[test]
    fn each_limit_is_named_when_exceeded() {
        let limits = HeadLimits::default();
        let long: Uri = format!("/{}", "a".repeat(8_192)).parse().expect("uri");
        let refusal = check(&limits, &long, &HeaderMap::new()).expect_err("too long");
        assert_eq!(
            refusal,
            HeadTooLarge::Target {
                length: 8_193,
                limit: 8_192
            }
        );
        assert!(
            refusal
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_REQUEST_TARGET_BYTES")
        );

        let root = Uri::from_static("/");
        let many = headers((0..51).map(|n| (format!("x-{n}"), String::new())));
        let refusal = check(&limits, &root, &many).expect_err("too many");
        assert!(refusal.to_string().contains("OPENCLAW_PROXY_MAX_HEADERS"));

        // One name repeated counts once per value.
        let repeated = headers((0..51).map(|_| ("x-a".to_owned(), "v".to_owned())));
        assert!(matches!(
            check(&limits, &root, &repeated),
            Err(HeadTooLarge::Count { count: 51, .. })
        ));

        let large = headers([("x-a".to_owned(), "v".repeat(64 * 1024))]);
        let refusal = check(&limits, &root, &large).expect_err("too large");
        assert_eq!(
            refusal,
            HeadTooLarge::Bytes {
                size: 3 + 64 * 1024,
                limit: 64 * 1024
            }
        );
        assert!(
            refusal
                .to_string()
                .contains("OPENCLAW_PROXY_MAX_HEADER_BYTES")
        );
    }

    #[test]
    fn an_http2_target_counts_its_scheme_and_host() {
        let uri = Uri::from_static("http://127.0.0.1:8000/v1/mcp?x=1");
        assert_eq!(target_length(&uri), uri.to_string().len());
    }

    #[test]
    fn hyper_has_room_above_every_limit() {
        for limits in [
            HeadLimits::default(),
            HeadLimits {
                max_target_bytes: HeadLimits::TARGET_CEILING,
                max_header_bytes: 1024 * 1024,
                max_headers: 1000,
            },
        ] {
            assert!(http1_buffer(&limits) >= 2 * http1_head(&limits));
            let fields = http1_fields(&limits);
            assert!(fields >= 2 * limits.max_headers);
            let list = usize::try_from(http2_header_list(&limits)).expect("u32 fits");
            assert!(list > 2 * (limits.max_target_bytes + limits.max_header_bytes));
        }
        // The defaults keep hyper's own HTTP/1 buffer and its header fields
        // on the stack.
        assert_eq!(http1_max_headers(&HeadLimits::default()), None);
        assert_eq!(http1_buffer(&HeadLimits::default()), HYPER_DEFAULT_BUFFER);
    }
}

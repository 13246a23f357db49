//! The HTTP client of both modes, and answers read within a size limit.
//!
//! Why it is built here and not with `reqwest::Client::new()`: an MCP client
//! waits on every request, so a server that never answers must not hold a
//! call forever (connect and request timeouts), and a server that sends
//! without end must not grow this process's memory (the answer is read in
//! chunks and given up past [`Limits::max_response_bytes`]). A loopback
//! target is never reached through `HTTP_PROXY` / `HTTPS_PROXY`: a proxy set
//! for the internet cannot reach this machine's loopback, and would see the
//! tokens. With the `https` feature (a default one), `https://` targets use
//! rustls with the ring provider and the platform's roots (`SSL_CERT_FILE`
//! names a bundle to trust instead, such as a private CA); a build without it refuses an `https://` URL at start
//! with a sentence.

use std::net::IpAddr;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::limits::Limits;

/// Why the HTTP client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{url:?} is not a valid http:// or https:// URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error(
        "{url:?} is an https:// URL, and this build of openclaw-proxy-stdio has no TLS: build it with the default features (`cargo build --release -p openclaw-proxy-stdio`)"
    )]
    NoTls { url: String },
    #[error("cannot set up the HTTP client: {0}")]
    Build(String),
}

/// Why an answer could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error(
        "the answer is larger than {limit} bytes (the limit is --max-response-bytes / OPENCLAW_PROXY_STDIO_MAX_RESPONSE_BYTES)"
    )]
    TooLarge { limit: usize },
    #[error(
        "no complete answer within {seconds} seconds (the limit is --request-timeout-seconds / OPENCLAW_PROXY_STDIO_REQUEST_TIMEOUT_SECONDS)"
    )]
    Timeout { seconds: u64 },
    #[error("the answer could not be read: {0}")]
    Read(String),
}

/// Installs rustls's ring provider as the process default, once: reqwest
/// is built without a provider of its own (no aws-lc), and builds no client
/// without one. The binary calls it at start; [`client`] calls it too, for
/// other users of the library. Nothing without the `https` feature.
pub fn install_crypto_provider() {
    #[cfg(feature = "https")]
    {
        // An error means a provider is installed already: that one serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// Whether `url` names this machine: `localhost`, 127.0.0.0/8 or `::1`.
pub fn is_loopback(url: &reqwest::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            let name = host.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
    }
}

/// The client for requests to `base_url`, with the timeouts of `limits` and,
/// for a loopback `base_url`, no proxy.
pub fn client(base_url: &str, limits: &Limits) -> Result<reqwest::Client, ClientError> {
    let url = reqwest::Url::parse(base_url).map_err(|error| ClientError::BadUrl {
        url: base_url.to_owned(),
        reason: error.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(ClientError::BadUrl {
            url: base_url.to_owned(),
            reason: format!("the scheme is {:?}", url.scheme()),
        });
    }
    install_crypto_provider();
    #[cfg(not(feature = "https"))]
    if url.scheme() == "https" {
        return Err(ClientError::NoTls {
            url: base_url.to_owned(),
        });
    }
    let mut builder = reqwest::Client::builder()
        .connect_timeout(limits.connect_timeout)
        .timeout(limits.request_timeout);
    if is_loopback(&url) {
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|error| ClientError::Build(root_cause(&error)))
}

/// The innermost cause of an HTTP failure ("Connection refused (os error
/// 111)"), the part of reqwest's error chain a user can act on.
pub fn root_cause(error: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = error;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

/// Why a request got no answer, in a sentence; timeouts name their setting.
pub fn send_failure(error: &reqwest::Error, limits: &Limits) -> String {
    if error.is_connect() && error.is_timeout() {
        format!(
            "no connection within {} seconds (the limit is --connect-timeout-seconds / OPENCLAW_PROXY_STDIO_CONNECT_TIMEOUT_SECONDS)",
            limits.connect_timeout.as_secs()
        )
    } else if error.is_timeout() {
        BodyError::Timeout {
            seconds: limits.request_timeout.as_secs(),
        }
        .to_string()
    } else {
        root_cause(error)
    }
}

fn read_failure(error: &reqwest::Error, limits: &Limits) -> BodyError {
    if error.is_timeout() {
        BodyError::Timeout {
            seconds: limits.request_timeout.as_secs(),
        }
    } else {
        BodyError::Read(root_cause(error))
    }
}

/// The body of `response` as it arrives, ending with [`BodyError::TooLarge`]
/// once more than the limit has come (or at once when `Content-Length` says
/// so).
pub fn body_stream(
    response: reqwest::Response,
    limits: Limits,
) -> impl Stream<Item = Result<Bytes, BodyError>> + Send + Unpin + 'static {
    let limit = limits.max_response_bytes;
    let declared_too_large = response
        .content_length()
        .is_some_and(|length| length > limit as u64);
    let mut received = 0usize;
    let mut failed = false;
    let chunks = response.bytes_stream();
    let chunks = if declared_too_large {
        futures_util::stream::empty().left_stream()
    } else {
        chunks.right_stream()
    };
    let head = futures_util::stream::iter(
        declared_too_large.then_some(Err(BodyError::TooLarge { limit })),
    );
    head.chain(chunks.map(move |chunk| {
        let chunk = chunk.map_err(|error| read_failure(&error, &limits))?;
        received = received.saturating_add(chunk.len());
        if received > limit {
            return Err(BodyError::TooLarge { limit });
        }
        Ok(chunk)
    }))
    .take_while(move |item| {
        // Nothing after the first error.
        let go_on = !failed;
        failed |= item.is_err();
        futures_util::future::ready(go_on)
    })
    .boxed()
}

/// The whole body of `response`, within the limit.
pub async fn read_body(response: reqwest::Response, limits: Limits) -> Result<Vec<u8>, BodyError> {
    let mut body = Vec::new();
    let mut chunks = body_stream(response, limits);
    while let Some(chunk) = chunks.next().await {
        body.extend_from_slice(&chunk?);
    }
    Ok(body)
}

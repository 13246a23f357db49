//! One bounded `GET` of a JSON document: the issuer's metadata or its key
//! set.
//!
//! The server already builds hyper's HTTP/1.1 client and rustls (with
//! ring) for its own port, so this reuses them rather than bringing in a
//! second HTTP stack: one connection per fetch, the answer read up to a
//! size limit, the whole exchange within the time its caller allows. `https://` is verified
//! against Mozilla's roots (compiled in, so no system store is needed);
//! `http://` is accepted for loopback only (an issuer on the same host),
//! checked where the URL is configured or discovered ([`check_url`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::{ClientConfig, RootCertStore, pki_types::ServerName};

/// The largest document read: key sets and metadata are a few KiB.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Why a document could not be fetched; each names the URL.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(
        "{url} is not a usable URL: {problem} (use https://, or http:// on a loopback address)"
    )]
    BadUrl { url: String, problem: String },
    #[error("could not reach {url}: {problem}")]
    Unreachable { url: String, problem: String },
    #[error("{url} answered {status}, not 200")]
    Status { url: String, status: StatusCode },
    #[error("{url} took longer than {limit:?}")]
    Timeout { url: String, limit: Duration },
    #[error(
        "the answer of {url} is larger than {MAX_DOCUMENT_BYTES} bytes or broke off: {problem}"
    )]
    Body { url: String, problem: String },
}

/// Checks that `url` may be fetched: `https://`, or `http://` to a loopback
/// host; returns it parsed.
pub fn check_url(url: &str) -> Result<Uri, FetchError> {
    let bad = |problem: &str| FetchError::BadUrl {
        url: url.to_owned(),
        problem: problem.to_owned(),
    };
    let uri: Uri = url.parse().map_err(|_| bad("it does not parse"))?;
    let host = uri.host().ok_or_else(|| bad("it names no host"))?;
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if is_loopback(host) => Ok(uri),
        Some("http") => Err(bad("plain http is only for loopback addresses")),
        _ => Err(bad("the scheme is neither https nor http")),
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// Fetches `url` and returns its body, within `limit` from connection to
/// last byte.
pub async fn get(url: &str, limit: Duration) -> Result<Bytes, FetchError> {
    let uri = check_url(url)?;
    tokio::time::timeout(limit, fetch(url, &uri))
        .await
        .map_err(|_| FetchError::Timeout {
            url: url.to_owned(),
            limit,
        })?
}

async fn fetch(url: &str, uri: &Uri) -> Result<Bytes, FetchError> {
    let unreachable = |problem: String| FetchError::Unreachable {
        url: url.to_owned(),
        problem,
    };
    let host = uri.host().unwrap_or_default();
    let tls = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
    let bare_host = host.trim_start_matches('[').trim_end_matches(']');
    let tcp = TcpStream::connect((bare_host, port))
        .await
        .map_err(|error| unreachable(error.to_string()))?;
    let authority = uri.authority().map_or(host, |authority| authority.as_str());
    let path = uri.path_and_query().map_or("/", |path| path.as_str());
    let request = Request::get(path)
        .header(header::HOST, authority)
        .header(header::ACCEPT, "application/json")
        .header(header::USER_AGENT, "openclaw-proxy")
        .body(Empty::<Bytes>::new())
        .map_err(|error| unreachable(error.to_string()))?;
    if !tls {
        return exchange(url, tcp, request).await;
    }
    let name = ServerName::try_from(bare_host.to_owned())
        .map_err(|error| unreachable(format!("{bare_host} is not a server name: {error}")))?;
    let config = tls_config().map_err(|error| unreachable(format!("TLS setup: {error}")))?;
    let stream = TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|error| unreachable(format!("TLS: {error}")))?;
    exchange(url, stream, request).await
}

/// One request on a fresh connection, and its body within the limit.
async fn exchange<S>(
    url: &str,
    stream: S,
    request: Request<Empty<Bytes>>,
) -> Result<Bytes, FetchError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let unreachable = |problem: String| FetchError::Unreachable {
        url: url.to_owned(),
        problem,
    };
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| unreachable(error.to_string()))?;
    // The connection ends with this fetch; its error shows in the answer.
    let driver = tokio::spawn(connection);
    let response = sender
        .send_request(request)
        .await
        .map_err(|error| unreachable(error.to_string()));
    let response = match response {
        Ok(response) => response,
        Err(error) => {
            driver.abort();
            return Err(error);
        }
    };
    if response.status() != StatusCode::OK {
        driver.abort();
        return Err(FetchError::Status {
            url: url.to_owned(),
            status: response.status(),
        });
    }
    let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
        .collect()
        .await;
    driver.abort();
    body.map(|collected| collected.to_bytes())
        .map_err(|error| FetchError::Body {
            url: url.to_owned(),
            problem: error.to_string(),
        })
}

/// rustls with ring and Mozilla's roots, built once.
fn tls_config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
            ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|builder| {
                    Arc::new(builder.with_root_certificates(roots).with_no_client_auth())
                })
                .map_err(|error| error.to_string())
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_is_for_loopback_only() {
        for good in [
            "https://issuer.example/jwks",
            "http://127.0.0.1:9000/jwks",
            "http://localhost/x",
            "http://[::1]:80/x",
        ] {
            assert!(check_url(good).is_ok(), "{good}");
        }
        for bad in [
            "http://issuer.example/jwks",
            "http://10.0.0.1/jwks",
            "ftp://127.0.0.1/x",
            "jwks",
        ] {
            let error = check_url(bad).expect_err(bad).to_string();
            assert!(error.contains(bad), "{error}");
        }
    }
}

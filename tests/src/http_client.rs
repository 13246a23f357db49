//! The one way the tests build an HTTP client.
//!
//! The stdio binary reaches `https://` targets by default, with reqwest's
//! rustls and no crypto provider of reqwest's own (ring is installed by the
//! process, so no aws-lc is built). Cargo builds reqwest once for the whole
//! workspace, so every client in every test process then needs a provider
//! installed first; reqwest panics without one. These functions install
//! rustls's ring provider (once; a second install is a no-op) and hand out
//! the client.

/// Installs rustls's ring provider as this process's default, once.
pub fn install_crypto_provider() {
    // An error means a provider is installed already: that one serves.
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
}

/// A builder for an HTTP client, with the crypto provider installed.
pub fn http_client_builder() -> reqwest::ClientBuilder {
    install_crypto_provider();
    reqwest::Client::builder()
}

/// An HTTP client with reqwest's defaults.
pub fn http_client() -> reqwest::Client {
    http_client_builder()
        .build()
        .expect("an HTTP client with the defaults")
}

/// An HTTP/2 connection over `io` (cleartext with prior knowledge, or TLS
/// that negotiated `h2`), driven on a task of its own: what sends its
/// requests, for tests that need frames reqwest does not make.
pub async fn http2_over<IO, B>(io: IO) -> hyper::client::conn::http2::SendRequest<B>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    B: hyper::body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(io),
    )
    .await
    .expect("HTTP/2 handshake");
    tokio::spawn(connection);
    sender
}

/// [`http2_over`] a new cleartext connection to `addr`.
pub async fn h2c<B>(addr: std::net::SocketAddr) -> hyper::client::conn::http2::SendRequest<B>
where
    B: hyper::body::Body + Unpin + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    http2_over(stream).await
}

/// A gRPC channel to the server at `url` (`http://127.0.0.1:PORT`).
pub(crate) async fn channel_to(url: String) -> tonic::transport::Channel {
    tonic::transport::Channel::from_shared(url)
        .expect("valid uri")
        .connect()
        .await
        .expect("connect to test server")
}

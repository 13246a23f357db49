//! TLS for the tests: a certificate authority made in the test, a server
//! certificate for `localhost` it signs, and an axum app served over TLS
//! with it, so the binary's `https://` and `wss://` paths meet a real
//! handshake that trusts only what `SSL_CERT_FILE` names.

use std::path::PathBuf;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A test CA and a `localhost` certificate it signed, as PEM files in a
/// directory of their own (removed on drop).
pub struct TestCa {
    dir: PathBuf,
    /// The CA's certificate: what `SSL_CERT_FILE` names to trust it.
    pub ca: PathBuf,
    /// The server's certificate and key, for the real server's TLS.
    pub files: openclaw_proxy_edge::tls::TlsFiles,
}

impl TestCa {
    /// Makes the CA and the server's certificate under `name`.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "openclaw-proxy-stdio-{name}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let authority = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let key = KeyPair::generate().expect("server key");
        let certificate = CertificateParams::new(vec!["localhost".into()])
            .expect("server params")
            .signed_by(&key, &authority)
            .expect("server certificate");
        let files =
            openclaw_proxy_edge::tls::TlsFiles::new(dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&files.cert, certificate.pem()).expect("write certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write key");
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, authority.pem()).expect("write CA");
        Self { dir, ca, files }
    }

    /// The CA file's path, as `SSL_CERT_FILE` takes it.
    pub fn ca_file(&self) -> String {
        self.ca.display().to_string()
    }

    /// Serves `app` over TLS on a loopback port with the server's
    /// certificate; its `https://localhost:PORT` URL. Runs until the test's
    /// runtime ends.
    pub async fn serve(&self, app: axum::Router) -> String {
        let tls = openclaw_proxy_edge::tls::Tls::load(self.files.clone()).expect("server TLS");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let listener = TlsListener {
            listener,
            acceptor: tls.acceptor,
        };
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("https://localhost:{port}")
    }

    /// Terminates TLS in front of `upstream` (a plain server), as a reverse
    /// proxy does: each connection's bytes are copied both ways once its
    /// handshake is done. Its `https://localhost:PORT` URL.
    pub async fn terminate(&self, upstream: std::net::SocketAddr) -> String {
        let tls = openclaw_proxy_edge::tls::Tls::load(self.files.clone()).expect("server TLS");
        let mut listener = TlsListener {
            listener: TcpListener::bind("127.0.0.1:0").await.expect("bind"),
            acceptor: tls.acceptor,
        };
        let port = listener.listener.local_addr().expect("addr").port();
        tokio::spawn(async move {
            loop {
                let (mut inbound, _) = axum::serve::Listener::accept(&mut listener).await;
                tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        format!("https://localhost:{port}")
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// TCP connections that completed a TLS handshake; a failed handshake (a
/// client that does not trust the CA) is skipped.
struct TlsListener {
    listener: TcpListener,
    acceptor: TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.listener.accept().await else {
                continue;
            };
            if let Ok(stream) = self.acceptor.accept(stream).await {
                return (stream, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

//! Native TLS on the one port, for deployments without a TLS-terminating
//! reverse proxy: HTTPS, WSS and gRPC over TLS from one certificate.
//!
//! rustls (ring provider) offers ALPN `h2` and `http/1.1`, so gRPC and HTTP/2
//! clients get HTTP/2 and WebSocket clients HTTP/1.1 on the same port. The
//! certificate is served through a resolver whose key can be swapped: a task
//! looks at the PEM files every few seconds and, when they changed, loads
//! them and swaps the key. New handshakes get the new certificate; connections
//! already open (bridges among them) are not touched. A pair of files that
//! cannot be loaded (half written, key and certificate not matching) is
//! logged and the old certificate stays.
//!
//! The files are polled rather than watched through inotify: polling also
//! sees the symlink swap that Kubernetes and cert-manager do, and costs two
//! `stat`s per interval.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::CryptoProvider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{self, ServerConfig};

/// How often the certificate files are looked at by default.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// Where the certificate chain and its key are, and how often to look at them.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// How often the files are checked for changes.
    pub reload_interval: Duration,
}

impl TlsFiles {
    /// The two files, checked every [`DEFAULT_RELOAD_INTERVAL`].
    pub fn new(cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Self {
        Self {
            cert: cert.as_ref().to_owned(),
            key: key.as_ref().to_owned(),
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }
}

/// Why the certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path} (OPENCLAW_PROXY_TLS_CERT_FILE / _KEY_FILE): {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\"): {message}")]
    Certificate { path: PathBuf, message: String },
    #[error("{path} holds no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {message}")]
    Key { path: PathBuf, message: String },
    #[error("the key in {key} does not belong to the certificate in {cert}: {message}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        message: String,
    },
    #[error("cannot set up TLS: {0}")]
    Config(#[from] rustls::Error),
}

/// The server's TLS: the acceptor for the accept loop, and the reloading.
pub struct Tls {
    /// Accepts TLS connections with the current certificate.
    pub acceptor: TlsAcceptor,
    resolver: Arc<ReloadingResolver>,
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
}

impl Tls {
    /// Loads the files and builds the TLS configuration.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (key, stamp) = load_key(&files, &provider)?;
        let resolver = Arc::new(ReloadingResolver {
            current: RwLock::new((Arc::new(key), stamp)),
        });
        let mut config = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone());
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            resolver,
            files,
            provider,
        })
    }

    /// Checks the files every interval and swaps the certificate when they
    /// changed; runs until dropped.
    pub async fn reload_when_changed(self: Arc<Self>) {
        let mut ticks = tokio::time::interval(self.files.reload_interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let stamp = stamp(&self.files);
            if stamp == self.resolver.stamp() {
                continue;
            }
            match load_key(&self.files, &self.provider) {
                Ok((key, stamp)) => {
                    self.resolver.swap(key, stamp);
                    tracing::info!(cert = %self.files.cert.display(), "TLS certificate reloaded");
                }
                Err(error) => {
                    // Remember the stamp: a broken pair is reported once, and
                    // retried when the files change again.
                    self.resolver.restamp(stamp);
                    tracing::warn!(%error, "TLS certificate not reloaded; the previous one stays");
                }
            }
        }
    }
}

/// When each file was last modified, and its size: what "changed" means.
type Stamp = [Option<(SystemTime, u64)>; 2];

fn stamp(files: &TlsFiles) -> Stamp {
    let of = |path: &Path| {
        std::fs::metadata(path)
            .ok()
            .and_then(|meta| Some((meta.modified().ok()?, meta.len())))
    };
    [of(&files.cert), of(&files.key)]
}

fn load_key(
    files: &TlsFiles,
    provider: &CryptoProvider,
) -> Result<(CertifiedKey, Stamp), TlsError> {
    // Stamped before reading: a change during the read is seen next time.
    let stamp = stamp(files);
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| TlsError::Read {
            path: path.to_owned(),
            source,
        })
    };
    let cert_pem = read(&files.cert)?;
    let key_pem = read(&files.key)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Certificate {
            path: files.cert.clone(),
            message: error.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Certificate {
            path: files.cert.clone(),
            message: "the file is empty".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|error| TlsError::Key {
        path: files.key.clone(),
        message: error.to_string(),
    })?;
    let key = CertifiedKey::from_der(chain, key, provider).map_err(|error| TlsError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        message: error.to_string(),
    })?;
    Ok((key, stamp))
}

/// Serves the current certificate to every handshake.
#[derive(Debug)]
struct ReloadingResolver {
    current: RwLock<(Arc<CertifiedKey>, Stamp)>,
}

impl ReloadingResolver {
    fn stamp(&self) -> Stamp {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .1
    }

    fn swap(&self, key: CertifiedKey, stamp: Stamp) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = (Arc::new(key), stamp);
    }

    fn restamp(&self, stamp: Stamp) {
        self.current
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .1 = stamp;
    }
}

impl ResolvesServerCert for ReloadingResolver {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .0
                .clone(),
        )
    }
}

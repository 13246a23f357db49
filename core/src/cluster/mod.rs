//! Cluster mode: many nodes behind one load balancer, on NATS.
//!
//! Every node can serve every request. What is known about a session lives
//! in a JetStream KV bucket that every node watches and caches
//! ([`NatsDirectory`]); a call for a session whose bridge is on another node
//! travels as a NATS request to the node that holds the bridge
//! ([`NatsDelivery`]), and a session's changes reach its watchers on every
//! node (`changes.rs`). How it works and how it fails (routing by interest,
//! one bridge in the cluster, the idle TTL, dead nodes, NATS out of reach):
//! `docs/cluster.md`; why NATS, and the invariants kept:
//! `ARCHITECTURE.md#cluster-mode-on-nats`.

mod changes;
mod delivery;
mod directory;
mod outbox;
mod stored;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::connection::State;
use async_nats::{ConnectOptions, ServerAddr};

pub use delivery::NatsDelivery;
pub use directory::NatsDirectory;

use crate::config::CoreConfig;
use crate::hub::{Backend, Hub};

/// How a node authenticates to NATS.
#[derive(Clone, Debug, Default)]
pub enum NatsAuth {
    /// No credentials.
    #[default]
    None,
    /// A user name and password.
    UserPassword {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
    /// A token.
    Token(String),
    /// A `.creds` file (JWT and NKey seed).
    CredsFile(PathBuf),
}

/// The cluster settings of a node.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    /// NATS server URLs (`nats://host:port`, `tls://host:port`).
    pub servers: Vec<String>,
    /// Prefix of every subject and bucket, so deployments can share a NATS.
    pub prefix: String,
    /// Credentials.
    pub auth: NatsAuth,
    /// A CA certificate (PEM) to verify the NATS servers with; TLS required.
    pub tls_ca_file: Option<PathBuf>,
    /// Replicas of the KV bucket (3 on a 3-node NATS cluster).
    pub kv_replicas: usize,
}

/// Why cluster mode could not start. Each names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error(
        "OPENCLAW_PROXY_NATS_URL has no server: give one or more nats://host:port, comma-separated"
    )]
    NoServer,
    #[error("OPENCLAW_PROXY_NATS_URL entry {url:?} is not a NATS URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error(
        "OPENCLAW_PROXY_NATS_PREFIX {0:?} is not usable: use 1 to 64 of A-Z a-z 0-9 _ - (it names subjects and a bucket)"
    )]
    BadPrefix(String),
    #[error("OPENCLAW_PROXY_NATS_CREDS_FILE {path:?} cannot be read: {reason}")]
    Credentials { path: PathBuf, reason: String },
    #[error("OPENCLAW_PROXY_NATS_TLS_CA_FILE {path:?} cannot be read: {reason}")]
    TlsCa { path: PathBuf, reason: String },
    #[error("cannot set up the NATS client: {0}")]
    Client(String),
}

/// This node's membership in the cluster.
pub struct Cluster {
    node: Arc<Node>,
}

/// What the directory and the delivery of one node share.
pub(crate) struct Node {
    pub(crate) client: async_nats::Client,
    pub(crate) id: String,
    pub(crate) prefix: String,
    pub(crate) ttl: Duration,
    pub(crate) kv_replicas: usize,
}

impl Node {
    pub(crate) fn connected(&self) -> bool {
        self.client.connection_state() == State::Connected
    }
}

impl Cluster {
    /// Checks the settings and starts connecting. An unreachable NATS is not
    /// an error: the client keeps trying, and the node is not ready until it
    /// succeeds. Malformed settings are.
    pub async fn connect(
        settings: ClusterSettings,
        core: &CoreConfig,
    ) -> Result<Self, ClusterError> {
        let servers = parse_servers(&settings.servers)?;
        let prefix = settings.prefix.trim().to_owned();
        let prefix_ok = (1..=64).contains(&prefix.len())
            && prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !prefix_ok {
            return Err(ClusterError::BadPrefix(prefix));
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let mut options = match &settings.auth {
            NatsAuth::CredsFile(path) => ConnectOptions::with_credentials_file(path)
                .await
                .map_err(|error| ClusterError::Credentials {
                    path: path.clone(),
                    reason: error.to_string(),
                })?,
            NatsAuth::UserPassword { user, password } => {
                ConnectOptions::new().user_and_password(user.clone(), password.clone())
            }
            NatsAuth::Token(token) => ConnectOptions::new().token(token.clone()),
            NatsAuth::None => ConnectOptions::new(),
        };
        if let Some(path) = &settings.tls_ca_file {
            std::fs::metadata(path).map_err(|error| ClusterError::TlsCa {
                path: path.clone(),
                reason: error.to_string(),
            })?;
            options = options
                .add_root_certificates(path.clone())
                .require_tls(true);
        }
        let options = options
            .name(format!("openclaw-proxy {id}"))
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(3))
            .ping_interval(Duration::from_secs(5))
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((100 * attempts as u64).min(2_000))
            })
            .event_callback(|event| async move {
                match event {
                    async_nats::Event::Connected => tracing::info!("connected to NATS"),
                    async_nats::Event::Disconnected => {
                        tracing::warn!("lost the connection to NATS; reconnecting");
                    }
                    other => tracing::debug!(event = %other, "NATS client event"),
                }
            });
        let client = options
            .connect(servers)
            .await
            .map_err(|error| ClusterError::Client(error.to_string()))?;
        Ok(Self {
            node: Arc::new(Node {
                client,
                id,
                prefix,
                ttl: core.session_ttl,
                kv_replicas: settings.kv_replicas.max(1),
            }),
        })
    }

    /// This node's id, as it appears in KV and in NATS connection names.
    pub fn node_id(&self) -> &str {
        &self.node.id
    }

    /// A hub on this cluster, with its background tasks running.
    pub fn hub(&self, config: CoreConfig) -> Hub {
        let directory = Arc::new(NatsDirectory::new(self.node.clone()));
        let delivery = Arc::new(NatsDelivery::new(self.node.clone(), directory.clone()));
        let hub = Hub::with_backend(
            config,
            Backend {
                directory: Arc::new(directory::Shared(directory.clone())),
                remote: delivery.clone(),
            },
        );
        directory.start(hub.downgrade());
        delivery.start(hub.downgrade());
        hub
    }
}

fn parse_servers(servers: &[String]) -> Result<Vec<ServerAddr>, ClusterError> {
    let mut parsed = Vec::new();
    for url in servers
        .iter()
        .map(|url| url.trim())
        .filter(|url| !url.is_empty())
    {
        let address = url
            .parse::<ServerAddr>()
            .map_err(|error| ClusterError::BadUrl {
                url: url.to_owned(),
                reason: error.to_string(),
            })?;
        parsed.push(address);
    }
    if parsed.is_empty() {
        return Err(ClusterError::NoServer);
    }
    Ok(parsed)
}

//! The proxy as the app sees it: one gRPC channel (plain or TLS), the token
//! that every RPC carries, and the three calls the app makes: create a
//! session, attach its bridge, delete it.
//!
//! The session's credentials live in [`Session`], read from the proxy's answer
//! in one place ([`Session::from_response`]): the per-session token opens the
//! session's bridge and deletes it (so the app keeps working when the proxy
//! requires session tokens), the MCP token goes to the app with the URL.

use std::fmt;
use std::time::Duration;

use openclaw_proxy_proto::escape::Outside;
use openclaw_proxy_proto::v1::{
    AppMessage, CreateSessionRequest, CreateSessionResponse, DeleteSessionRequest, Hello,
    ProxyMessage, app_message, bridge_service_client::BridgeServiceClient, proxy_message,
    session_service_client::SessionServiceClient,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Request, Status, Streaming};

use crate::error::AppError;

/// How long one RPC (or the `hello`/`attached` exchange) may take before the
/// attempt counts as failed and the retry policy takes over. Enforced around
/// the whole call, so it also covers waiting for a connection that a
/// draining or frozen proxy keeps open without serving.
const RPC_TIMEOUT: Duration = Duration::from_secs(10);
/// The metadata that names a bridge's session to load balancers (the
/// header an MCP client names its session with, so one hash rule serves
/// both).
const SESSION_ID_METADATA: &str = "mcp-session-id";
/// Messages queued towards the proxy on one bridge (results, progress, pongs).
const OUTBOUND_QUEUE: usize = 64;

/// Where the app reaches its session, as reported to the `on_session`
/// callback. Changes whenever the session is re-created.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionInfo {
    /// The session id: the `MCP-Session-Id` an MCP client sends.
    pub session_id: String,
    /// The session's MCP endpoint, `{proxy}/v1/mcp/{session_id}`: give it to
    /// OpenClaw's MCP client.
    pub mcp_url: String,
    /// The session's own MCP bearer token (`ocpm_…`): give it to the MCP
    /// client with the URL. `None` from a proxy that predates per-session
    /// tokens, where its global OpenClaw token applies.
    pub mcp_token: Option<String>,
}

// Tokens never reach logs.
impl fmt::Debug for SessionInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionInfo")
            .field("session_id", &self.session_id)
            .field("mcp_url", &self.mcp_url)
            .field("mcp_token", &self.mcp_token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A session the app holds: what it reports, and what authorises it.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) info: SessionInfo,
    /// The per-session token (`ocps_…`) that opens this session's bridge and
    /// deletes it; the app token when the proxy mints none.
    session_token: Option<MetadataValue<Ascii>>,
}

impl Session {
    fn from_response(response: CreateSessionResponse, mcp_base: &str) -> Self {
        // A proxy from before per-session tokens leaves them empty; the
        // global tokens then apply.
        let present = |token: String| (!token.is_empty()).then_some(token);
        let session_token = present(response.session_token).and_then(|token| {
            let value = bearer(&token);
            if value.is_none() {
                tracing::warn!(
                    "the proxy's session token cannot be sent as a header; using the app token"
                );
            }
            value
        });
        let session_id = response.session_id;
        Self {
            info: SessionInfo {
                mcp_url: format!("{mcp_base}/v1/mcp/{session_id}"),
                session_id,
                mcp_token: present(response.mcp_token),
            },
            session_token,
        }
    }

    pub(crate) fn id(&self) -> &str {
        &self.info.session_id
    }

    /// The id's first characters, for logs: enough to tell sessions apart,
    /// not enough to address one (`session = session.short_id().field()`).
    pub(crate) fn short_id(&self) -> Outside<'_> {
        Outside::session(self.id())
    }
}

/// The connection settings the builder collected.
pub(crate) struct ProxySettings {
    pub(crate) url: String,
    pub(crate) app_token: Option<String>,
    pub(crate) mcp_base_url: Option<String>,
    pub(crate) ca_certificate_pem: Option<Vec<u8>>,
}

/// One channel to the proxy; cheap to clone.
#[derive(Clone)]
pub(crate) struct Proxy {
    channel: Channel,
    app_token: Option<MetadataValue<Ascii>>,
    mcp_base: String,
}

impl Proxy {
    /// Prepares the channel; nothing is dialled until the first RPC, and a
    /// broken connection is re-dialled by the next one.
    pub(crate) fn new(settings: ProxySettings) -> Result<Self, AppError> {
        let url = settings.url.trim_end_matches('/').to_owned();
        let invalid = |reason: String| AppError::InvalidUrl {
            url: settings.url.clone(),
            reason,
        };
        let mut endpoint = Endpoint::from_shared(url.clone())
            .map_err(|error| invalid(error.to_string()))?
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            // A half-open connection (a phone that changed networks) is found
            // by HTTP/2 pings even while the proxy has nothing to send.
            .http2_keep_alive_interval(Duration::from_secs(20))
            .keep_alive_timeout(Duration::from_secs(10))
            .keep_alive_while_idle(true);
        if url.starts_with("https://") {
            let mut tls = ClientTlsConfig::new().with_webpki_roots();
            if let Some(pem) = settings.ca_certificate_pem {
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            endpoint = endpoint
                .tls_config(tls)
                .map_err(|error| invalid(format!("TLS setup failed: {error}")))?;
        } else if !url.starts_with("http://") {
            return Err(invalid("the scheme must be http or https".to_owned()));
        }
        let app_token = match settings.app_token.filter(|token| !token.is_empty()) {
            None => None,
            Some(token) => Some(bearer(&token).ok_or(AppError::InvalidToken)?),
        };
        let mcp_base = settings
            .mcp_base_url
            .map(|base| base.trim_end_matches('/').to_owned())
            .unwrap_or_else(|| url.clone());
        Ok(Self {
            channel: endpoint.connect_lazy(),
            app_token,
            mcp_base,
        })
    }

    fn request<T>(&self, message: T, token: Option<&MetadataValue<Ascii>>) -> Request<T> {
        let mut request = Request::new(message);
        if let Some(token) = token.or(self.app_token.as_ref()) {
            request
                .metadata_mut()
                .insert("authorization", token.clone());
        }
        request
    }

    pub(crate) async fn create_session(
        &self,
        request: CreateSessionRequest,
    ) -> Result<Session, Status> {
        let request = self.request(request, None);
        let mut client = SessionServiceClient::new(self.channel.clone());
        let response = bounded(client.create_session(request)).await?;
        Ok(Session::from_response(
            response.into_inner(),
            &self.mcp_base,
        ))
    }

    pub(crate) async fn delete_session(&self, session: &Session) -> Result<bool, Status> {
        let message = DeleteSessionRequest {
            session_id: session.id().to_owned(),
        };
        let request = self.request(message, session.session_token.as_ref());
        let mut client = SessionServiceClient::new(self.channel.clone());
        let response = bounded(client.delete_session(request)).await?;
        Ok(response.into_inner().existed)
    }

    /// Opens the session's bridge: sends `hello`, waits for `attached`.
    pub(crate) async fn attach(&self, session: &Session) -> Result<Bridge, Status> {
        let (outbound, queue) = mpsc::channel(OUTBOUND_QUEUE);
        let hello = AppMessage {
            kind: Some(app_message::Kind::Hello(Hello {
                session_id: session.id().to_owned(),
            })),
        };
        outbound
            .send(hello)
            .await
            .map_err(|_| Status::internal("the bridge's send queue closed before hello"))?;
        let mut request = self.request(ReceiverStream::new(queue), session.session_token.as_ref());
        // The session's `hello` is in the stream's body, which a load
        // balancer cannot read; this metadata it can hash on, sending the
        // bridge to the node its session's MCP calls go to. An id the proxy
        // handed out is always valid metadata; one that is not is left out.
        if let Ok(id) = MetadataValue::try_from(session.id()) {
            request.metadata_mut().insert(SESSION_ID_METADATA, id);
        }
        let opening = async {
            let mut inbound = BridgeServiceClient::new(self.channel.clone())
                .attach(request)
                .await?
                .into_inner();
            match inbound.message().await? {
                Some(ProxyMessage {
                    kind: Some(proxy_message::Kind::Attached(attached)),
                }) if attached.session_id == session.id() => Ok(inbound),
                Some(other) => Err(Status::internal(format!(
                    "the proxy answered hello with {other:?} instead of attached"
                ))),
                None => Err(Status::unavailable(
                    "the proxy closed the bridge before attaching it",
                )),
            }
        };
        let inbound = bounded(opening).await?;
        Ok(Bridge { inbound, outbound })
    }
}

/// Fails an RPC that the proxy does not answer within [`RPC_TIMEOUT`].
async fn bounded<T>(rpc: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
    tokio::time::timeout(RPC_TIMEOUT, rpc)
        .await
        .unwrap_or_else(|_| {
            Err(Status::deadline_exceeded(format!(
                "the proxy did not answer within {RPC_TIMEOUT:?}"
            )))
        })
}

/// An attached bridge: the proxy's messages, and the queue towards it.
pub(crate) struct Bridge {
    pub(crate) inbound: Streaming<ProxyMessage>,
    pub(crate) outbound: mpsc::Sender<AppMessage>,
}

fn bearer(token: &str) -> Option<MetadataValue<Ascii>> {
    format!("Bearer {token}").parse().ok()
}

//! What the hub's tests share: a configuration, sessions, and the app's end
//! of a bridge attached in-process. The tests themselves sit beside the code
//! they test and run with tokio's clock paused: time moves only when a test
//! advances it, so expiry and timeouts are exact and instant.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Map;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::Hub;
use crate::audit::Origin;
use crate::bridge::{BridgeStream, Inbound};
use crate::config::CoreConfig;
use crate::outcome::{BridgeEnd, InvokeError, ToolOutcome};
use crate::proto::{self, app_message, proxy_message};

/// The idle time after which a session of [`config`] expires.
pub(super) const TTL: Duration = Duration::from_secs(60);

/// Short intervals, and no ping or write timeout to get in the way.
pub(super) fn config() -> CoreConfig {
    CoreConfig {
        session_ttl: TTL,
        sweep_interval: Duration::from_secs(1),
        tool_timeout: Duration::from_secs(10),
        ping_interval: Duration::from_secs(3600),
        bridge_write_timeout: Duration::from_secs(3600),
        ..CoreConfig::default()
    }
}

pub(super) fn hub() -> Hub {
    Hub::new(config())
}

/// A session with one tool, `echo`.
pub(super) async fn session(hub: &Hub) -> String {
    let request = proto::CreateSessionRequest {
        metadata: None,
        tools: vec![proto::ToolDefinition {
            name: "echo".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    hub.create_session(request, Origin::default(), None)
        .await
        .expect("create")
        .session_id
}

/// The app's end of a bridge attached in-process.
pub(super) struct App {
    to_hub: mpsc::Sender<Inbound>,
    from_hub: BridgeStream,
}

impl App {
    pub(super) async fn attach(hub: &Hub, session_id: &str) -> Self {
        let (to_hub, inbound) = mpsc::channel(16);
        let hello = proto::Hello {
            session_id: session_id.to_owned(),
        };
        let from_hub = hub
            .attach(hello, ReceiverStream::new(inbound), Origin::default())
            .await
            .expect("attach");
        Self { to_hub, from_hub }
    }

    /// The next message that is not `attached` or a ping; `Err` with the
    /// end reason when the bridge ended instead.
    pub(super) async fn next(&mut self) -> Result<proxy_message::Kind, BridgeEnd> {
        loop {
            match self.from_hub.next().await {
                Some(Ok(message)) => match message.kind {
                    Some(proxy_message::Kind::Attached(_) | proxy_message::Kind::Ping(_))
                    | None => {}
                    Some(kind) => return Ok(kind),
                },
                Some(Err(end)) => return Err(end),
                None => return Err(BridgeEnd::Disconnected),
            }
        }
    }

    pub(super) async fn next_invoke(&mut self) -> proto::InvokeTool {
        match self.next().await {
            Ok(proxy_message::Kind::Invoke(invoke)) => invoke,
            other => panic!("expected an invocation, got {other:?}"),
        }
    }

    pub(super) async fn answer(&self, request_id: &str, content: serde_json::Value) {
        let result = proto::ToolResult {
            request_id: request_id.to_owned(),
            ok: true,
            content_json: content.to_string(),
            error: String::new(),
        };
        let message = proto::AppMessage {
            kind: Some(app_message::Kind::Result(result)),
        };
        self.to_hub
            .send(Inbound::Message(message))
            .await
            .expect("bridge reads");
    }
}

impl App {
    /// Sends a request of the app to the client of the call `request_id`.
    pub(super) async fn ask(&self, request_id: &str, id: &str, method: &str) {
        let request = proto::ClientRequest {
            request_id: request_id.to_owned(),
            id: id.to_owned(),
            method: method.to_owned(),
            params_json: r#"{"message":"Sure?"}"#.to_owned(),
        };
        let message = proto::AppMessage {
            kind: Some(app_message::Kind::ClientRequest(request)),
        };
        self.to_hub
            .send(Inbound::Message(message))
            .await
            .expect("bridge reads");
    }

    /// The next `ClientResponse`.
    pub(super) async fn next_client_response(&mut self) -> proto::ClientResponse {
        match self.next().await {
            Ok(proxy_message::Kind::ClientResponse(response)) => response,
            other => panic!("expected a client response, got {other:?}"),
        }
    }
}

/// A call of `echo` running in a task of its own.
pub(super) fn spawn_call(
    hub: &Hub,
    session_id: &str,
) -> tokio::task::JoinHandle<Result<ToolOutcome, InvokeError>> {
    let (hub, session_id) = (hub.clone(), session_id.to_owned());
    tokio::spawn(async move { hub.invoke(&session_id, "echo", &Map::new()).await })
}

/// Lets the bridge's task run until it has detached the bridge.
pub(super) async fn detached(hub: &Hub, session_id: &str) {
    for _ in 0..100 {
        if hub.inner.local(session_id).is_none() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the ended bridge was never detached");
}

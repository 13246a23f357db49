//! A legacy app: the documented registration body and the JSON-over-WebSocket
//! bridge with tokio-tungstenite, speaking the original proxy's protocol.

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::server::TestServer;
use crate::session::legacy_session_body;

/// What the gated `delete_files` of [`gated_session`] asks the user.
pub const GATED_QUESTION: &str = "Delete the files for real?";

/// A session with `echo_text` and `delete_files`, whose calls need the
/// user's confirmation (asking [`GATED_QUESTION`]), and its app, attached.
pub async fn gated_session(server: &TestServer) -> (crate::TestSession, WsApp) {
    let mut body = legacy_session_body();
    if let Some(tools) = body["tools"].as_array_mut() {
        tools.push(
            json!({"name": "delete_files", "description": "Deletes files.",
                          "confirm": {"message": GATED_QUESTION}}),
        );
    }
    let session = crate::TestSession::register(server, &body).await;
    let app = WsApp::attached(server, &session).await;
    (session, app)
}

/// What a legacy app sees next on its socket.
#[derive(Debug)]
pub enum WsEvent {
    /// A JSON text frame.
    Json(Value),
    /// A WebSocket ping frame.
    PingFrame,
    /// A close frame with its code and reason.
    Closed(u16, String),
    /// The connection ended without a close frame.
    Ended,
}

/// The app's end of a WebSocket bridge.
pub struct WsApp {
    socket: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl WsApp {
    /// The app of `session` on `server`, with the app token, once the
    /// server counts its bridge attached.
    pub async fn attached(server: &TestServer, session: &crate::TestSession) -> Self {
        let app = Self::connect(&session.bridge_url, Some(crate::APP_TOKEN))
            .await
            .expect("bridge");
        server
            .wait_for_session(&session.id, "the bridge attaching", |s| s.bridge_connected)
            .await;
        app
    }

    /// Connects to `bridge_url` with an optional bearer token.
    pub async fn connect(
        bridge_url: &str,
        token: Option<&str>,
    ) -> Result<Self, tungstenite::Error> {
        let mut request = bridge_url.into_client_request()?;
        if let Some(token) = token {
            let value = format!("Bearer {token}").parse().expect("header value");
            request.headers_mut().insert("authorization", value);
        }
        let (socket, _) = tokio_tungstenite::connect_async(request).await?;
        Ok(Self { socket })
    }

    /// The bridge URL of a session on `server`.
    pub fn url(server: &TestServer, session_id: &str) -> String {
        format!("ws://{}/v1/chat/sessions/{session_id}/bridge", server.addr)
    }

    /// The next event, raw.
    pub async fn next_event(&mut self) -> WsEvent {
        loop {
            match self.socket.next().await {
                None | Some(Err(_)) => return WsEvent::Ended,
                Some(Ok(Message::Text(text))) => {
                    return WsEvent::Json(serde_json::from_str(text.as_str()).expect("JSON frame"));
                }
                Some(Ok(Message::Ping(_))) => return WsEvent::PingFrame,
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame
                        .map(|frame| (u16::from(frame.code), frame.reason.to_string()))
                        .unwrap_or((u16::from(CloseCode::Status), String::new()));
                    return WsEvent::Closed(code, reason);
                }
                Some(Ok(_)) => {}
            }
        }
    }

    /// The next JSON frame that is not a ping (pings are answered with pong);
    /// `Err` with the close code and reason if the bridge closed instead.
    pub async fn next_json(&mut self) -> Result<Value, (u16, String)> {
        loop {
            match self.next_event().await {
                WsEvent::Json(frame) if frame["type"] == "ping" => {
                    self.send_json(json!({"type": "pong"})).await;
                }
                WsEvent::Json(frame) => return Ok(frame),
                WsEvent::PingFrame => {}
                WsEvent::Closed(code, reason) => return Err((code, reason)),
                WsEvent::Ended => return Err((0, "ended without close frame".into())),
            }
        }
    }

    /// The next text frame exactly as sent (pings answered on the way);
    /// `None` when the bridge closed.
    pub async fn next_text(&mut self) -> Option<String> {
        loop {
            match self.socket.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return None,
                Some(Ok(Message::Text(text))) if text.as_str().contains(r#""type":"ping""#) => {
                    self.send_json(json!({"type": "pong"})).await;
                }
                Some(Ok(Message::Text(text))) => return Some(text.as_str().to_owned()),
                Some(Ok(_)) => {}
            }
        }
    }

    /// The close code the bridge ends with; panics on any other frame.
    pub async fn closed(&mut self) -> (u16, String) {
        match self.next_json().await {
            Err(closed) => closed,
            Ok(frame) => panic!("expected the bridge to close, got {frame}"),
        }
    }

    /// Sends a JSON text frame.
    pub async fn send_json(&mut self, frame: Value) {
        let _ = self
            .socket
            .send(Message::Text(frame.to_string().into()))
            .await;
    }

    /// Sends a raw frame.
    pub async fn send(&mut self, message: Message) {
        let _ = self.socket.send(message).await;
    }
}

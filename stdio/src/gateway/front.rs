//! The stdio side of gateway mode: our checked stdin lines in front of rmcp's
//! server, instead of rmcp's own stdio transport.
//!
//! Why: rmcp drops an over-long or unparsable line without a word (the client
//! waits for an answer that never comes), answers JSON it cannot use with a
//! bare "Invalid request" and no id, and keeps one cancellation token per
//! request id, so a second request with the id of one in flight would take
//! over the first one's. Here every line goes through [`crate::line`]: a bad
//! line gets a JSON-RPC error naming the problem, a request whose id is
//! already in flight is refused (the first one goes on), and only checked
//! messages reach rmcp. An id is in flight from its request until rmcp
//! answers it or the client cancels it (rmcp sends no answer then).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use openclaw_proxy_proto::escape::{Outside, TEXT_LIMIT};
use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::line::{self, INVALID_REQUEST, Kind, Message};
use crate::wire::{LineReader, Output, WriteFailed};

/// Checked messages waiting for rmcp.
const INCOMING_QUEUE: usize = 64;

type InFlight = Arc<Mutex<HashSet<String>>>;

/// rmcp's transport: checked messages in, answers out to [`Output`].
pub struct Front {
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleServer>>,
    output: Output,
    in_flight: InFlight,
}

/// The task reading stdin for a [`Front`]; it ends at the end of input.
pub struct Reader(JoinHandle<()>);

impl Reader {
    /// Stops reading (the process is leaving).
    pub fn stop(&self) {
        self.0.abort();
    }
}

impl Front {
    /// Starts reading `input` (lines of at most `max_line_bytes`); bad lines
    /// are answered on `output` directly.
    pub fn start<R>(input: R, max_line_bytes: usize, output: Output) -> (Self, Reader)
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let (to_rmcp, incoming) = mpsc::channel(INCOMING_QUEUE);
        let in_flight = InFlight::default();
        let reader = tokio::spawn(read(
            LineReader::new(input, max_line_bytes),
            output.clone(),
            in_flight.clone(),
            to_rmcp,
        ));
        (
            Self {
                incoming,
                output,
                in_flight,
            },
            Reader(reader),
        )
    }
}

#[derive(Deserialize)]
struct Cancelled {
    #[serde(rename = "requestId")]
    request_id: Box<RawValue>,
}

async fn read<R: AsyncRead + Unpin>(
    mut lines: LineReader<R>,
    output: Output,
    in_flight: InFlight,
    to_rmcp: mpsc::Sender<RxJsonRpcMessage<RoleServer>>,
) {
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(%error, "cannot read stdin; stopping");
                return;
            }
        };
        let passed = match line.and_then(line::parse) {
            Ok(Some(message)) => admit(&message, &in_flight),
            Ok(None) => continue,
            Err(error) => Err(Some(line::error_reply(&error))),
        };
        let delivered = match passed {
            Ok(parsed) => to_rmcp.send(parsed).await.is_ok(),
            Err(Some(refusal)) => output.send(refusal).await,
            Err(None) => true,
        };
        if !delivered {
            return;
        }
    }
}

/// A checked message as rmcp reads it, counted in flight when it is a
/// request; else the error line that refuses it, or `None` when it gets no
/// answer (a notification or response rmcp cannot read).
fn admit(
    message: &Message<'_>,
    in_flight: &InFlight,
) -> Result<RxJsonRpcMessage<RoleServer>, Option<String>> {
    let id = message.id_text().map(str::to_owned);
    let in_flight_ids = || in_flight.lock().unwrap_or_else(PoisonError::into_inner);
    if message.kind == Kind::Request
        && let Some(id) = &id
        && in_flight_ids().contains(id)
    {
        return Err(Some(line::already_in_flight(message.id, id)));
    }
    if message.method.as_deref() == Some("notifications/cancelled")
        && let Some(params) = message.params
        && let Ok(cancelled) = serde_json::from_str::<Cancelled>(params.get())
    {
        in_flight_ids().remove(cancelled.request_id.get());
    }
    let parsed = match serde_json::from_str::<RxJsonRpcMessage<RoleServer>>(message.text) {
        Ok(parsed) => parsed,
        Err(error) if message.kind == Kind::Request => {
            return Err(Some(line::error_line(
                message.id,
                INVALID_REQUEST,
                &format!("not a valid MCP request: {error}"),
            )));
        }
        Err(error) => {
            // Notifications and responses get no answer.
            let problem = error.to_string();
            tracing::debug!(
                error = Outside::within(&problem, TEXT_LIMIT).field(),
                "ignoring a message rmcp cannot read"
            );
            return Err(None);
        }
    };
    if message.kind == Kind::Request
        && let Some(id) = id
    {
        in_flight_ids().insert(id);
    }
    Ok(parsed)
}

/// The id of an answer (`result` or `error`), as JSON text.
fn answered_id(message: &TxJsonRpcMessage<RoleServer>) -> Option<String> {
    use rmcp::model::JsonRpcMessage;
    let id = match message {
        JsonRpcMessage::Response(response) => &response.id,
        JsonRpcMessage::Error(error) => error.id.as_ref()?,
        _ => return None,
    };
    serde_json::to_string(id).ok()
}

impl Transport<RoleServer> for Front {
    type Error = WriteFailed;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Settled before it is written, so the client may reuse the id as
        // soon as it reads the answer.
        if let Some(id) = answered_id(&item) {
            self.in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
        }
        let text = serde_json::to_string(&item);
        let output = self.output.clone();
        async move {
            let text = text
                .map_err(|error| WriteFailed::new(format!("cannot encode a message: {error}")))?;
            if output.send(text).await {
                Ok(())
            } else {
                Err(WriteFailed::new("the writer has stopped".to_owned()))
            }
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        Ok(())
    }
}

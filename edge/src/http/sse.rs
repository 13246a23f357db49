//! Server-sent events, the one place the edge writes and reads them: the
//! keep-alive period, the framing of events, the headers of an event stream,
//! and the reading of one (through `sse_stream`).
//!
//! The MCP endpoint's direct path, rmcp's streamable transport and the legacy
//! HTTP+SSE transport all speak SSE; keeping the format here keeps them from
//! drifting apart (a proxy that buffers, a client that needs `data:` on one
//! line).

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt};

/// How long an open event stream stays silent before a keep-alive comment,
/// short enough for proxies that drop idle connections after 30 s or more.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The keep-alive: an SSE comment, which clients ignore.
pub const KEEP_ALIVE_COMMENT: Bytes = Bytes::from_static(b": ping\n\n");

/// Appends one unnamed event carrying a JSON message, framed as rmcp's
/// encoder frames it. JSON line breaks can only be whitespace (strings
/// escape theirs): they become spaces, so the event stays one line.
pub fn push_json_event(body: &mut Vec<u8>, message: &[u8]) {
    body.reserve(message.len() + 8);
    body.extend_from_slice(b"data: ");
    let start = body.len();
    body.extend_from_slice(message);
    for byte in &mut body[start..] {
        if matches!(*byte, b'\n' | b'\r') {
            *byte = b' ';
        }
    }
    body.extend_from_slice(b"\n\n");
}

/// One unnamed event carrying a JSON message ([`push_json_event`]).
pub fn json_event(message: &[u8]) -> Bytes {
    let mut body = Vec::new();
    push_json_event(&mut body, message);
    Bytes::from(body)
}

/// One named event; a multi-line `data` becomes several `data:` lines, which
/// the client joins back with newlines.
pub fn named_event(event: &str, data: &str) -> Bytes {
    let mut text = String::with_capacity(data.len() + event.len() + 16);
    text.push_str("event: ");
    text.push_str(event);
    text.push('\n');
    for line in data.split('\n') {
        text.push_str("data: ");
        text.push_str(line.strip_suffix('\r').unwrap_or(line));
        text.push('\n');
    }
    text.push('\n');
    Bytes::from(text)
}

/// A `200` event stream over `body`: the content type, no caching, and no
/// buffering by a reverse proxy (nginx honours `X-Accel-Buffering`).
pub fn response(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        body,
    )
        .into_response()
}

/// Whether `response` is an event stream.
pub fn is_event_stream(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"))
}

/// The `data` of each event of an event stream, as it arrives; events
/// without data (priming events, comments) yield nothing. A body that
/// breaks off ends the stream with its error.
pub fn data_of(body: Body) -> impl Stream<Item = Result<String, sse_stream::Error>> + Send {
    sse_stream::SseStream::new(body).filter_map(|event| {
        std::future::ready(match event {
            Ok(event) => event.data.filter(|data| !data.trim().is_empty()).map(Ok),
            Err(error) => Some(Err(error)),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_events_stay_on_one_line() {
        assert_eq!(json_event(b"{\n\"a\":\r\n1}"), "data: { \"a\":  1}\n\n");
    }

    #[test]
    fn named_events_carry_multi_line_data_as_several_lines() {
        assert_eq!(
            named_event("message", "{\n\"a\": 1}"),
            "event: message\ndata: {\ndata: \"a\": 1}\n\n"
        );
    }

    #[tokio::test]
    async fn data_is_read_in_any_chunking() {
        let text: &[u8] = b"id: 0\ndata:\n\n: keep\n\ndata: {\"a\":1}\r\n\r\nevent: message\ndata: [1,\ndata: 2]\n\n";
        for split in 0..text.len() {
            let chunks = [
                Ok::<_, std::io::Error>(Bytes::copy_from_slice(&text[..split])),
                Ok(Bytes::copy_from_slice(&text[split..])),
            ];
            let body = Body::from_stream(futures_util::stream::iter(chunks));
            let messages: Vec<String> = data_of(body)
                .map(|data| data.unwrap_or_else(|error| format!("error: {error}")))
                .collect()
                .await;
            assert_eq!(messages, ["{\"a\":1}", "[1,\n2]"], "split at {split}");
        }
    }
}

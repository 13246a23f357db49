//! hyper's own refusals of an HTTP/1.1 request head, sent with a JSON body
//! that names the problem.
//!
//! Why: hyper answers a head it cannot parse (`400`), a request target over
//! 65534 bytes (`414`) and a head larger than its read buffer or with more
//! fields than it keeps (`431`) by itself, before any service sees a
//! request, with an empty body, and it has no hook to change that. Every
//! other refusal of the server says why in JSON. The server gives hyper
//! room above its own limits ([`crate::http::head`]), so a head merely over
//! them gets the server's own answer; what is left for hyper is rewritten
//! here, on its way out.
//!
//! hyper writes those answers in one fixed form, as the last bytes of a
//! connection: the status line, then `connection: close`,
//! `content-length: 0` and `date`, and nothing else. [`JsonRefusals`] writes
//! the same status, the same date and a JSON body in its place. Recognising
//! that form is safe: no route answers `400`, `414` or `431` without a body
//! and a content type, and nothing else on an HTTP/1.1 connection writes
//! CRLF lines of its own (bodies are JSON or server-sent events with LF
//! line ends). After a `101` (a WebSocket upgrade) nothing is rewritten:
//! a client's ping is echoed in a pong, and could spell the form.
//! HTTP/2 connections are not wrapped: h2's refusals are HPACK-encoded
//! frames, and its empty `431` for a head beyond its room stays.
//!
//! The cost on every write is a comparison of its last eight bytes, and on
//! a write of response heads a search of them for a `101`.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, LazyLock};
use std::task::{Context, Poll, ready};

use memchr::memmem;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::config::HeadLimits;
use crate::http::{error, head};

/// The status lines hyper refuses a head with, and how each reads in JSON.
const FORMS: [(&[u8], Refused); 3] = [
    (b"HTTP/1.1 400 Bad Request", Refused::Unparseable),
    (b"HTTP/1.1 414 URI Too Long", Refused::TargetTooLong),
    (
        b"HTTP/1.1 431 Request Header Fields Too Large",
        Refused::HeadTooLarge,
    ),
];

/// What hyper writes between the status line and the date's value.
const FIELDS: &[u8] = b"\r\nconnection: close\r\ncontent-length: 0\r\ndate: ";

/// An HTTP date (`Fri, 04 Dec 2026 16:08:46 GMT`) is always this long.
const DATE_LENGTH: usize = 29;

/// How hyper's answer ends: the date's zone and the end of the head.
const END: &[u8] = b" GMT\r\n\r\n";

/// The start of a `101 Switching Protocols` head.
const UPGRADED: &[u8] = b"HTTP/1.1 101 ";

/// A `101` head behind another one in the same write (a bodiless answer to
/// a pipelined request not sent yet).
const UPGRADED_BEHIND: &[u8] = b"\r\n\r\nHTTP/1.1 101 ";

/// The searcher for [`UPGRADED_BEHIND`], built once: every response head is
/// searched, and `memmem::find` would build one per search.
static UPGRADED_BEHIND_FINDER: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(UPGRADED_BEHIND));

/// How every head hyper writes starts.
const HEAD: &[u8] = b"HTTP/1.1 ";

/// Which head hyper refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refused {
    Unparseable,
    TargetTooLong,
    HeadTooLarge,
}

/// What the JSON answers name: the limits, and the room hyper was given.
#[derive(Debug)]
pub struct HeadRoom {
    limits: HeadLimits,
    buffer: usize,
    fields: usize,
}

impl HeadRoom {
    /// The room hyper has for a head under `limits` (see [`head`]).
    pub fn new(limits: HeadLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            buffer: head::http1_buffer(&limits),
            fields: head::http1_fields(&limits),
        })
    }

    fn answer(&self, refused: Refused) -> (&'static str, String) {
        match refused {
            Refused::Unparseable => (
                "malformed_request",
                "the request is not HTTP/1.1 the server can read (a malformed request line, \
                 header field or version); the connection is closed"
                    .to_owned(),
            ),
            Refused::TargetTooLong => (
                "request_target_too_long",
                format!(
                    "the request target is over {} bytes, the longest HTTP/1.1 target the server \
                     reads at all (OPENCLAW_PROXY_MAX_REQUEST_TARGET_BYTES is {}); the connection \
                     is closed",
                    HeadLimits::TARGET_CEILING,
                    self.limits.max_target_bytes
                ),
            ),
            Refused::HeadTooLarge => (
                "headers_too_large",
                format!(
                    "the request head is over {} bytes or {} header fields, more than the server \
                     reads of one (OPENCLAW_PROXY_MAX_HEADER_BYTES is {}, \
                     OPENCLAW_PROXY_MAX_HEADERS is {}); the connection is closed",
                    self.buffer, self.fields, self.limits.max_header_bytes, self.limits.max_headers
                ),
            ),
        }
    }

    /// The whole answer that replaces `form`, hyper's answer for `refused`.
    fn replacement(&self, refused: Refused, status_line: &[u8], form: &[u8]) -> Vec<u8> {
        let date_at = status_line.len() + FIELDS.len();
        let date = &form[date_at..date_at + DATE_LENGTH];
        let (code, message) = self.answer(refused);
        let body = error::body(code, &message).to_string();
        let mut answer = Vec::with_capacity(form.len() + body.len() + 64);
        answer.extend_from_slice(status_line);
        answer.extend_from_slice(b"\r\nconnection: close\r\ncontent-type: application/json\r\n");
        answer.extend_from_slice(format!("content-length: {}\r\ndate: ", body.len()).as_bytes());
        answer.extend_from_slice(date);
        answer.extend_from_slice(b"\r\n\r\n");
        answer.extend_from_slice(body.as_bytes());
        answer
    }
}

/// Where hyper's refusal starts in `written`, when `written` ends with one.
fn refusal_in(written: &[u8]) -> Option<(usize, Refused, &'static [u8])> {
    if !written.ends_with(END) {
        return None;
    }
    FORMS.iter().find_map(|&(status_line, refused)| {
        let length = status_line.len() + FIELDS.len() + DATE_LENGTH + "\r\n\r\n".len();
        let at = written.len().checked_sub(length)?;
        let form = &written[at..];
        (form.starts_with(status_line) && form[status_line.len()..].starts_with(FIELDS))
            .then_some((at, refused, status_line))
    })
}

/// The JSON answer still to be written, and how much of it is.
struct Pending {
    answer: Vec<u8>,
    written: usize,
}

/// An HTTP/1.1 connection's stream, whose writes are watched for hyper's
/// refusals (see the module docs); reads pass through.
pub struct JsonRefusals<S> {
    inner: S,
    /// `None` once upgraded, or on an HTTP/2 connection: nothing to watch.
    room: Option<Arc<HeadRoom>>,
    pending: Option<Box<Pending>>,
}

impl<S> JsonRefusals<S> {
    /// `inner`, watched when `room` is given (HTTP/1.1).
    pub fn new(inner: S, room: Option<Arc<HeadRoom>>) -> Self {
        Self {
            inner,
            room,
            pending: None,
        }
    }
}

impl<S: AsyncWrite + Unpin> JsonRefusals<S> {
    /// Writes what is left of a JSON answer.
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(pending) = &mut self.pending {
            let rest = &pending.answer[pending.written..];
            let written = ready!(Pin::new(&mut self.inner).poll_write(cx, rest))?;
            if written == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            pending.written += written;
            if pending.written == pending.answer.len() {
                self.pending = None;
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Takes hyper's refusal `form` (the whole of a write) as written, and
    /// starts writing the JSON answer in its place; writes it as it is once
    /// nothing is watched.
    fn replace(
        &mut self,
        cx: &mut Context<'_>,
        refused: Refused,
        status_line: &[u8],
        form: &[u8],
    ) -> Poll<io::Result<usize>> {
        let Some(room) = &self.room else {
            return Pin::new(&mut self.inner).poll_write(cx, form);
        };
        let answer = room.replacement(refused, status_line, form);
        self.pending = Some(Box::new(Pending { answer, written: 0 }));
        // What is not written now is written on the flush hyper does next.
        if let Poll::Ready(Err(error)) = self.drain(cx) {
            return Poll::Ready(Err(error));
        }
        Poll::Ready(Ok(form.len()))
    }

    /// Stops watching once the connection has been upgraded: `first` (the
    /// write, or its first slice, where hyper keeps its heads) is a `101`
    /// head, or holds one after another head.
    fn note_upgrade(&mut self, first: &[u8]) {
        let upgraded = first.starts_with(HEAD)
            && (first.starts_with(UPGRADED) || UPGRADED_BEHIND_FINDER.find(first).is_some());
        if upgraded {
            self.room = None;
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonRefusals<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonRefusals<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.drain(cx))?;
        if this.room.is_none() {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        this.note_upgrade(data);
        match refusal_in(data) {
            // What came before it first, as it is.
            Some((at, ..)) if at > 0 => Pin::new(&mut this.inner).poll_write(cx, &data[..at]),
            Some((_, refused, status_line)) => this.replace(cx, refused, status_line, data),
            None => Pin::new(&mut this.inner).poll_write(cx, data),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        ready!(this.drain(cx))?;
        if this.room.is_none() {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        if let Some(first) = bufs.iter().find(|slice| !slice.is_empty()) {
            this.note_upgrade(first);
        }
        // hyper writes a head in one slice: a refusal ends the last one.
        let Some(last) = bufs.iter().rposition(|slice| !slice.is_empty()) else {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        };
        let Some((at, refused, status_line)) = refusal_in(&bufs[last]) else {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        };
        // What came before it first, as it is.
        if bufs[..last].iter().any(|slice| !slice.is_empty()) {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, &bufs[..last]);
        }
        if at > 0 {
            return Pin::new(&mut this.inner).poll_write(cx, &bufs[last][..at]);
        }
        this.replace(cx, refused, status_line, &bufs[last])
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const DATE: &str = "Fri, 04 Dec 2026 16:08:46 GMT";

    fn hyper_answer(status_line: &str) -> Vec<u8> {
        format!("{status_line}\r\nconnection: close\r\ncontent-length: 0\r\ndate: {DATE}\r\n\r\n")
            .into_bytes()
    }

    /// What the peer reads after `writes`, each a vectored or plain write.
    async fn written(writes: Vec<Vec<Vec<u8>>>, watched: bool) -> String {
        let (client, mut server) = tokio::io::duplex(64);
        let room = watched.then(|| HeadRoom::new(HeadLimits::default()));
        let mut stream = JsonRefusals::new(client, room);
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            server.read_to_end(&mut all).await.map(|_| all)
        });
        for slices in writes {
            if let [one] = slices.as_slice() {
                stream.write_all(one).await.expect("write");
                continue;
            }
            let mut at: Vec<_> = slices.iter().map(|slice| slice.as_slice()).collect();
            while at.iter().any(|slice| !slice.is_empty()) {
                let io: Vec<_> = at.iter().map(|slice| io::IoSlice::new(slice)).collect();
                let mut count = stream.write_vectored(&io).await.expect("write");
                assert!(count > 0);
                for slice in &mut at {
                    let taken = count.min(slice.len());
                    *slice = &slice[taken..];
                    count -= taken;
                }
            }
        }
        stream.shutdown().await.expect("shutdown");
        let all = reader.await.expect("join").expect("read");
        String::from_utf8(all).expect("text")
    }

    fn body_of(answer: &str) -> serde_json::Value {
        let (head, body) = answer.split_once("\r\n\r\n").expect("a head");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length: "))
            .and_then(|length| length.parse().ok())
            .expect("a length");
        assert_eq!(length, body.len(), "{answer}");
        serde_json::from_str(body).expect("JSON")
    }

    #[tokio::test]
    async fn each_of_hypers_refusals_gets_a_json_body_with_its_status_and_date() {
        for (status_line, code, word) in [
            (
                "HTTP/1.1 400 Bad Request",
                "malformed_request",
                "not HTTP/1.1",
            ),
            (
                "HTTP/1.1 414 URI Too Long",
                "request_target_too_long",
                "65534",
            ),
            (
                "HTTP/1.1 431 Request Header Fields Too Large",
                "headers_too_large",
                "OPENCLAW_PROXY_MAX_HEADERS",
            ),
        ] {
            for vectored in [false, true] {
                let write = if vectored {
                    vec![Vec::new(), hyper_answer(status_line)]
                } else {
                    vec![hyper_answer(status_line)]
                };
                let answer = written(vec![write], true).await;
                assert!(answer.starts_with(status_line), "{answer}");
                assert!(answer.contains("content-type: application/json\r\n"));
                assert!(answer.contains(&format!("date: {DATE}\r\n")));
                let reply = body_of(&answer);
                assert_eq!(reply["error"]["code"], code, "{reply}");
                let message = reply["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains(word), "{message}");
            }
        }
    }

    #[tokio::test]
    async fn what_precedes_a_refusal_is_written_first_and_as_it_is() {
        let earlier = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec();
        let refusal = hyper_answer("HTTP/1.1 400 Bad Request");
        // In one slice, and as a slice of its own after another.
        let mut joined = earlier.clone();
        joined.extend_from_slice(&refusal);
        for write in [vec![joined], vec![earlier.clone(), refusal.clone()]] {
            let answer = written(vec![write], true).await;
            let rest = answer
                .strip_prefix("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                .expect("the first answer whole");
            assert!(rest.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{rest}");
            assert_eq!(body_of(rest)["error"]["code"], "malformed_request");
        }
    }

    #[tokio::test]
    async fn other_answers_and_unwatched_streams_pass_through() {
        let refusal = hyper_answer("HTTP/1.1 431 Request Header Fields Too Large");
        let text = String::from_utf8(refusal.clone()).expect("text");
        // Not watched (HTTP/2), or after an upgrade: untouched.
        assert_eq!(written(vec![vec![refusal.clone()]], false).await, text);
        let upgrade = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n".to_vec();
        let after = written(vec![vec![upgrade.clone()], vec![refusal.clone()]], true).await;
        assert_eq!(
            after.as_bytes(),
            [upgrade.clone(), refusal.clone()].concat()
        );
        // Also behind a bodiless answer to a pipelined request, in one write.
        let pipelined = [
            format!("HTTP/1.1 204 No Content\r\ndate: {DATE}\r\n\r\n").into_bytes(),
            upgrade,
        ]
        .concat();
        let after = written(vec![vec![pipelined.clone()], vec![refusal.clone()]], true).await;
        assert_eq!(after.as_bytes(), [pipelined, refusal.clone()].concat());
        // A 400 with a body, or another status without one: untouched.
        let answers = [
            format!(
                "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\ndate: {DATE}\r\n\r\n{{}}"
            ),
            format!("HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\ndate: {DATE}\r\n\r\n"),
            format!(
                "HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\ndate: {DATE}\r\n\r\n"
            ),
        ];
        for answer in answers {
            assert_eq!(
                written(vec![vec![answer.clone().into_bytes()]], true).await,
                answer
            );
        }
    }
}

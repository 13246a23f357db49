//! gRPC's length-prefixed messages, read straight from an HTTP/2 request body
//! and written as the frames of a response body, for the one RPC served
//! below tonic ([`super::bridge`]).
//!
//! A message on the wire is a compressed flag (one byte), its length (four
//! bytes, big-endian) and its protobuf encoding. [`MessageReader`] keeps only
//! the bytes of a message that has not fully arrived, and lets go of its
//! buffer once a message is complete, so an idle stream holds no buffer at
//! all; [`encode`] writes each message into one allocation of exactly its
//! size.
//!
//! Refusals name the sender's mistake as `INVALID_ARGUMENT`, except a
//! compressed flag without `grpc-encoding`, which the gRPC compression spec
//! requires to be `INTERNAL`. A message over the size limit is told apart
//! ([`FrameError::TooLarge`]) because the bridge ends with that cause.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::Body;
use prost::Message;
use tonic::Status;
use tonic::codegen::http::HeaderMap;

/// The compressed flag and the length before each message.
pub const PREFIX_BYTES: usize = 5;

/// What is wrong with the messages a peer sent.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error(
        "a gRPC message of {found} bytes is over the limit of {limit} bytes (OPENCLAW_PROXY_MAX_BODY_BYTES)"
    )]
    TooLarge { found: usize, limit: usize },
    #[error(
        "protocol error: received message with compressed-flag but no grpc-encoding was specified"
    )]
    CompressedWithoutEncoding,
    #[error("the first byte of a gRPC message (its compressed flag) must be 0 or 1, not {0}")]
    InvalidFlag(u8),
    #[error(
        "the request ended inside a gRPC message: its length prefix promised more bytes than were sent"
    )]
    Truncated,
    #[error("the message is not a valid {what} in protobuf encoding: {error}")]
    Undecodable {
        what: &'static str,
        error: prost::DecodeError,
    },
    /// The request body itself broke (the peer reset the stream, the
    /// connection went away): the status tonic derives from the HTTP/2 error.
    #[error("{}", .0.message())]
    Body(Box<Status>),
}

impl FrameError {
    /// The status a stream is closed with for this mistake.
    pub fn status(&self) -> Status {
        match self {
            Self::TooLarge { .. } => Status::resource_exhausted(self.to_string()),
            Self::CompressedWithoutEncoding => Status::internal(self.to_string()),
            Self::InvalidFlag(_) | Self::Truncated | Self::Undecodable { .. } => {
                Status::invalid_argument(self.to_string())
            }
            Self::Body(status) => (**status).clone(),
        }
    }
}

/// Reads `M` messages from a request body, at most `limit` bytes each.
pub struct MessageReader<B> {
    body: B,
    /// Bytes received and not yet taken as a message; empty (and holding no
    /// allocation) between messages.
    pending: BytesMut,
    limit: usize,
    body_ended: bool,
}

impl<B> MessageReader<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    pub fn new(body: B, limit: usize) -> Self {
        Self {
            body,
            pending: BytesMut::new(),
            limit,
            body_ended: false,
        }
    }

    /// The next message; `None` once the body ended between messages.
    pub fn poll_message<M: Message + Default>(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<M, FrameError>>> {
        loop {
            match self.take_message() {
                Ok(Some(bytes)) => {
                    return Poll::Ready(Some(M::decode(bytes).map_err(|error| {
                        FrameError::Undecodable {
                            what: short_type_name::<M>(),
                            error,
                        }
                    })));
                }
                Ok(None) => {}
                Err(error) => return Poll::Ready(Some(Err(error))),
            }
            if self.body_ended {
                if self.pending.is_empty() {
                    return Poll::Ready(None);
                }
                self.pending = BytesMut::new();
                return Poll::Ready(Some(Err(FrameError::Truncated)));
            }
            match ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // Trailers from a client carry nothing the bridge reads.
                    if let Ok(data) = frame.into_data() {
                        self.pending.extend_from_slice(&data);
                    }
                }
                Some(Err(error)) => {
                    self.body_ended = true;
                    self.pending = BytesMut::new();
                    let status = Status::from_error(error.into());
                    return Poll::Ready(Some(Err(FrameError::Body(Box::new(status)))));
                }
                None => self.body_ended = true,
            }
        }
    }

    /// The next whole message's bytes, if they have all arrived.
    fn take_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        let Some(prefix) = self.pending.get(..PREFIX_BYTES) else {
            return Ok(None);
        };
        match prefix[0] {
            0 => {}
            1 => return Err(FrameError::CompressedWithoutEncoding),
            flag => return Err(FrameError::InvalidFlag(flag)),
        }
        let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]);
        let length = usize::try_from(length).unwrap_or(usize::MAX);
        if length > self.limit {
            return Err(FrameError::TooLarge {
                found: length,
                limit: self.limit,
            });
        }
        let whole = PREFIX_BYTES + length;
        if self.pending.len() < whole {
            // Room for the rest at once, rather than growing chunk by chunk.
            self.pending.reserve(whole - self.pending.len());
            return Ok(None);
        }
        let mut message = self.pending.split_to(whole);
        message.advance(PREFIX_BYTES);
        if self.pending.is_empty() {
            // Between messages an idle stream keeps no buffer.
            self.pending = BytesMut::new();
        }
        Ok(Some(message.freeze()))
    }
}

/// `AppMessage` for `openclaw_proxy_proto::proto::AppMessage`.
fn short_type_name<M>() -> &'static str {
    let name = std::any::type_name::<M>();
    name.rsplit("::").next().unwrap_or(name)
}

/// `message` as one gRPC message (uncompressed), or the status that ends
/// the stream if it is over `limit`.
pub fn encode<M: Message>(message: &M, limit: usize) -> Result<Bytes, Status> {
    let length = message.encoded_len();
    let prefix = u32::try_from(length)
        .ok()
        .filter(|_| length <= limit)
        .ok_or_else(|| {
            Status::resource_exhausted(format!(
                "a message of {length} bytes for the app is over the limit of {limit} bytes (OPENCLAW_PROXY_MAX_BODY_BYTES)"
            ))
        })?;
    let mut buf = BytesMut::with_capacity(PREFIX_BYTES + length);
    buf.put_u8(0);
    buf.put_u32(prefix);
    message.encode_raw(&mut buf);
    Ok(buf.freeze())
}

/// The trailers that end a stream with `status`.
pub fn trailers(status: &Status) -> HeaderMap {
    let mut trailers = HeaderMap::with_capacity(2);
    if status.add_header(&mut trailers).is_err() {
        // Only metadata that cannot be a header fails; ours carries none.
        trailers.clear();
        let plain = Status::new(status.code(), status.message().to_owned());
        let _ = plain.add_header(&mut trailers);
    }
    trailers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto;
    use futures_util::future::poll_fn;
    use http_body_util::StreamBody;

    type Chunks = StreamBody<
        futures_util::stream::Iter<
            std::vec::IntoIter<Result<http_body::Frame<Bytes>, std::convert::Infallible>>,
        >,
    >;

    fn body(chunks: Vec<&[u8]>) -> Chunks {
        let frames: Vec<_> = chunks
            .into_iter()
            .map(|chunk| Ok(http_body::Frame::data(Bytes::copy_from_slice(chunk))))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    fn hello(session_id: &str) -> proto::AppMessage {
        proto::AppMessage {
            kind: Some(proto::app_message::Kind::Hello(proto::Hello {
                session_id: session_id.to_owned(),
            })),
        }
    }

    async fn read_all(chunks: Vec<&[u8]>, limit: usize) -> Vec<Result<proto::AppMessage, String>> {
        let mut reader = MessageReader::new(body(chunks), limit);
        let mut read = Vec::new();
        while let Some(message) = poll_fn(|cx| reader.poll_message::<proto::AppMessage>(cx)).await {
            let failed = message.is_err();
            read.push(message.map_err(|error| error.to_string()));
            if failed {
                break;
            }
        }
        read
    }

    #[tokio::test]
    async fn messages_split_anyhow_across_chunks_are_read_whole_and_in_order() {
        let first = encode(&hello("one"), 1024).expect("encoded");
        let second = encode(&hello("two"), 1024).expect("encoded");
        let wire = [first.as_ref(), second.as_ref()].concat();
        for cut in 0..=wire.len() {
            let (a, b) = wire.split_at(cut);
            let read = read_all(vec![a, b], 1024).await;
            assert_eq!(
                read,
                vec![Ok(hello("one")), Ok(hello("two"))],
                "cut at {cut}"
            );
        }
    }

    #[tokio::test]
    async fn each_framing_mistake_is_named() {
        let whole = encode(&hello("one"), 1024).expect("encoded");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                whole[..whole.len() - 1].to_vec(),
                "length prefix promised more",
            ),
            (vec![0, 0, 0], "length prefix promised more"),
            (vec![2, 0, 0, 0, 0], "must be 0 or 1, not 2"),
            (vec![1, 0, 0, 0, 0], "compressed-flag"),
            (vec![0, 0, 0, 8, 1], "over the limit of 1024 bytes"),
            (vec![0, 0, 0, 0, 2, 0xff, 0xff], "not a valid AppMessage"),
        ];
        for (wire, words) in cases {
            let read = read_all(vec![&wire], 1024).await;
            let error = read.last().and_then(|last| last.clone().err());
            assert!(
                error.as_deref().is_some_and(|error| error.contains(words)),
                "{wire:?}: {read:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_reader_between_messages_holds_no_buffer() {
        let first = encode(&hello(&"x".repeat(4000)), 1 << 20).expect("encoded");
        let mut reader = MessageReader::new(body(vec![&first]), 1 << 20);
        let read = poll_fn(|cx| reader.poll_message::<proto::AppMessage>(cx)).await;
        assert!(matches!(read, Some(Ok(_))));
        assert_eq!(reader.pending.capacity(), 0);
    }

    #[test]
    fn a_message_over_the_limit_is_not_encoded_and_the_limit_is_named() {
        let status = encode(&hello(&"x".repeat(100)), 50).expect_err("too large");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted);
        assert!(status.message().contains("limit of 50 bytes"), "{status:?}");
    }

    #[test]
    fn an_encoded_message_is_its_prefix_and_exact_protobuf() {
        let message = hello("abc");
        let frame = encode(&message, 1024).expect("encoded");
        let body = message.encode_to_vec();
        let length = u32::try_from(body.len()).expect("small");
        assert_eq!(frame[0], 0);
        assert_eq!(frame[1..5], length.to_be_bytes());
        assert_eq!(frame[5..], body[..]);
    }
}

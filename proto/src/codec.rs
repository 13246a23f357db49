//! The protobuf codec of the generated services, with no buffers reserved
//! ahead.
//!
//! tonic's default codec reserves 8 KiB for decoding and 8 KiB for encoding
//! on every stream. A bridge is a long-lived, mostly idle stream and a proxy
//! holds thousands of them, so those reservations would dominate its memory.
//! Here neither buffer is reserved: the decoder's grows to the largest chunk
//! the peer has sent, and the encoder reserves each message's exact encoded
//! length before writing it, so what an idle stream keeps is the tail of the
//! last message it sent (one allocation per message written, which the
//! HTTP/2 layer frees once it is sent).
//!
//! A message that is not valid protobuf is the sender's mistake, so it is
//! reported as `INVALID_ARGUMENT` with a sentence, not as tonic's bare
//! `INTERNAL`.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

/// Initial capacity of a stream's encode and decode buffers: none.
pub const INITIAL_BUFFER_BYTES: usize = 0;
/// Encoded bytes after which a streaming encoder yields (tonic's default).
pub const YIELD_THRESHOLD_BYTES: usize = 32 * 1024;

/// `application/grpc+proto` via prost, with [`INITIAL_BUFFER_BYTES`] buffers
/// and each message's room reserved exactly.
#[derive(Debug, Clone)]
pub struct CompactCodec<T, U> {
    _types: PhantomData<(T, U)>,
}

impl<T, U> Default for CompactCodec<T, U> {
    fn default() -> Self {
        Self {
            _types: PhantomData,
        }
    }
}

fn settings() -> BufferSettings {
    BufferSettings::new(INITIAL_BUFFER_BYTES, YIELD_THRESHOLD_BYTES)
}

impl<T, U> Codec for CompactCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = SizedEncoder<T>;
    type Decoder = CheckedDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        SizedEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        CheckedDecoder(ProstDecoder::new(settings()))
    }
}

/// prost's encoding into a buffer that first reserves the message's exact
/// length: with no room reserved ahead, writing field by field would grow
/// the buffer several times per message.
#[derive(Debug)]
pub struct SizedEncoder<T>(PhantomData<T>);

impl<T: Message> Encoder for SizedEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        item.encode(buf)
            .map_err(|error| Status::internal(format!("the message could not be encoded: {error}")))
    }

    fn buffer_settings(&self) -> BufferSettings {
        settings()
    }
}

/// prost's decoder, with undecodable messages reported as `INVALID_ARGUMENT`.
#[derive(Debug)]
pub struct CheckedDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for CheckedDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|status| {
            Status::invalid_argument(format!(
                "the message is not a valid {} in protobuf encoding: {}",
                std::any::type_name::<U>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("message"),
                status.message()
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}

//! Whether the app is in the middle of a fragmented message, told from the
//! bytes of its socket.
//!
//! Why: tungstenite assembles a fragmented message (a text frame without
//! FIN, then continuation frames) inside, up to
//! `OPENCLAW_PROXY_MAX_BODY_BYTES`, and hands out the control frames that
//! come between: an app could send all of a message but its last fragment
//! and answer every ping, and the bridge held the unfinished message (9 MB
//! by default) for ever; two hundred such bridges held 1.8 GB. The gRPC
//! bridge drops the same case after three ping intervals, since h2's pings
//! are not the app's messages. tungstenite keeps the unfinished message to
//! itself and has no setting for how long it may wait, but it gives its
//! frame header parser to its users (`FrameHeader::parse`, in its module
//! of utilities for raw frames): the bridge runs it over the app's bytes
//! as they go by ([`Fragments`]). While a fragmented message is
//! unfinished, the app's pings and pongs are not signs of life
//! ([`super::app_side`]), and a bridge that does not finish its message
//! within three ping intervals is dropped with `4408`, as a silent one is.
//!
//! Only the headers are read, by tungstenite; payloads are skipped by the
//! length it reads. Bytes that break the framing are tungstenite's to
//! refuse (`1002`): from then on nothing more is followed.

use std::io::Cursor;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::{Data, OpCode};

/// Whether the app is in the middle of a fragmented message.
#[derive(Debug, Default)]
pub struct Unfinished(AtomicBool);

impl AsRef<Unfinished> for Unfinished {
    fn as_ref(&self) -> &Unfinished {
        self
    }
}

impl Unfinished {
    /// Whether a fragmented message has begun and not ended.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Where the reader is in the app's frames.
#[derive(Debug)]
enum At {
    /// Reading a frame header: the bytes so far.
    Header { bytes: [u8; 14], len: u8 },
    /// Skipping a payload: the bytes left.
    Payload(u64),
    /// Past bytes that are no frame header.
    Broken,
}

impl At {
    /// At the start of a frame header.
    fn header() -> Self {
        Self::Header {
            bytes: [0; 14],
            len: 0,
        }
    }
}

/// The app's side of a bridge socket, its frame headers read as they pass;
/// `F` holds the [`Unfinished`] it tells (the bridge's shared state, which
/// keeps it inline: every idle bridge pays for a pointer more).
pub struct Fragments<S, F> {
    inner: S,
    at: At,
    unfinished: Arc<F>,
}

impl<S, F: AsRef<Unfinished>> Fragments<S, F> {
    /// `inner`, telling `unfinished` whether a fragmented message is open.
    pub fn new(inner: S, unfinished: Arc<F>) -> Self {
        Self {
            inner,
            at: At::header(),
            unfinished,
        }
    }

    /// Follows the frames through `data`, the next bytes from the app.
    fn follow(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            match &mut self.at {
                At::Payload(left) => {
                    let skipped = usize::try_from(*left).unwrap_or(usize::MAX).min(data.len());
                    *left -= skipped as u64;
                    data = &data[skipped..];
                    if *left == 0 {
                        self.at = At::header();
                    }
                }
                At::Header { bytes, len } => {
                    bytes[usize::from(*len)] = data[0];
                    *len += 1;
                    data = &data[1..];
                    let mut read = Cursor::new(&bytes[..usize::from(*len)]);
                    match FrameHeader::parse(&mut read) {
                        // More bytes make the header.
                        Ok(None) => {}
                        Ok(Some((header, payload))) => {
                            let unfinished = &AsRef::<Unfinished>::as_ref(&*self.unfinished).0;
                            match header.opcode {
                                // A data frame: a message begins; unfinished
                                // without FIN.
                                OpCode::Data(Data::Text | Data::Binary) => {
                                    unfinished.store(!header.is_final, Ordering::Relaxed);
                                }
                                // A continuation: with FIN the message ends.
                                OpCode::Data(Data::Continue) if header.is_final => {
                                    unfinished.store(false, Ordering::Relaxed);
                                }
                                // Control frames come between fragments.
                                _ => {}
                            }
                            self.at = if payload == 0 {
                                At::header()
                            } else {
                                At::Payload(payload)
                            };
                        }
                        // tungstenite refuses the same bytes and ends the
                        // bridge.
                        Err(_) => self.at = At::Broken,
                    }
                }
                At::Broken => return,
            }
        }
    }
}

impl<S: AsyncRead + Unpin, F: AsRef<Unfinished>> AsyncRead for Fragments<S, F> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let this = &mut *self;
            this.follow(&buf.filled()[before..]);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin, F: AsRef<Unfinished>> AsyncWrite for Fragments<S, F> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tungstenite::protocol::frame::coding::Control;

    use super::*;

    const TEXT: OpCode = OpCode::Data(Data::Text);
    const BINARY: OpCode = OpCode::Data(Data::Binary);
    const CONTINUE: OpCode = OpCode::Data(Data::Continue);
    const PONG: OpCode = OpCode::Control(Control::Pong);

    /// A masked client frame, as tungstenite writes one.
    fn frame(fin: bool, opcode: OpCode, payload: &[u8]) -> Vec<u8> {
        use tungstenite::protocol::frame::Frame;
        let mut frame = match opcode {
            PONG => Frame::pong(payload.to_vec()),
            data => Frame::message(payload.to_vec(), data, fin),
        };
        frame.header_mut().mask = Some([1, 2, 3, 4]);
        let mut bytes = Vec::new();
        frame
            .format(&mut bytes)
            .expect("a frame formats into memory");
        bytes
    }

    #[test]
    fn a_fragmented_message_is_unfinished_until_its_last_fragment_whatever_comes_between() {
        let unfinished = Arc::new(Unfinished::default());
        let mut reader = Fragments::new((), unfinished.clone());
        let mut bytes = frame(true, TEXT, b"{\"type\":\"pong\"}");
        bytes.extend(frame(false, TEXT, &[b'x'; 300]));
        // Byte by byte, as a slow socket gives them.
        for byte in &bytes {
            reader.follow(std::slice::from_ref(byte));
        }
        assert!(unfinished.is_set(), "a text frame without FIN");
        reader.follow(&frame(true, PONG, b"pong"));
        reader.follow(&frame(false, CONTINUE, &[b'x'; 70_000]));
        assert!(unfinished.is_set(), "pongs and more fragments between");
        reader.follow(&frame(true, CONTINUE, b"end"));
        assert!(!unfinished.is_set(), "the last fragment ends it");
        reader.follow(&frame(true, BINARY, b"whole"));
        assert!(!unfinished.is_set(), "a whole message is no fragment");
    }
}

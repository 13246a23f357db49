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
//! itself and has no setting for how long it may wait, so the bridge reads
//! the frame headers itself as the bytes go by ([`Fragments`]): while a
//! fragmented message is unfinished, the app's pings and pongs are not
//! signs of life ([`super::app_side`]), and a bridge that does not finish
//! its message within three ping intervals is dropped with `4408`, as a
//! silent one is.
//!
//! Only the headers are read (RFC 6455, section 5.2: two bytes, an
//! extended length, a mask); payloads are skipped by their length. Bytes
//! that break the framing are tungstenite's to refuse (`1002`).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

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
            at: At::Header {
                bytes: [0; 14],
                len: 0,
            },
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
                        self.at = At::Header {
                            bytes: [0; 14],
                            len: 0,
                        };
                    }
                }
                At::Header { bytes, len } => {
                    bytes[usize::from(*len)] = data[0];
                    *len += 1;
                    data = &data[1..];
                    if let Some((fin, opcode, payload)) = header(&bytes[..usize::from(*len)]) {
                        match opcode {
                            // A data frame: a message begins; unfinished
                            // without FIN.
                            1 | 2 => AsRef::<Unfinished>::as_ref(&*self.unfinished)
                                .0
                                .store(!fin, Ordering::Relaxed),
                            // A continuation: with FIN the message ends.
                            0 if fin => AsRef::<Unfinished>::as_ref(&*self.unfinished)
                                .0
                                .store(false, Ordering::Relaxed),
                            // Control frames come between fragments.
                            _ => {}
                        }
                        self.at = if payload == 0 {
                            At::Header {
                                bytes: [0; 14],
                                len: 0,
                            }
                        } else {
                            At::Payload(payload)
                        };
                    } else if usize::from(*len) == bytes.len() {
                        // Cannot happen: 14 bytes always make a header.
                        self.at = At::Payload(0);
                    }
                }
            }
        }
    }
}

/// A whole frame header in `bytes`: FIN, the opcode and the payload length;
/// `None` while more bytes are needed.
fn header(bytes: &[u8]) -> Option<(bool, u8, u64)> {
    let (&first, &second) = (bytes.first()?, bytes.get(1)?);
    let masked = second & 0x80 != 0;
    let (length, at) = match second & 0x7f {
        126 => (
            u64::from(u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?])),
            4,
        ),
        127 => {
            let mut wide = [0_u8; 8];
            wide.copy_from_slice(bytes.get(2..10)?);
            (u64::from_be_bytes(wide), 10)
        }
        short => (u64::from(short), 2),
    };
    let end = at + if masked { 4 } else { 0 };
    if bytes.len() < end {
        return None;
    }
    Some((first & 0x80 != 0, first & 0x0f, length))
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
    use super::*;

    /// A masked client frame.
    fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![if fin { 0x80 } else { 0 } | opcode];
        match payload.len() {
            short @ 0..=125 => bytes.push(0x80 | short as u8),
            medium @ 126..=0xffff => {
                bytes.push(0x80 | 126);
                bytes.extend_from_slice(&(medium as u16).to_be_bytes());
            }
            long => {
                bytes.push(0x80 | 127);
                bytes.extend_from_slice(&(long as u64).to_be_bytes());
            }
        }
        bytes.extend_from_slice(&[1, 2, 3, 4]);
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn a_fragmented_message_is_unfinished_until_its_last_fragment_whatever_comes_between() {
        let unfinished = Arc::new(Unfinished::default());
        let mut reader = Fragments::new((), unfinished.clone());
        let mut bytes = frame(true, 1, b"{\"type\":\"pong\"}");
        bytes.extend(frame(false, 1, &[b'x'; 300]));
        // Byte by byte, as a slow socket gives them.
        for byte in &bytes {
            reader.follow(std::slice::from_ref(byte));
        }
        assert!(unfinished.is_set(), "a text frame without FIN");
        reader.follow(&frame(true, 10, b"pong"));
        reader.follow(&frame(false, 0, &[b'x'; 70_000]));
        assert!(unfinished.is_set(), "pongs and more fragments between");
        reader.follow(&frame(true, 0, b"end"));
        assert!(!unfinished.is_set(), "the last fragment ends it");
        reader.follow(&frame(true, 2, b"whole"));
        assert!(!unfinished.is_set(), "a whole message is no fragment");
    }
}

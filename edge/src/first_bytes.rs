//! The first bytes of a plain connection, read within the header-read
//! timeout, then handed back to hyper in front of the rest of the stream.
//!
//! Why: hyper's automatic protocol detection reads until it can tell
//! HTTP/1.1 from HTTP/2's 24-byte preface, and has no timer of its own
//! there; its header-read timer starts only once HTTP/1.1 is chosen. A
//! client that sent `P` (or any other prefix of the preface) and then
//! nothing held its socket for ever, needing no credential: a hundred such
//! sockets took every connection slot. So the accept path reads those bytes
//! itself, bounded by the same timeout as a request header, and hyper reads
//! them again through [`Rewind`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// What an HTTP/2 connection starts with (RFC 9113, section 3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads from `stream` until its first bytes tell the protocol: the whole
/// preface, or as soon as they stop being a prefix of it (HTTP/1.1). Empty
/// when the peer closed before sending anything.
pub async fn read_until_known<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<Vec<u8>> {
    let mut first = Vec::with_capacity(PREFACE.len());
    let mut chunk = [0_u8; PREFACE.len()];
    while first.len() < PREFACE.len() && PREFACE.starts_with(&first) {
        let wanted = PREFACE.len() - first.len();
        let read = stream.read(&mut chunk[..wanted]).await?;
        if read == 0 {
            break;
        }
        first.extend_from_slice(&chunk[..read]);
    }
    Ok(first)
}

/// A stream that yields `prefix` first, then reads `inner`; writes go to
/// `inner`.
pub struct Rewind<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Rewind<S> {
    /// `inner`, with `prefix` read from it already.
    pub fn new(prefix: Vec<u8>, inner: S) -> Self {
        Self {
            prefix,
            at: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let rest = &this.prefix[this.at..];
            let take = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..take]);
            this.at += take;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn first_bytes(sent: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(64);
        client.write_all(sent).await.expect("write");
        drop(client);
        let first = read_until_known(&mut server).await.expect("read");
        let mut whole = Vec::new();
        Rewind::new(first.clone(), server)
            .read_to_end(&mut whole)
            .await
            .expect("read again");
        (first, whole)
    }

    #[tokio::test]
    async fn the_first_bytes_tell_the_protocol_and_are_read_again() {
        // HTTP/1.1: what the first read brought, no prefix of the preface.
        let (first, whole) = first_bytes(b"GET / HTTP/1.1\r\n\r\n").await;
        assert!(first.starts_with(b"G") && !PREFACE.starts_with(&first));
        assert_eq!(whole, b"GET / HTTP/1.1\r\n\r\n");
        // HTTP/2: the whole preface, and what follows it after.
        let mut h2 = PREFACE.to_vec();
        h2.extend_from_slice(b"frames");
        let (first, whole) = first_bytes(&h2).await;
        assert_eq!(first, PREFACE);
        assert_eq!(whole, h2);
        // A prefix of the preface, then the end: what came, nothing more.
        let (first, whole) = first_bytes(b"PRI * ").await;
        assert_eq!(first, b"PRI * ");
        assert_eq!(whole, b"PRI * ");
        let (first, _) = first_bytes(b"").await;
        assert!(first.is_empty());
    }
}

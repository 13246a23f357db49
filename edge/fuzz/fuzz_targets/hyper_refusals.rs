//! Any sequence of writes (the input split at `0xFF` bytes) through the
//! wrapper that gives hyper's own refusals a JSON body: every write is
//! taken whole and never fails, and what reaches the socket is exactly what
//! was written unless a write ended the way hyper's bodiless refusal ends
//! (then the bytes before that refusal still arrive first, unchanged).
#![no_main]

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_edge::config::HeadLimits;
use openclaw_proxy_edge::hyper_refusals::{HeadRoom, JsonRefusals};
use tokio::io::AsyncWrite;

/// How every refusal hyper writes ends: the date's zone and the head's end.
const END: &[u8] = b" GMT\r\n\r\n";

fuzz_target!(|data: &[u8]| {
    let mut context = Context::from_waker(Waker::noop());
    let mut received = Vec::new();
    let mut stream = JsonRefusals::new(&mut received, Some(HeadRoom::new(HeadLimits::default())));
    let mut sent = Vec::new();
    // Where the first write that may have been rewritten starts.
    let mut rewritten_from = None;
    for write in data.split(|&byte| byte == 0xFF) {
        let mut rest = write;
        while !rest.is_empty() {
            match Pin::new(&mut stream).poll_write(&mut context, rest) {
                Poll::Ready(Ok(taken)) => {
                    assert!(taken > 0 && taken <= rest.len(), "{taken} of {}", rest.len());
                    rest = &rest[taken..];
                }
                other => panic!("a write into memory must succeed: {other:?}"),
            }
        }
        if rewritten_from.is_none() && write.ends_with(END) {
            rewritten_from = Some(sent.len());
        }
        sent.extend_from_slice(write);
    }
    assert!(Pin::new(&mut stream).poll_shutdown(&mut context).is_ready());
    drop(stream);
    match rewritten_from {
        None => assert_eq!(received, sent),
        // Whatever was replaced, what came before that write is unchanged.
        Some(start) => assert_eq!(received[..start], sent[..start]),
    }
});

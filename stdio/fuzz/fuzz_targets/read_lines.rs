//! A whole stdin stream of any bytes, read in small chunks with a small line
//! limit: `wire::LineReader` never returns a line over the limit, and every
//! line it returns goes through `line::parse` without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openclaw_proxy_stdio::{line, wire::LineReader};

const LIMIT: usize = 64;

fuzz_target!(|data: &[u8]| {
    let Some((&capacity, input)) = data.split_first() else {
        return;
    };
    let capacity = usize::from(capacity).max(1);
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    runtime.block_on(async {
        let reader = tokio::io::BufReader::with_capacity(capacity, input);
        let mut lines = LineReader::new(reader, LIMIT);
        while let Ok(Some(next)) = lines.next_line().await {
            if let Ok(bytes) = next {
                assert!(bytes.len() <= LIMIT);
                let _ = line::parse(bytes);
            }
        }
    });
});

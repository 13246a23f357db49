//! Input echoed back, bounded: a refusal that quotes what the client sent
//! (a 100 KB JSON-RPC `method`, 20 KB `Mcp-Method` / `Mcp-Name` headers, a
//! protocol version that does not match) quotes it cut short, in the answer
//! and in the log. The server is the binary with its default log filter, its
//! stderr read whole.

use openclaw_proxy_tests::*;
use serde_json::{Value, json};

/// Longest answer accepted: a sentence quoting a cut-short value, in its
/// JSON-RPC envelope.
const ANSWER_LIMIT: usize = 4096;

/// Each hostile request is sent this many times.
const REPEATS: usize = 3;

/// Log bytes accepted for the whole test: a few lines per request, far less
/// than the megabyte of hostile input sent.
const LOG_LIMIT: usize = 64 * 1024;

struct Case {
    what: &'static str,
    body: Value,
    headers: Vec<(&'static str, String)>,
    word: &'static str,
    /// Bytes of the answer that are the client's own id, which JSON-RPC
    /// has every answer echo whole.
    echoed_id: usize,
}

/// The size of the ids some cases send.
const HUGE_ID: usize = 3 * 1024 * 1024;

fn cases() -> Vec<Case> {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo_text", "arguments": {}}});
    let revision = || ("mcp-protocol-version", "2026-07-28".to_owned());
    vec![
        Case {
            what: "a 100 KB method",
            body: json!({"jsonrpc": "2.0", "id": 3, "method": "m".repeat(100_000)}),
            headers: vec![],
            word: "Method not found",
            echoed_id: 0,
        },
        Case {
            what: "a 20 KB Mcp-Method",
            body: list.clone(),
            headers: vec![revision(), ("mcp-method", "x".repeat(20_000))],
            word: "Mcp-Method",
            echoed_id: 0,
        },
        Case {
            what: "a 20 KB Mcp-Name",
            body: call,
            headers: vec![
                revision(),
                ("mcp-method", "tools/call".to_owned()),
                ("mcp-name", "y".repeat(20_000)),
            ],
            word: "Mcp-Name",
            echoed_id: 0,
        },
        Case {
            what: "a 20 KB _meta protocol version",
            body: json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {
                "_meta": {"io.modelcontextprotocol/protocolVersion": "z".repeat(20_000)}}}),
            headers: vec![revision(), ("mcp-method", "tools/list".to_owned())],
            word: "protocolVersion",
            echoed_id: 0,
        },
        Case {
            what: "a 20 KB MCP-Protocol-Version",
            body: list,
            headers: vec![("mcp-protocol-version", "9".repeat(20_000))],
            word: "MCP-Protocol-Version",
            echoed_id: 0,
        },
        Case {
            what: "a 3 MB id on an unknown method",
            body: json!({"jsonrpc": "2.0", "id": "i".repeat(HUGE_ID), "method": "no/such"}),
            headers: vec![],
            word: "Method not found",
            echoed_id: HUGE_ID,
        },
        Case {
            what: "a 3 MB initialize protocolVersion that disagrees with the header",
            body: json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
                "protocolVersion": "v".repeat(HUGE_ID), "capabilities": {},
                "clientInfo": {"name": "echoes", "version": "1"}}}),
            headers: vec![("mcp-protocol-version", "2025-11-25".to_owned())],
            word: "",
            echoed_id: 0,
        },
    ]
}

#[tokio::test]
async fn echoes_of_hostile_input_are_bounded_in_answers_and_in_the_log() {
    // The production default filter (`info`).
    let server = TestServer::builder().env("RUST_LOG", "").spawn().await;
    let session = server
        .rest()
        .token(APP_TOKEN)
        .register(&legacy_session_body())
        .await;
    let client = server.rest().token(OPENCLAW_TOKEN);
    for case in cases() {
        for _ in 0..REPEATS {
            let mut request = client.mcp(&session.mcp_url, &case.body);
            for (name, value) in &case.headers {
                request = request.header(name, value);
            }
            let reply = no_hang(request.send()).await;
            let text = reply.text();
            assert!(
                text.len() <= ANSWER_LIMIT + case.echoed_id,
                "{}: an answer of {} bytes: {:.300}",
                case.what,
                text.len(),
                text
            );
            assert!(text.contains(case.word), "{}: {text}", case.what);
        }
    }
    let log = server.stop().await;
    let bytes: usize = log.iter().map(|line| line.len() + 1).sum();
    let longest = log.iter().map(String::len).max().unwrap_or(0);
    assert!(
        bytes <= LOG_LIMIT,
        "{} hostile requests wrote {bytes} bytes of log (longest line {longest} bytes)",
        REPEATS * cases().len()
    );
}

//! End-to-end tests: the real server on `127.0.0.1:0`, driven by real clients.
//! One test binary, one module per surface.

mod app_sdk;
mod bench;
mod catalog;
mod compat;
mod conversation;
mod fidelity;
mod grpc;
mod hostile;
mod interop;
mod legacy_sse;
mod limits;
mod mcp;
/// The cluster suite's `nats-server` (installed on first use), for the
/// NATS round-trip benchmark's smoke run.
#[path = "../../../edge/tests/cluster/nats.rs"]
#[allow(dead_code)]
mod nats;
mod observability;
mod rest;
mod security;
mod tls;
mod ws;

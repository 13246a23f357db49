//! End-to-end tests: the real server on `127.0.0.1:0`, driven by real clients.
//! One test binary, one module per surface. (Cluster mode has its own:
//! `tests/cluster`.)

mod app_sdk;
mod asks;
mod audit_log;
mod bench;
mod caller;
mod catalog;
mod compat;
mod confirm;
mod conversation;
mod echoes;
mod fidelity;
mod grpc;
mod hostile;
mod interop;
mod legacy_sse;
mod limits;
mod mcp;
mod oauth;
mod observability;
mod python_app;
mod quiet_logs;
mod refusals;
mod rest;
mod sdk_asks;
mod security;
mod sign_in;
mod slow_bodies;
mod telemetry;
mod tls;
mod typescript_app;
mod unread;
mod user_view;
mod ws;

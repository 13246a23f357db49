//! Shared helpers of the end-to-end tests: the real server on `127.0.0.1:0`
//! (one builder), one client for its HTTP surface, apps on either bridge, an
//! MCP client from the official SDK, and bounded polling.
//!
//! Nothing here imitates our own components: the server is the real one
//! (`openclaw_proxy_edge::serve`, or the `openclaw-proxy` binary), and every
//! client talks to it through a real loopback socket.

pub mod app;
pub mod balancer;
pub mod balancer_round;
pub mod bench;
pub mod bounds_runs;
pub mod conformance;
pub mod exhaustion;
pub mod forgery;
pub mod grpc_app;
pub mod http_client;
pub mod listening;
pub mod many_sessions;
pub mod mcp_client;
pub mod oauth;
pub mod package_app;
pub mod processes;
pub mod prometheus;
pub mod python_package;
pub mod rest;
pub mod server;
pub mod server_process;
pub mod session;
pub mod typescript_package;
pub mod ws_app;

pub use app::{
    Answer, AppRequest, BridgeKind, Call, RequestBridge, RequestError, TestApp, echo, serve_app,
};
pub use grpc_app::*;
pub use http_client::{h2c, http_client, http_client_builder, http2_over};
pub use listening::{LegacyClient, Listener};
pub use mcp_client::*;
pub use oauth::{SigningKey, TestIssuer};
pub use rest::{Method, RawRequest, Reply, Rest, StatusCode, mcp_post};
pub use server::*;
pub use server_process::ServerProcess;
pub use session::{TestSession, legacy_session_body};
pub use ws_app::*;

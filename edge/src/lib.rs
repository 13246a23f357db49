//! The openclaw-proxy server: the HTTP edge and the gRPC control plane on one
//! port.
//!
//! The edge translates the documented HTTP contract onto the core's [`Hub`]:
//! it holds no session or bridge logic of its own.
//!
//! - [`config`]: every setting, parsed once from flags and environment.
//! - [`http`]: the axum router (health, and the REST, WebSocket and MCP routes).
//! - [`server`]: one listener for gRPC and HTTP, and graceful shutdown.
//! - [`stall`]: connections that leave their answers unread are closed.
//! - [`idle`]: connections with nothing open, and silent reflection streams, are closed.
//! - [`tls`]: optional native TLS on that listener, reloaded when the files change.
//! - [`oauth`]: OAuth access tokens on the MCP endpoints (JWT checks, the issuer's keys).
//! - [`telemetry`]: log lines (text or JSON) and OpenTelemetry trace export.
//! - [`self_probe`]: `--probe URL`, a health check from inside the binary.
//!
//! [`Hub`]: openclaw_proxy_core::Hub

pub mod config;
pub mod first_bytes;
pub mod http;
pub mod idle;
pub mod oauth;
pub mod policy;
pub mod self_probe;
pub mod server;
pub mod stall;
pub mod telemetry;
pub mod tls;

pub use config::{EdgeConfig, ServerConfig};
pub use server::{ServeError, serve, serve_metrics};

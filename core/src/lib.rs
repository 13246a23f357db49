//! The domain of openclaw-proxy: sessions, their tools, the bridges that carry
//! tool calls to apps, and the invocation of those calls.
//!
//! Everything that decides *what happens* lives here, in [`Hub`]; the
//! transports only translate. The gRPC service in [`grpc`] exposes the hub to
//! native apps, the HTTP edge crate calls the same hub in-process for REST,
//! WebSocket and MCP. The hub's operations take and return the generated
//! `openclaw.proxy.v1` messages, so every transport speaks one model.
//!
//! - [`tools`]: validation of tool definitions at registration.
//! - [`hub`]: the session registry, bridge attachment and takeover, the idle
//!   sweep, and [`Hub::invoke`], which sends a call over the bridge and waits
//!   for its answer within the tool timeout.
//! - [`bridge`]: one attached bridge, its calls in flight and its liveness.
//! - [`auth`]: the app bearer token, compared in constant time.
//! - [`escape`]: outside strings made safe to echo in messages and logs.

pub mod auth;
pub mod bridge;
pub mod config;
pub mod escape;
pub mod grpc;
pub mod hub;
pub mod tools;

pub use auth::BearerToken;
pub use bridge::{BridgeEnd, BridgeStream, ProgressSink};
pub use config::CoreConfig;
pub use hub::{Hub, HubError, Inbound, InvokeError, ToolOutcome};
pub use openclaw_proxy_proto::v1 as proto;
pub use tools::{Tool, ToolError};

//! The domain of openclaw-proxy: sessions, their tools, the bridges that carry
//! tool calls to apps, and the invocation of those calls.
//!
//! Everything that decides *what happens* lives here, in [`Hub`]; the
//! transports only translate. The gRPC service in [`grpc`] exposes the hub to
//! native apps, the HTTP edge crate calls the same hub in-process for REST,
//! WebSocket and MCP. The hub's operations take and return the generated
//! `openclaw.proxy.v1` messages, so every transport speaks one model.
//!
//! Modules depend on each other in one direction, from the bottom up:
//!
//! - [`outcome`]: how calls and bridges end (answers, errors, end reasons).
//! - [`tools`]: validation of tool definitions at registration.
//! - [`progress`]: a call's progress reports on their way to its caller,
//!   thinned (oldest first) when the caller reads slower than the app reports.
//! - [`bridge`]: one attached bridge: its outbound queue, the calls waiting
//!   on it, and the loop that reads the app's messages and pings the app.
//! - [`directory`]: where sessions are recorded (the seam for a second
//!   backend), and the in-memory directory of a single node.
//! - [`delivery`]: reaching bridges held by another process (the other seam).
//! - [`hub`]: sessions and their bridges, the idle sweep, and [`Hub::invoke`],
//!   which sends a call over the bridge and waits for its answer within the
//!   tool timeout.
//! - [`cluster`]: the second backend, on NATS: the directory in JetStream
//!   KV and calls between nodes by request-reply.
//! - [`grpc`]: the tonic service over the hub.
//! - [`auth`]: the global tokens and each session's own two tokens (only
//!   their digests kept), compared in constant time; [`Hub::authorize`]
//!   decides which one opens what.
//! - [`limits`]: ceilings on sessions, tools, calls in flight and the rate
//!   of session creation, each named by its setting when reached.
//! - [`log_budget`]: warnings an outsider can trigger, rate-limited per bridge.
//! - [`escape`]: outside strings made safe to echo in messages and logs.
//! - [`metrics`]: the Prometheus metrics of one hub; [`audit`]: the audit
//!   log; [`trace`]: spans and the W3C `traceparent` carried to apps and
//!   between nodes.

pub mod audit;
pub mod auth;
pub mod bridge;
pub mod cluster;
pub mod config;
pub mod delivery;
pub mod directory;
pub mod escape;
pub mod grpc;
pub mod hub;
pub mod limits;
pub mod log_budget;
pub mod metrics;
pub mod outcome;
pub mod progress;
pub mod tools;
pub mod trace;

pub use audit::{ClientAddr, Origin};
pub use auth::{AuthError, BearerToken, Credential, SessionCredentials, SessionTokens, Side};
pub use bridge::{BridgeStream, Inbound};
pub use config::CoreConfig;
pub use hub::{Backend, CallContext, Hub, HubError};
pub use limits::{LimitError, Limits};
pub use metrics::{Metrics, Transport};
pub use openclaw_proxy_proto::v1 as proto;
pub use outcome::{BridgeEnd, InvokeError, ToolOutcome};
pub use progress::{ProgressReceiver, ProgressSink};
pub use tools::{Tool, ToolError};

//! The domain of openclaw-proxy: sessions, their tools, the bridges that carry
//! tool calls to apps, and the invocation of those calls.
//!
//! Everything that decides *what happens* lives here, in [`Hub`], whose
//! operations take and return the generated `openclaw.proxy.v1` messages; the
//! transports only translate ([`grpc`] here, REST, WebSocket and MCP in the
//! edge crate). Modules depend in one direction and no two import each other:
//! plain values and helpers at the bottom, then [`bridge`], the two seams
//! ([`directory`], [`delivery`]), [`hub`], and above it [`cluster`] and
//! [`grpc`]. The module map and the rule in full: `ARCHITECTURE.md#modules`.

pub mod admit;
pub mod asking;
pub mod audit;
pub mod auth;
pub mod bridge;
pub mod call;
pub mod caller;
pub mod catalog;
pub mod change;
pub mod cluster;
pub mod config;
pub mod delivery;
pub mod directory;
pub mod error;
pub mod grpc;
pub mod hub;
pub mod limits;
pub mod log_budget;
pub mod metrics;
pub mod minted;
pub mod outcome;
pub mod progress;
pub mod request_state;
pub mod tasks;
pub mod tools;
pub mod trace;

pub use audit::{ClientAddr, Origin};
pub use auth::{AuthError, BearerToken, Credential, SessionCredentials, SessionTokens, Side};
pub use bridge::{BridgeStream, Inbound};
pub use call::CallContext;
pub use caller::{Caller, CallerKind, OAuthIdentity, Owner};
pub use config::CoreConfig;
pub use error::{ErrorKind, UnknownSession};
pub use hub::{AppRequest, Backend, Deletion, Hub, HubError, SessionEvent};
pub use limits::{LimitError, Limits};
pub use metrics::{Metrics, Transport};
pub use openclaw_proxy_proto::escape;
pub use openclaw_proxy_proto::v1 as proto;
pub use outcome::{BridgeEnd, InvokeError, ToolOutcome};
pub use progress::{ProgressReceiver, ProgressSink};
pub use tools::{Tool, ToolError};

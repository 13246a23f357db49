//! What travels with a tool call besides its tool and arguments.
//!
//! Both the hub, which runs a call, and the delivery seam, which carries a
//! call to a bridge held elsewhere, name [`CallContext`]; it lives below
//! both so that neither imports the other.

use crate::audit::Origin;
use crate::caller::Caller;
use crate::progress::ProgressSink;
use crate::proto;

/// What the proxy knows about a call besides its tool and arguments: it
/// reaches the app with the invocation.
#[derive(Debug, Default)]
pub struct CallContext {
    /// The MCP request's `params._meta`, as JSON text; empty when it had none.
    pub meta_json: String,
    /// Which MCP client is calling, as it names itself.
    pub client: proto::CallerInfo,
    /// Which credential opened the request, as far as the proxy verified
    /// it; never the token.
    pub caller: Caller,
    /// Where the app's progress reports go, if the caller wants them.
    pub progress: Option<ProgressSink>,
    /// The caller's W3C `traceparent` (from the MCP request or the node that
    /// forwarded the call); empty when it sent none.
    pub trace_parent: String,
    /// Where the call came from, for the audit log.
    pub origin: Origin,
    /// A confirmation the operator's policy asks of this call, besides any
    /// the tool's definition asks: the question (empty for the proxy's
    /// wording alone).
    pub confirm: Option<std::sync::Arc<str>>,
    /// The MCP task the call runs as (`crate::tasks`); empty for a plain
    /// call.
    pub task_id: String,
}

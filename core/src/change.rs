//! One change in a session, as its watchers hear it: the value the hub's
//! change feeds carry (`hub/changes.rs`) and the [`RemoteDelivery`] passes
//! between processes. A plain value below both, so that neither names the
//! other for it.
//!
//! [`RemoteDelivery`]: crate::delivery::RemoteDelivery

use std::sync::Arc;

/// One change in a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// The app said this resource changed.
    ResourceUpdated(Arc<str>),
    /// The session's tools were replaced by a different list.
    ToolsChanged,
    /// Its resources or resource templates were replaced by different ones.
    ResourcesChanged,
    /// Its prompts were replaced by different ones.
    PromptsChanged,
}

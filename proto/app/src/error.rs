//! What can stop an app from serving, each with the step that failed and what
//! to check, and what can make a change announced while serving fail.
//! Transient trouble (network loss, proxy restart) never surfaces here: the
//! serve loop retries it. These are the failures a retry cannot fix.

use tonic::{Code, Status};

/// Why the app could not start serving, or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppError {
    /// The proxy URL cannot be used.
    #[error("invalid proxy URL {url:?}: {reason} (expected http://host:port or https://host:port)")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The app token cannot travel in gRPC metadata.
    #[error(
        "the app token contains characters that cannot be sent in a header (visible ASCII only)"
    )]
    InvalidToken,
    /// The session's name cannot be used; the proxy would refuse it.
    #[error("session {0}")]
    InvalidName(#[from] openclaw_proxy_proto::session_name::NameError),
    /// A tool was declared wrongly; the proxy would refuse it.
    #[error("tool {name:?}: {reason}")]
    InvalidTool {
        /// The tool's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A resource was declared wrongly.
    #[error("resource {uri:?}: {reason}")]
    InvalidResource {
        /// The resource's URI.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A resource template was declared wrongly.
    #[error("resource template {uri_template:?}: {reason}")]
    InvalidResourceTemplate {
        /// The template.
        uri_template: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A prompt was declared wrongly.
    #[error("prompt {name:?}: {reason}")]
    InvalidPrompt {
        /// The prompt's name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Something had to go to the proxy while no bridge was attached (the
    /// app is reconnecting).
    #[error(
        "the bridge to the proxy is not attached right now (the app is reconnecting); try again once it is"
    )]
    NotAttached,
    /// The proxy refused an update of the declarations; the app keeps the
    /// ones it had.
    #[error("the proxy refused the update: {0}")]
    UpdateRefused(String),
    /// An RPC failed in a way that retrying will not fix.
    #[error("{step} failed: {}", describe(.status))]
    Rpc {
        /// What the app was doing: "creating the session", "attaching the bridge"…
        step: &'static str,
        /// The proxy's answer.
        status: Status,
    },
    /// A newer bridge for the same session replaced this one.
    #[error(
        "another bridge took over session {session_id}; two app instances must not \
         serve the same session (give each its own app or session)"
    )]
    Replaced {
        /// The session that was taken over.
        session_id: String,
    },
    /// The serve loop ended without reporting why (its task panicked).
    #[error("the app's serve loop stopped unexpectedly: {0}")]
    Stopped(String),
}

impl AppError {
    pub(crate) fn rpc(step: &'static str, status: Status) -> Self {
        Self::Rpc { step, status }
    }
}

/// The status's message, with a hint for the codes an app author can fix.
fn describe(status: &Status) -> String {
    let hint = match status.code() {
        Code::Unauthenticated => " (check the app token: the proxy's OPENCLAW_PROXY_APP_TOKEN)",
        Code::InvalidArgument => {
            " (a tool definition or message was refused; the message names the field)"
        }
        Code::PermissionDenied => " (the token does not grant this session)",
        Code::Unavailable => " (is the proxy running at this URL?)",
        _ => "",
    };
    format!("{:?}: {}{hint}", status.code(), status.message())
}

/// Whether trying again later can help: network trouble and a proxy that is
/// restarting can pass; a refused token or tool definition cannot.
pub(crate) fn is_permanent(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unauthenticated
            | Code::PermissionDenied
            | Code::InvalidArgument
            | Code::Unimplemented
            | Code::FailedPrecondition
    )
}

/// An error and its sources, joined by `": "`: what a handler's failure
/// tells the agent or the client when it converts with `?`.
pub(crate) fn with_causes(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

//! The contract of openclaw-proxy, shared by the proxy and the apps and
//! clients on either side of it.
//!
//! - [`v1`] (feature `grpc`, on by default): package `openclaw.proxy.v1`. The
//!   `.proto` file under `proto/` is the source of truth and documents every
//!   message; this crate compiles it (with protox, so no `protoc` is needed)
//!   and exposes the generated types, clients and servers, plus the encoded
//!   file descriptor set that server reflection serves.
//! - [`tools`]: what a valid tool definition is, for every surface that
//!   accepts one (gRPC, REST, the stdio binary's tool files); [`schema`]:
//!   how a tool's input schema is checked and kept (as compact text).
//! - [`session_name`]: what a session's name in its owner's one-URL view
//!   may be, the default made from its metadata, and the prefixed names.
//! - [`catalog`]: what a valid resource, resource template and prompt
//!   declaration is; [`uri_template`]: which URIs a resource template names.
//! - [`mcp`] (feature `mcp`): how a tool's result becomes MCP content.
//! - [`escape`]: how a value from outside a process is written in a log
//!   line or a message, the same way in the proxy, the apps and the stdio
//!   binary.
//! - [`LogLevel`] and [`CallerKind`]: the words both sides of the bridge
//!   use for a log record's severity and for the credential that opened a
//!   request.

pub mod caller;
pub mod catalog;
pub mod escape;
pub mod log;
pub mod requirements;
pub mod schema;
pub mod session_name;
pub mod tools;
pub mod uri_template;

#[cfg(feature = "mcp")]
pub mod mcp;

pub use caller::CallerKind;
pub use log::LogLevel;

#[cfg(feature = "grpc")]
pub mod codec;

/// Generated code for `openclaw.proxy.v1`.
#[cfg(feature = "grpc")]
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    tonic::include_proto!("openclaw.proxy.v1");
}

/// The encoded `FileDescriptorSet` of the contract, for gRPC server reflection.
#[cfg(feature = "grpc")]
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("openclaw_proxy_descriptor");

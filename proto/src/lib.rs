//! The gRPC contract of openclaw-proxy: package `openclaw.proxy.v1`.
//!
//! The `.proto` file under `proto/` is the source of truth and documents every
//! message; this crate only compiles it (with protox, so no `protoc` is needed)
//! and exposes the generated types, clients and servers, plus the encoded file
//! descriptor set that server reflection serves.

pub mod codec;

/// Generated code for `openclaw.proxy.v1`.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic, missing_docs)]
    tonic::include_proto!("openclaw.proxy.v1");
}

/// The encoded `FileDescriptorSet` of the contract, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("openclaw_proxy_descriptor");

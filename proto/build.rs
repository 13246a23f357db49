//! Compiles `proto/` with protox (pure Rust), so building needs no system `protoc`.

use std::path::PathBuf;

use prost::Message;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/openclaw/proxy/v1/proxy.proto";
    println!("cargo:rerun-if-changed={proto}");
    // Users of the shared rules alone (the stdio binary) need no gRPC code.
    if std::env::var_os("CARGO_FEATURE_GRPC").is_none() {
        return Ok(());
    }
    let descriptors = protox::compile([proto], ["proto"])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    // Server reflection serves this encoded set.
    std::fs::write(
        out_dir.join("openclaw_proxy_descriptor.bin"),
        descriptors.encode_to_vec(),
    )?;
    tonic_prost_build::configure()
        .codec_path("crate::codec::CompactCodec")
        .compile_fds(descriptors)?;
    Ok(())
}

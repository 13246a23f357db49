//! The `openclaw-proxy-stdio` binary as a child process: the relay against the
//! real server, and gateway mode against a Gateway stand-in and against the
//! real OpenClaw Gateway; hostile stdin lines and misbehaving servers; the
//! line parser's properties; and OpenClaw's own MCP client code against the
//! edge (it is installed here, with the Gateway). One test binary.

mod common;
mod gateway;
mod hostile;
mod line_props;
mod openclaw_client;
mod real_gateway;
mod relay;
#[cfg(feature = "https")]
mod tls;

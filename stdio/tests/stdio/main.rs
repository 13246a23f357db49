//! The `openclaw-proxy-stdio` binary as a child process: the relay against the
//! real server, and gateway mode against a Gateway stand-in and against the
//! real OpenClaw Gateway. One test binary.

mod common;
mod gateway;
mod real_gateway;
mod relay;

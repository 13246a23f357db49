//! The `openclaw-proxy-stdio` binary as a child process: the relay against the
//! real server, and gateway mode against a Gateway stand-in. One test binary.

mod common;
mod gateway;
mod relay;

//! `openclaw-proxy-stdio`: MCP over stdin/stdout for clients that spawn MCP
//! servers as child processes.

fn main() -> std::process::ExitCode {
    eprintln!("openclaw-proxy-stdio: the stdio relay is not available in this build yet");
    std::process::ExitCode::from(2)
}

//! The exposure rule, on the real binary: a non-loopback listen address with
//! an empty global token refuses to start, naming the variable to set, unless
//! `OPENCLAW_PROXY_ALLOW_UNAUTHENTICATED=true` says so; loopback starts open
//! with a warning.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn proxy(envs: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_openclaw-proxy"));
    command
        .env_remove("OPENCLAW_PROXY_APP_TOKEN")
        .env_remove("OPENCLAW_PROXY_OPENCLAW_TOKEN")
        .env_remove("OPENCLAW_PROXY_ALLOW_UNAUTHENTICATED")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (name, value) in envs {
        command.env(name, value);
    }
    command
}

/// Reads the child's stderr until it logs the address it listens on; returns
/// the lines read. Kills the child afterwards.
fn lines_until_listening(mut child: Child) -> Vec<String> {
    let stderr = child.stderr.take().expect("stderr");
    let mut seen = Vec::new();
    for line in BufReader::new(stderr).lines().map_while(Result::ok) {
        let listening = line.contains("address=");
        seen.push(line);
        if listening {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn a_network_address_with_an_empty_token_refuses_to_start() {
    let output = proxy(&[
        ("OPENCLAW_PROXY_LISTEN", "0.0.0.0:0"),
        ("OPENCLAW_PROXY_APP_TOKEN", "set"),
    ])
    .output()
    .expect("run the binary");
    assert!(!output.status.success(), "it must not start");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("OPENCLAW_PROXY_OPENCLAW_TOKEN")
            && stderr.contains("OPENCLAW_PROXY_ALLOW_UNAUTHENTICATED"),
        "{stderr}"
    );
}

#[test]
fn allow_unauthenticated_starts_it_with_a_warning() {
    let child = proxy(&[
        ("OPENCLAW_PROXY_LISTEN", "0.0.0.0:0"),
        ("OPENCLAW_PROXY_ALLOW_UNAUTHENTICATED", "true"),
    ])
    .spawn()
    .expect("start the binary");
    let lines = lines_until_listening(child);
    assert!(
        lines.iter().any(|line| line.contains("address=")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|line| line.contains("WARN") && line.contains("OPENCLAW_PROXY_APP_TOKEN")),
        "{lines:#?}"
    );
}

#[test]
fn loopback_starts_open_with_a_warning_and_tokens_start_quietly() {
    let lines = lines_until_listening(
        proxy(&[("OPENCLAW_PROXY_LISTEN", "127.0.0.1:0")])
            .spawn()
            .expect("start the binary"),
    );
    assert!(lines.iter().any(|line| line.contains("WARN")), "{lines:#?}");
    let lines = lines_until_listening(
        proxy(&[
            ("OPENCLAW_PROXY_LISTEN", "0.0.0.0:0"),
            ("OPENCLAW_PROXY_APP_TOKEN", "a"),
            ("OPENCLAW_PROXY_OPENCLAW_TOKEN", "b"),
        ])
        .spawn()
        .expect("start the binary"),
    );
    assert!(
        lines.iter().any(|line| line.contains("address=")),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|line| line.contains("WARN")),
        "{lines:#?}"
    );
}

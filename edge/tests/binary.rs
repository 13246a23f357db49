//! The `openclaw-proxy` binary itself: flags and environment, `/health`, and a
//! clean exit on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn get_health(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    response
}

/// Starts the binary on a free port with these extra variables; returns it,
/// the address it logged, and the rest of its log.
fn start(
    variables: &[(&str, &str)],
) -> (
    std::process::Child,
    String,
    std::io::Lines<BufReader<std::process::ChildStderr>>,
) {
    // Port 0 from the environment: the binary logs the address it bound.
    let mut child = Command::new(env!("CARGO_BIN_EXE_openclaw-proxy"))
        .env("OPENCLAW_PROXY_LISTEN", "127.0.0.1:0")
        .env("OPENCLAW_PROXY_APP_TOKEN", "t")
        .env("OPENCLAW_PROXY_OPENCLAW_TOKEN", "t")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .envs(variables.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the binary");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|line| {
            line.split("address=").nth(1).map(|rest| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
        })
        .expect("the binary logs its address");
    (child, addr, lines)
}

#[test]
fn binary_serves_health_and_stops_on_sigterm() {
    let (mut child, addr, lines) = start(&[]);

    let response = get_health(&addr);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("\r\n\r\nok"), "{response}");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = child.wait().expect("wait");
    assert!(exit.success(), "exit status {exit:?}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.iter().any(|line| line.contains("shutting down")),
        "{rest:?}"
    );
}

#[test]
fn help_lists_every_setting_with_its_variable() {
    let output = Command::new(env!("CARGO_BIN_EXE_openclaw-proxy"))
        .arg("--help")
        .output()
        .expect("run --help");
    let help = String::from_utf8_lossy(&output.stdout);
    for variable in [
        "OPENCLAW_PROXY_LISTEN",
        "OPENCLAW_PROXY_APP_TOKEN",
        "OPENCLAW_PROXY_OPENCLAW_TOKEN",
        "OPENCLAW_PROXY_SESSION_TTL_SECONDS",
        "OPENCLAW_PROXY_TOOL_TIMEOUT_SECONDS",
        "OPENCLAW_PROXY_PUBLIC_URL",
    ] {
        assert!(help.contains(variable), "--help lacks {variable}");
    }
}

#[test]
fn bad_flag_value_is_a_clear_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_openclaw-proxy"))
        .args(["--listen", "not-an-address"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--listen"), "{stderr}");
}

/// `OPENCLAW_PROXY_WORKER_THREADS` sizes the runtime: counted from the
/// process's own thread names, which tokio gives its workers.
#[cfg(target_os = "linux")]
#[test]
fn worker_threads_sets_how_many_threads_serve() {
    let workers = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("the process's threads")
            .filter_map(Result::ok)
            .filter(|task| {
                std::fs::read_to_string(task.path().join("comm"))
                    .is_ok_and(|name| name.trim() == "tokio-rt-worker")
            })
            .count()
    };
    for threads in [1, 3] {
        let (mut child, addr, _lines) =
            start(&[("OPENCLAW_PROXY_WORKER_THREADS", &threads.to_string())]);
        let response = get_health(&addr);
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert_eq!(workers(child.id()), threads);
        child.kill().expect("kill");
        child.wait().expect("wait");
    }
}

/// `openclaw-proxy --probe URL` with the variables a container sets.
fn probe(url: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_openclaw-proxy"))
        .args(["--probe", url])
        .env("OPENCLAW_PROXY_LISTEN", "0.0.0.0:8000")
        .env("OPENCLAW_PROXY_APP_TOKEN", "t")
        .env("OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS", "3")
        .output()
        .expect("run --probe")
}

/// The image's health check: `--probe` exits 0 on a 200 and 1 otherwise,
/// and during the shutdown delay `/ready` fails it while `/health` passes.
#[test]
fn probe_exits_zero_on_ready_and_one_while_shutting_down() {
    let (mut child, addr, _lines) = start(&[("OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS", "3")]);
    let ready = probe(&format!("http://{addr}/ready"));
    assert!(ready.status.success(), "{ready:?}");
    assert!(
        ready.stdout.is_empty() && ready.stderr.is_empty(),
        "{ready:?}"
    );

    let missing = probe(&format!("http://{addr}/no-such-route"));
    assert_eq!(missing.status.code(), Some(1), "{missing:?}");
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(said.contains("404"), "{said}");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    // The signal reaches the server at once; /ready answers 503 from then
    // until the port closes three seconds later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let draining = loop {
        let draining = probe(&format!("http://{addr}/ready"));
        if !draining.status.success() || std::time::Instant::now() > deadline {
            break draining;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(draining.status.code(), Some(1), "{draining:?}");
    let said = String::from_utf8_lossy(&draining.stderr);
    assert!(said.contains("503"), "{said}");
    let alive = probe(&format!("http://{addr}/health"));
    assert!(alive.status.success(), "{alive:?}");

    let exit = child.wait().expect("wait");
    assert!(exit.success(), "exit status {exit:?}");
    let gone = probe(&format!("http://{addr}/ready"));
    assert_eq!(gone.status.code(), Some(1), "{gone:?}");
    let said = String::from_utf8_lossy(&gone.stderr);
    assert!(said.contains("cannot connect"), "{said}");
}

#[test]
fn probe_refuses_a_url_it_cannot_check() {
    for url in [
        "https://127.0.0.1:8000/ready",
        "127.0.0.1:8000/ready",
        "http:///ready",
    ] {
        let output = probe(url);
        assert_eq!(output.status.code(), Some(1), "{url}: {output:?}");
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("--probe"), "{url}: {said}");
    }
}

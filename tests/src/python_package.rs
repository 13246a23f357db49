//! The Python app package (`proto/python`) as an app developer gets it: its
//! wheel built (with the generated gRPC code inside) and installed, with its
//! test extras, into a virtualenv of its own under the target directory.
//! Built again only when the package's sources or `proxy.proto` change, so
//! reruns are fast; never skipped: without `python3` and its `venv` module
//! the tests that need it fail and say what to install.
//!
//! Also the app written with it that the tests run
//! (`tests/python/package_app.py`), and the agent host that drives it.

// MCP deprecates logging from 2026-07-28 (SEP-2577); the host here is at
// 2025-11-25 and keeps the log records it is sent.
#![allow(deprecated, reason = "rmcp marks MCP logging deprecated (SEP-2577)")]

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    Implementation, LoggingMessageNotificationParam, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::package_app::Launch;

/// Where the package's sources are.
pub fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/python")
}

/// The virtualenv's `python`, with the freshly built wheel installed (and
/// pytest, mypy and the type stubs its checks need, and build and twine for
/// its release step); built on first use
/// under `dir` (tests pass `env!("CARGO_TARGET_TMPDIR")`).
pub async fn python_app_package(dir: &Path) -> PathBuf {
    static PYTHON: OnceCell<PathBuf> = OnceCell::const_new();
    let dir = dir.to_owned();
    PYTHON
        .get_or_init(|| async move {
            tokio::task::spawn_blocking(move || install(&dir))
                .await
                .expect("the installation thread ended")
        })
        .await
        .clone()
}

fn install(dir: &Path) -> PathBuf {
    let venv = dir.join("python-app-venv");
    let python = venv.join("bin").join("python");
    let marker = venv.join("installed-package.txt");
    let fingerprint = fingerprint();
    if python.exists() && std::fs::read_to_string(&marker).ok().as_deref() == Some(&fingerprint) {
        return python;
    }
    let system = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    if !python.exists() {
        run(
            Command::new(&system).arg("-m").arg("venv").arg(&venv),
            "python3 with its venv module is needed for the Python app package's tests \
             (on Debian or Ubuntu: apt-get install python3-venv; or set PYTHON to a Python 3.10+)",
        );
    }
    let wheels = dir.join("python-app-wheel");
    let _ = std::fs::remove_dir_all(&wheels);
    let pip = |args: &[&str]| {
        let mut command = Command::new(&python);
        command.args(["-m", "pip", "--disable-pip-version-check", "--quiet"]);
        command.args(args);
        command
    };
    run(
        pip(&["wheel", "--no-deps", "--wheel-dir"])
            .arg(&wheels)
            .arg(package_dir()),
        "building the Python package's wheel failed (PyPI must be reachable for its build tools)",
    );
    let wheel = std::fs::read_dir(&wheels)
        .expect("the wheel directory")
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .expect("pip wheel left a .whl");
    run(
        pip(&["install", "--force-reinstall", "--no-deps"]).arg(&wheel),
        "installing the Python package's wheel failed",
    );
    run(
        pip(&["install"]).arg(format!("{}[test,release]", wheel.display())),
        "installing the Python package's dependencies failed (PyPI must be reachable)",
    );
    std::fs::write(&marker, &fingerprint).expect("write the install marker");
    python
}

fn run(command: &mut Command, what: &str) {
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("{what}: {command:?} exited with {status}"),
        Err(error) => panic!("{what}: cannot run {command:?}: {error}"),
    }
}

/// A digest of the package's sources and the contract it compiles.
fn fingerprint() -> String {
    let mut files = Vec::new();
    collect(&package_dir(), &mut files);
    files.push(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/proto/openclaw/proxy/v1/proxy.proto"),
    );
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in files {
        hasher.write(file.to_string_lossy().as_bytes());
        hasher.write(&std::fs::read(&file).unwrap_or_default());
    }
    format!("{:016x}", hasher.finish())
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || matches!(name.as_str(), "__pycache__" | "dist" | "build") {
            continue;
        }
        if path.is_dir() {
            collect(&path, files);
        } else {
            files.push(path);
        }
    }
}

pub use crate::package_app::PackageApp;

/// The Python app under test, `tests/python/package_app.py`, run by the
/// virtualenv's interpreter (from [`python_app_package`]).
impl Launch for PathBuf {
    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(self);
        command.arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python/package_app.py"));
        command
    }

    fn what(&self) -> &'static str {
        "the Python app"
    }
}

/// An agent host: its user answers every form with the color teal; it keeps
/// the progress and the log records it receives.
#[derive(Clone, Default)]
pub struct Host {
    /// The progress notifications received.
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// The log records received.
    pub logs: Arc<Mutex<Vec<LoggingMessageNotificationParam>>>,
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        let capabilities: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {}})).unwrap_or_default();
        ClientConfig::new(
            capabilities,
            Implementation::new("python-package-host", "0"),
        )
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"color": "teal"})))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut progress) = self.progress.lock() {
            progress.push(params);
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut logs) = self.logs.lock() {
            logs.push(params);
        }
    }
}

pub use crate::package_app::{call_tool, connect};

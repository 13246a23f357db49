//! HAProxy in front of cluster nodes, run from the repository's own
//! `deploy/haproxy.cfg` with only its environment variables set
//! (`LB_BIND`, `LB_NODE1..3`), so that what the cluster tests and `loadgen
//! balancer` measure is the recipe operators deploy, not a copy of it.
//!
//! HAProxy is Debian's package. The `haproxy` on `PATH` (or `$HAPROXY`) is
//! used when there is one (CI installs it, `.ci/run`); otherwise it is
//! installed on first use without touching the system: `apt-get download`
//! fetches the package and the libraries the machine lacks (as `apt-get
//! install` would resolve them), `dpkg-deb -x` unpacks them under the
//! target directory, and HAProxy runs from there with `LD_LIBRARY_PATH`.
//! When neither works (no Debian tools, no network) [`haproxy`] says why,
//! and the caller skips with that note.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::OnceCell;

use crate::processes::{TempDir, free_port};

/// An HAProxy executable and what it needs to run.
#[derive(Clone, Debug)]
pub struct Haproxy {
    program: PathBuf,
    /// Where its unpacked libraries are, when it was installed here.
    libraries: Option<String>,
}

impl Haproxy {
    /// The executable `program`, as installed (`haproxy` on `PATH`).
    pub fn at(program: PathBuf) -> Self {
        Self {
            program,
            libraries: None,
        }
    }

    /// A command running this HAProxy, with the environment it needs.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        if let Some(libraries) = &self.libraries {
            command.env("LD_LIBRARY_PATH", libraries);
        }
        command
    }

    /// `haproxy -v`'s first line, or why it does not run.
    pub async fn version(&self) -> Result<String, String> {
        let output = self
            .command()
            .arg("-v")
            .output()
            .await
            .map_err(|error| format!("cannot run {}: {error}", self.program.display()))?;
        let said = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(format!("{} -v failed: {said}", self.program.display()));
        }
        Ok(said.lines().next().unwrap_or_default().to_owned())
    }
}

/// HAProxy (see the module's documentation), installed on first use under
/// `dir` (`target/tmp/haproxy-deb`); `Err` says why there is none.
pub async fn haproxy(dir: &Path) -> Result<Haproxy, String> {
    static FOUND: OnceCell<Result<Haproxy, String>> = OnceCell::const_new();
    FOUND
        .get_or_init(|| find_or_install(dir.join("haproxy-deb")))
        .await
        .clone()
}

async fn find_or_install(dir: PathBuf) -> Result<Haproxy, String> {
    let installed = Haproxy {
        program: std::env::var_os("HAPROXY").map_or_else(|| "haproxy".into(), PathBuf::from),
        libraries: None,
    };
    if installed.version().await.is_ok() {
        return Ok(installed);
    }
    let root = dir.join("root");
    let unpacked = Haproxy {
        program: root.join("usr/sbin/haproxy"),
        libraries: Some(library_path(&root)),
    };
    if unpacked.version().await.is_ok() {
        return Ok(unpacked);
    }
    install_deb(&dir, &root).await.map_err(|error| {
        format!("haproxy is not installed and Debian's package could not be unpacked: {error:#}")
    })?;
    let unpacked = Haproxy {
        libraries: Some(library_path(&root)),
        ..unpacked
    };
    unpacked.version().await?;
    Ok(unpacked)
}

/// Downloads `haproxy` and the packages `apt-get install` would add with it
/// on this machine, and unpacks them all under `root`.
async fn install_deb(dir: &Path, root: &Path) -> anyhow::Result<()> {
    let simulated = Command::new("apt-get")
        .args(["-s", "-qq", "install", "haproxy"])
        .output()
        .await
        .context("cannot run apt-get (not a Debian system?)")?;
    anyhow::ensure!(
        simulated.status.success(),
        "apt-get -s install haproxy failed: {}",
        String::from_utf8_lossy(&simulated.stderr)
    );
    let packages: Vec<String> = String::from_utf8_lossy(&simulated.stdout)
        .lines()
        .filter_map(|line| line.strip_prefix("Inst "))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(
        packages.iter().any(|package| package == "haproxy"),
        "apt-get knows no haproxy package (run apt-get update?)"
    );
    let debs = dir.join("debs");
    std::fs::create_dir_all(&debs).with_context(|| format!("cannot create {}", debs.display()))?;
    let downloaded = Command::new("apt-get")
        .arg("download")
        .args(&packages)
        .current_dir(&debs)
        .output()
        .await
        .context("cannot run apt-get download")?;
    anyhow::ensure!(
        downloaded.status.success(),
        "apt-get download {} failed: {}",
        packages.join(" "),
        String::from_utf8_lossy(&downloaded.stderr)
    );
    for entry in std::fs::read_dir(&debs)? {
        let deb = entry?.path();
        if deb.extension().is_some_and(|extension| extension == "deb") {
            let status = Command::new("dpkg-deb")
                .arg("-x")
                .arg(&deb)
                .arg(root)
                .status()
                .await
                .context("cannot run dpkg-deb")?;
            anyhow::ensure!(status.success(), "dpkg-deb -x {} failed", deb.display());
        }
    }
    Ok(())
}

/// The folders under `root` that hold shared libraries.
fn library_path(root: &Path) -> String {
    let mut folders = Vec::new();
    let mut pending = vec![root.to_owned()];
    while let Some(folder) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        let mut has_library = false;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if entry.file_name().to_string_lossy().contains(".so") {
                has_library = true;
            }
        }
        if has_library {
            folders.push(folder.display().to_string());
        }
    }
    folders.join(":")
}

/// The repository's `deploy/haproxy.cfg`.
pub fn repo_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/haproxy.cfg")
}

/// The same configuration without session affinity: every `balance hash`
/// line becomes `balance roundrobin`, the rest (checks, timeouts, the
/// gRPC backend) untouched. `Err` when the file hashes nowhere.
pub fn without_affinity(config: &str) -> anyhow::Result<String> {
    let mut replaced = 0;
    let lines: Vec<String> = config
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("balance hash ") {
                replaced += 1;
                "    balance roundrobin".to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect();
    anyhow::ensure!(
        replaced >= 2,
        "{replaced} balance hash lines, expected one per backend"
    );
    Ok(lines.join("\n") + "\n")
}

/// A running HAProxy on a free loopback port, killed when dropped.
pub struct Balancer {
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    /// What it wrote on stderr (server state changes, alerts).
    said: Arc<Mutex<Vec<String>>>,
    /// Holds a generated configuration, if any.
    _folder: Option<TempDir>,
}

impl Balancer {
    /// Runs `haproxy -f config` with `LB_BIND` on a free loopback port and
    /// `LB_NODE1..` the `nodes`; returns once it listens.
    pub async fn start(
        haproxy: &Haproxy,
        config: &Path,
        nodes: &[SocketAddr],
    ) -> anyhow::Result<Self> {
        let port = free_port()?;
        let mut command = haproxy.command();
        command
            .arg("-db")
            .arg("-f")
            .arg(config)
            .env("LB_BIND", format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            // The access log (one line a request).
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (index, node) in nodes.iter().enumerate() {
            command.env(format!("LB_NODE{}", index + 1), node.to_string());
        }
        let mut child = command.spawn().context("cannot start haproxy")?;
        let said = Arc::new(Mutex::new(Vec::new()));
        if let Some(stderr) = child.stderr.take() {
            let said = said.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(mut said) = said.lock() {
                        said.push(line);
                    }
                }
            });
        }
        let mut balancer = Self {
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            child,
            said,
            _folder: None,
        };
        balancer.wait_listening().await?;
        Ok(balancer)
    }

    /// [`Balancer::start`] with `config`'s text, written to a temporary file.
    pub async fn start_with_text(
        haproxy: &Haproxy,
        config: &str,
        nodes: &[SocketAddr],
    ) -> anyhow::Result<Self> {
        let folder = TempDir::new("haproxy-config")?;
        let path = folder.path().join("haproxy.cfg");
        std::fs::write(&path, config)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut balancer = Self::start(haproxy, &path, nodes).await?;
        balancer._folder = Some(folder);
        Ok(balancer)
    }

    async fn wait_listening(&mut self) -> anyhow::Result<()> {
        for _ in 0..500 {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("haproxy exited ({status}):\n{}", self.log());
            }
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("haproxy did not listen on {}:\n{}", self.addr, self.log())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Its process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Everything HAProxy wrote on stderr so far.
    pub fn log(&self) -> String {
        self.said
            .lock()
            .map(|said| said.join("\n"))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The round-robin variant of the repository's file is the same file
    /// but for its balance lines: what `loadgen balancer` compares is
    /// affinity alone.
    #[test]
    fn without_affinity_changes_only_the_balance_lines() {
        let original = std::fs::read_to_string(repo_config()).expect("deploy/haproxy.cfg");
        let variant = without_affinity(&original).expect("a variant");
        let (before, after): (Vec<&str>, Vec<&str>) =
            (original.lines().collect(), variant.lines().collect());
        assert_eq!(before.len(), after.len());
        let changed: Vec<(&str, &str)> = before
            .iter()
            .zip(&after)
            .filter(|(old, new)| old != new)
            .map(|(old, new)| (old.trim(), new.trim()))
            .collect();
        assert_eq!(
            changed,
            [("balance hash var(txn.session_id)", "balance roundrobin"); 2]
        );
        assert!(without_affinity("defaults\n    mode http\n").is_err());
    }
}

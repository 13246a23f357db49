//! The TypeScript app package (`proto/typescript`) as an app developer gets
//! it: packed with `npm pack` (its build generates the contract's code into
//! the tarball) and installed, with zod and TypeScript, into a clean npm
//! project of its own under the target directory. Built again only when the
//! package's sources or `proxy.proto` change, so reruns are fast; never
//! skipped: without npm (or the npm registry) the tests that need it fail and
//! say what is missing.
//!
//! Everything runs on the Node.js 22 that `tests/node/package.json` installs
//! (the package needs Node 22; the machine's own `node` may be older).
//!
//! Also the app written with it that the tests run
//! (`tests/typescript/package_app.ts`), and the agent host that drives it.

// MCP deprecates logging from 2026-07-28 (SEP-2577); the host here is at
// 2025-11-25 and keeps the log records it is sent.
#![allow(deprecated, reason = "rmcp marks MCP logging deprecated (SEP-2577)")]

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation, ListRootsResult,
    LoggingMessageNotificationParam, ProgressNotificationParam, Root,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::json;
use tokio::sync::OnceCell;

use crate::package_app::Launch;

/// The versions the clean project installs beside the package.
const PROJECT_DEPENDENCIES: &str = r#""zod": "4.6.7""#;
const PROJECT_DEV_DEPENDENCIES: &str = r#""typescript": "5.9.3", "@types/node": "22.20.6""#;

/// Where the package's sources are.
pub fn package_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/typescript")
}

fn contract() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/proto/openclaw/proxy/v1/proxy.proto")
}

/// The clean project and the Node.js that runs it.
#[derive(Clone, Debug)]
pub struct Installed {
    /// Node.js 22.
    pub node: PathBuf,
    /// A project with the packed package, zod, TypeScript, the package's unit
    /// tests (`test/`), the test app (`package_app.ts`), the load generator's
    /// app (`bench_app.ts`), the example (`echo_app.ts`) and the README's
    /// opening app (`readme_app.ts`).
    pub project: PathBuf,
    /// The tarball `npm pack` made.
    pub tarball: PathBuf,
    /// The package's sources as they were packed (with the contract beside
    /// them, as in the repository) and their build tools installed.
    pub staged: PathBuf,
}

/// The package packed and installed into a clean project; built on first use
/// under `dir` (tests pass `env!("CARGO_TARGET_TMPDIR")`).
pub async fn typescript_app_package(dir: &Path) -> Installed {
    static INSTALLED: OnceCell<Installed> = OnceCell::const_new();
    let dir = dir.to_owned();
    INSTALLED
        .get_or_init(|| async move {
            tokio::task::spawn_blocking(move || install(&dir))
                .await
                .expect("the installation thread ended")
        })
        .await
        .clone()
}

fn install(dir: &Path) -> Installed {
    let node = crate::conformance::ensure_node_tools()
        .unwrap_or_else(|error| panic!("Node.js 22 for the TypeScript package's tests: {error:#}"));
    let fingerprint = fingerprint();
    let root = dir.join("typescript-app");
    let project = root.join("project");
    let packed = root.join("packed");
    let marker = project.join("installed-package.txt");
    let stage = root.join("stage");
    let staged = stage.join("typescript");
    let installed = |tarball| Installed {
        node: node.clone(),
        project: project.clone(),
        tarball,
        staged: staged.clone(),
    };
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(&fingerprint)
        && let Some(tarball) = tarball_in(&packed)
    {
        return installed(tarball);
    }
    let _ = std::fs::remove_dir_all(&root);

    // The package is built where its sources and the contract sit side by
    // side, as in the repository, without touching the repository itself.
    copy_tree(&package_dir(), &staged);
    let proto = stage.join("proto/openclaw/proxy/v1");
    std::fs::create_dir_all(&proto).expect("create the staged proto directory");
    std::fs::copy(contract(), proto.join("proxy.proto")).expect("copy proxy.proto");
    run(
        npm(&node, &staged).args(["install", "--no-package-lock"]),
        "installing the TypeScript package's build tools failed (the npm registry must be reachable)",
    );
    std::fs::create_dir_all(&packed).expect("create the pack directory");
    run(
        npm(&node, &staged)
            .args(["pack", "--pack-destination"])
            .arg(&packed),
        "npm pack of the TypeScript package failed",
    );
    let tarball = tarball_in(&packed).expect("npm pack left a .tgz");

    std::fs::create_dir_all(project.join("test")).expect("create the clean project");
    std::fs::write(
        project.join("package.json"),
        format!(
            r#"{{"name": "typescript-package-e2e", "private": true, "type": "module",
  "dependencies": {{"openclaw-proxy-app": "file:{}", {PROJECT_DEPENDENCIES}}},
  "devDependencies": {{{PROJECT_DEV_DEPENDENCIES}}}}}
"#,
            tarball.display()
        ),
    )
    .expect("write the project's package.json");
    std::fs::write(
        project.join("tsconfig.json"),
        r#"{"compilerOptions": {"target": "ES2023", "module": "NodeNext", "moduleResolution": "NodeNext",
  "strict": true, "noUncheckedIndexedAccess": true, "verbatimModuleSyntax": true, "noEmit": true,
  "allowImportingTsExtensions": true, "types": ["node"]},
 "include": ["*.ts", "test/*.ts"]}
"#,
    )
    .expect("write the project's tsconfig.json");
    for entry in
        std::fs::read_dir(package_dir().join("test")).expect("the package's test directory")
    {
        let path = entry.expect("a test file").path();
        if let Some(name) = path.file_name() {
            std::fs::copy(&path, project.join("test").join(name)).expect("copy a unit test");
        }
    }
    for (app, name) in apps() {
        std::fs::copy(app, project.join(name)).expect("copy an app written with the package");
    }
    // The README's opening app, so that tsc checks it as written.
    std::fs::write(project.join("readme_app.ts"), readme_app()).expect("write the README's app");
    run(
        npm(&node, &project).args(["install", "--no-package-lock"]),
        "installing the TypeScript package's tarball into a clean project failed",
    );
    std::fs::write(&marker, &fingerprint).expect("write the install marker");
    installed(tarball)
}

/// `npm` run by Node.js 22 (its directory first on PATH, so the scripts npm
/// runs get it too), quiet, in `dir`.
pub fn npm(node: &Path, dir: &Path) -> Command {
    let bin = node.parent().expect("node's directory");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin.to_owned()];
    dirs.extend(std::env::split_paths(&path));
    let mut command = Command::new("npm");
    command
        .env(
            "PATH",
            std::env::join_paths(dirs).expect("PATH without separators in it"),
        )
        .args(["--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .stdin(Stdio::null());
    command
}

/// The first TypeScript block of the package's README: its complete app.
fn readme_app() -> String {
    let readme =
        std::fs::read_to_string(package_dir().join("README.md")).expect("the package's README");
    let start = readme
        .find("```ts\n")
        .expect("the README opens with a ```ts block")
        + "```ts\n".len();
    let length = readme[start..]
        .find("```")
        .expect("the README's first block ends");
    readme[start..start + length].to_owned()
}

fn tarball_in(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "tgz"))
}

fn run(command: &mut Command, what: &str) {
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("{what}: {command:?} exited with {status}"),
        Err(error) => panic!("{what}: cannot run {command:?} (is npm installed?): {error}"),
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a staging directory");
    for entry in std::fs::read_dir(from).expect("read the package's sources") {
        let entry = entry.expect("a directory entry");
        let name = entry.file_name();
        if skipped(&name.to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(&name));
        } else {
            std::fs::copy(&path, to.join(&name)).expect("copy a source file");
        }
    }
}

/// What a developer's checkout may hold besides the sources.
fn skipped(name: &str) -> bool {
    name.starts_with('.') && name != ".gitignore"
        || matches!(
            name,
            "node_modules" | "dist" | "generated" | "package-lock.json"
        )
        || name.ends_with(".tgz")
}

/// The apps written with the package that the clean project holds: the test
/// app, the load generator's app and the example
/// (`proto/examples/typescript`), with their names there.
fn apps() -> [(PathBuf, &'static str); 3] {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR"));
    [
        (tests.join("typescript/package_app.ts"), "package_app.ts"),
        (tests.join("typescript/bench_app.ts"), "bench_app.ts"),
        (
            tests.join("../proto/examples/typescript/echo_app.ts"),
            "echo_app.ts",
        ),
    ]
}

/// A digest of the package's sources, the contract it compiles, the apps
/// written with it and this installer.
fn fingerprint() -> String {
    let mut files = Vec::new();
    collect(&package_dir(), &mut files);
    files.push(contract());
    files.extend(apps().into_iter().map(|(path, _)| path));
    files.sort();
    let mut hasher = DefaultHasher::new();
    // How the project is made is part of what it is.
    hasher.write(include_bytes!("typescript_package.rs"));
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
        if skipped(&entry.file_name().to_string_lossy()) {
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

/// The project's `package_app.ts`, run by Node.js 22 in the project.
impl Launch for Installed {
    fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(&self.node);
        command.arg("package_app.ts").current_dir(&self.project);
        command
    }

    fn what(&self) -> &'static str {
        "the TypeScript app"
    }
}

/// An agent host: its user answers every form with the color teal, its model
/// writes "a summary", its one root is `file:///notes` ("notes"); it keeps
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
            serde_json::from_value(json!({"elicitation": {}, "sampling": {}, "roots": {}}))
                .unwrap_or_default();
        ClientConfig::new(
            capabilities,
            Implementation::new("typescript-package-host", "0"),
        )
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"color": "teal"})))
    }

    async fn create_message(
        &self,
        _params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        serde_json::from_value(json!({"model": "host-model", "role": "assistant",
            "content": {"type": "text", "text": "a summary"}}))
        .map_err(|error| ErrorData::internal_error(error.to_string(), None))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(vec![
            Root::new("file:///notes").with_name("notes"),
        ]))
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

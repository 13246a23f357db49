//! The deployment recipes in `deploy/` are kept true: every setting they
//! name is one the binary has (its `--help`), and their values parse; every
//! port and probe path is the server's (probed on a running server); no
//! secret is written in them; the balancer hashes on the session id; and the
//! tools that can check a recipe here do: `haproxy -c`, `kubectl kustomize`,
//! `systemd-analyze`, `nats-server -t` (each skipped with a note when it is
//! not installed, but nats-server and HAProxy, which are installed on first
//! use). HAProxy in front of running nodes is in `tests/cluster/balancer.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use openclaw_proxy_tests::ServerBuilder;
use openclaw_proxy_tests::balancer;
use openclaw_proxy_tests::processes::nats_server_binary;
use openclaw_proxy_tests::server_process::proxy_binary;
use yaml_rust2::{Yaml, YamlLoader};

/// The recipes' folder.
fn deploy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .join("deploy")
}

fn read(relative: &str) -> String {
    let path = deploy().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("read {path:?}: {error}"))
}

/// Every file of `deploy/` but those its `.gitignore` names (the filled-in
/// `secrets.env`, which holds secrets by design), as (path relative to
/// `deploy/`, text).
fn recipe_files() -> Vec<(String, String)> {
    let ignored: BTreeSet<String> = read(".gitignore")
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let mut files = Vec::new();
    let mut folders = vec![deploy()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).expect("read deploy/") {
            let path = entry.expect("entry").path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            if ignored.contains(name) {
                continue;
            }
            if path.is_dir() {
                folders.push(path);
            } else {
                let relative = path
                    .strip_prefix(deploy())
                    .expect("below deploy/")
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(&path).expect("a text file");
                files.push((relative, text));
            }
        }
    }
    files.sort();
    assert!(files.len() >= 10, "deploy/ holds {files:?}");
    files
}

/// The server's settings, from the binary's own `--help` (`[env: NAME]`).
async fn settings() -> BTreeSet<String> {
    let output = Command::new(proxy_binary().await)
        .arg("--help")
        .env_clear()
        .output()
        .expect("run openclaw-proxy --help");
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8_lossy(&output.stdout);
    let names: BTreeSet<String> = help
        .split("[env: ")
        .skip(1)
        .filter_map(|rest| rest.split(['=', ']']).next())
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains("OPENCLAW_PROXY_LISTEN") && names.len() > 40,
        "{names:?}"
    );
    names
}

/// The `OPENCLAW_PROXY_*` names in `text`, with their line numbers.
fn named_settings(text: &str) -> Vec<(usize, String)> {
    let mut names = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(start) = rest.find("OPENCLAW_PROXY_") {
            let name: String = rest[start..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            rest = &rest[start + name.len()..];
            names.push((number + 1, name));
        }
    }
    names
}

/// A name whose value is a secret: a token, a key, a password.
fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    !name.ends_with("_FILE")
        && (name.ends_with("TOKEN")
            || name.ends_with("_KEY")
            || name.ends_with("PASSWORD")
            || name.contains("SECRET"))
}

/// A value that is no secret itself: nothing, a reference to one
/// (`$NAME`, `${NAME}`), or a path to a file holding it.
fn is_no_secret_value(value: &str) -> bool {
    let value = value.trim().trim_matches(['"', '\'']);
    value.is_empty()
        || value.starts_with('$')
        || value.starts_with('/')
        || value.starts_with("%d/")
        || value.starts_with('{')
        || value.starts_with('[')
        || value.starts_with('|')
        || value.starts_with('>')
}

/// Secrets written inline in a line of any format: `NAME=value` or
/// `NAME: value` with a secret name and a literal value.
fn inline_secrets_in_text(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let bytes = line.as_bytes();
        let mut index = 0;
        while index < bytes.len() {
            if !(bytes[index].is_ascii_alphanumeric() || bytes[index] == b'_') {
                index += 1;
                continue;
            }
            let start = index;
            while index < bytes.len()
                && (bytes[index].is_ascii_alphanumeric() || bytes[index] == b'_')
            {
                index += 1;
            }
            let name = &line[start..index];
            let after = line[index..].trim_start();
            let Some(value) = after.strip_prefix(['=', ':']) else {
                continue;
            };
            let value = value.split_whitespace().next().unwrap_or("");
            if is_secret_name(name) && !is_no_secret_value(value) {
                found.push((number + 1, format!("{name} = {value}")));
            }
        }
    }
    found
}

/// Secrets given inline in YAML: a secret-named key with a literal value,
/// `- name: SECRET` beside `value: literal` (a Kubernetes env entry),
/// `- SECRET=literal` (a compose environment list), or a Secret manifest
/// that carries data.
fn inline_secrets_in_yaml(node: &Yaml, found: &mut Vec<String>) {
    match node {
        Yaml::Hash(hash) => {
            let get = |key: &str| hash.get(&Yaml::String(key.to_owned()));
            if get("kind").and_then(Yaml::as_str) == Some("Secret")
                && (get("data").is_some() || get("stringData").is_some())
            {
                found.push("a Secret manifest with its data".to_owned());
            }
            if let (Some(name), Some(value)) = (get("name").and_then(Yaml::as_str), get("value"))
                && is_secret_name(name)
                && !scalar(value).is_none_or(|value| is_no_secret_value(&value))
            {
                found.push(format!("{name}: {value:?}"));
            }
            for (key, value) in hash {
                if let Some(key) = key.as_str()
                    && is_secret_name(key)
                    && scalar(value).is_some_and(|value| !is_no_secret_value(&value))
                {
                    found.push(format!("{key}: {value:?}"));
                }
                inline_secrets_in_yaml(value, found);
            }
        }
        Yaml::Array(items) => {
            for item in items {
                if let Some((name, value)) = item.as_str().and_then(|text| text.split_once('='))
                    && is_secret_name(name)
                    && !is_no_secret_value(value)
                {
                    found.push(format!("{name}={value}"));
                }
                inline_secrets_in_yaml(item, found);
            }
        }
        _ => {}
    }
}

/// A scalar as text (strings, numbers, booleans).
fn scalar(node: &Yaml) -> Option<String> {
    match node {
        Yaml::String(text) | Yaml::Real(text) => Some(text.clone()),
        Yaml::Integer(number) => Some(number.to_string()),
        Yaml::Boolean(value) => Some(value.to_string()),
        _ => None,
    }
}

fn yaml(relative: &str) -> Vec<Yaml> {
    YamlLoader::load_from_str(&read(relative))
        .unwrap_or_else(|error| panic!("deploy/{relative} is not YAML: {error}"))
}

fn key<'a>(node: &'a Yaml, name: &str) -> &'a Yaml {
    &node[name]
}

/// The port of a `host:port` address.
fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .unwrap_or_else(|| panic!("{address:?} names no port"))
}

/// Seconds in a duration written as `30`, `30s`, `2m` or `1h`.
fn seconds(text: &str) -> u64 {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |at| text.split_at(at));
    let number: u64 = number.parse().unwrap_or_else(|_| panic!("{text:?}"));
    match unit {
        "" | "s" => number,
        "m" | "min" => number * 60,
        "h" => number * 3600,
        "d" => number * 86_400,
        _ => panic!("{text:?}: unknown unit"),
    }
}

// ---------------------------------------------------------------------------
// The Containerfile.

/// One instruction: its keyword (upper case) and the rest, continuation
/// lines joined.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    arguments: String,
}

/// The stages of the Containerfile, each its instructions from `FROM` on.
fn containerfile() -> Vec<Vec<Instruction>> {
    let text = read("Containerfile");
    let mut logical = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                logical.push(std::mem::take(&mut current));
            }
        }
    }
    let mut stages: Vec<Vec<Instruction>> = Vec::new();
    for line in logical {
        let (keyword, arguments) = line.split_once(' ').unwrap_or((&line, ""));
        let instruction = Instruction {
            keyword: keyword.to_ascii_uppercase(),
            arguments: arguments.trim().to_owned(),
        };
        if instruction.keyword == "FROM" {
            stages.push(Vec::new());
        }
        stages
            .last_mut()
            .expect("the Containerfile starts with FROM")
            .push(instruction);
    }
    stages
}

/// The variables a stage's `ENV` instructions set (`NAME=value ...`, or the
/// old `NAME value`).
fn env_of(stage: &[Instruction]) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for instruction in stage.iter().filter(|i| i.keyword == "ENV") {
        if !instruction.arguments.contains('=') {
            let (name, value) = instruction
                .arguments
                .split_once(' ')
                .unwrap_or((&instruction.arguments, ""));
            env.insert(name.to_owned(), value.trim().to_owned());
            continue;
        }
        for pair in instruction.arguments.split_whitespace() {
            let (name, value) = pair.split_once('=').expect("NAME=value");
            env.insert(name.to_owned(), value.trim_matches('"').to_owned());
        }
    }
    env
}

/// An instruction's JSON (exec) form, after its `--flags`.
fn exec_form(arguments: &str) -> Vec<String> {
    let json = &arguments[arguments
        .find('[')
        .unwrap_or_else(|| panic!("{arguments:?} is not in exec form: the image has no shell"))..];
    serde_json::from_str(json).unwrap_or_else(|error| panic!("{json:?}: {error}"))
}

fn listen_port(env: &BTreeMap<String, String>) -> u16 {
    port_of(
        env.get("OPENCLAW_PROXY_LISTEN")
            .map_or("127.0.0.1:8000", String::as_str),
    )
}

/// The health check's command: the server binary probing its own port.
fn healthcheck() -> Vec<String> {
    let stages = containerfile();
    let runtime = stages.last().expect("a stage");
    let check = runtime
        .iter()
        .find(|i| i.keyword == "HEALTHCHECK")
        .expect("the runtime stage has a HEALTHCHECK");
    let command = check
        .arguments
        .split_once("CMD ")
        .expect("HEALTHCHECK ... CMD")
        .1;
    exec_form(command)
}

#[test]
fn the_image_is_multi_stage_builds_both_binaries_and_runs_without_root_or_shell() {
    let stages = containerfile();
    assert!(stages.len() >= 2, "not multi-stage: {stages:?}");
    let build: Vec<&Instruction> = stages[..stages.len() - 1]
        .iter()
        .flatten()
        .filter(|i| i.keyword == "RUN" && i.arguments.contains("cargo build"))
        .collect();
    let build = build.first().expect("a build stage runs cargo build");
    for wanted in [
        "--release",
        "--locked",
        "--package openclaw-proxy-edge",
        "--bin openclaw-proxy",
        "--package openclaw-proxy-stdio",
        "--bin openclaw-proxy-stdio",
    ] {
        assert!(build.arguments.contains(wanted), "{wanted}: {build:?}");
    }

    let runtime = stages.last().expect("a stage");
    let from = &runtime[0].arguments;
    assert!(from.contains("distroless"), "runtime base {from:?}");
    for instruction in runtime {
        assert!(
            !matches!(instruction.keyword.as_str(), "RUN" | "SHELL"),
            "the runtime stage runs a shell: {instruction:?}"
        );
    }
    let user = runtime
        .iter()
        .rfind(|i| i.keyword == "USER")
        .expect("USER in the runtime stage");
    let uid = user.arguments.split(':').next().unwrap_or("");
    assert!(!matches!(uid, "" | "0" | "root"), "{user:?}");

    // Both binaries land where ENTRYPOINT and HEALTHCHECK find them.
    let copied: Vec<String> = runtime
        .iter()
        .filter(|i| i.keyword == "COPY" && i.arguments.contains("--from="))
        .flat_map(|i| {
            let words: Vec<&str> = i.arguments.split_whitespace().collect();
            let destination = words.last().copied().unwrap_or("");
            words[1..words.len() - 1]
                .iter()
                .map(|source| {
                    let name = source.rsplit('/').next().unwrap_or("");
                    format!("{}/{name}", destination.trim_end_matches('/'))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    for binary in ["openclaw-proxy", "openclaw-proxy-stdio"] {
        assert!(
            copied
                .iter()
                .any(|path| path.ends_with(&format!("/{binary}"))),
            "{binary} is not copied into the image: {copied:?}"
        );
    }
    let entrypoint = runtime
        .iter()
        .find(|i| i.keyword == "ENTRYPOINT")
        .expect("ENTRYPOINT");
    let entrypoint = exec_form(&entrypoint.arguments);
    assert!(copied.contains(&entrypoint[0]), "{entrypoint:?} {copied:?}");
    let check = healthcheck();
    assert!(copied.contains(&check[0]), "{check:?} {copied:?}");
    assert!(check[0].ends_with("/openclaw-proxy"), "{check:?}");

    // The health check probes /ready on the port the server listens on.
    let env = env_of(runtime);
    assert_eq!(check[1], "--probe", "{check:?}");
    let url = check[2]
        .strip_prefix("http://127.0.0.1:")
        .expect("the probe's URL is the server's own loopback address");
    let (port, path) = url.split_once('/').expect("a path");
    assert_eq!(
        port.parse::<u16>().ok(),
        Some(listen_port(&env)),
        "{check:?}"
    );
    assert_eq!(format!("/{path}"), "/ready", "{check:?}");
    let exposed: Vec<&str> = runtime
        .iter()
        .filter(|i| i.keyword == "EXPOSE")
        .map(|i| i.arguments.as_str())
        .collect();
    assert_eq!(exposed, [listen_port(&env).to_string()]);

    // SIGTERM, with a shutdown delay shorter than the 10 s a container
    // engine waits by default before it kills.
    if let Some(signal) = runtime.iter().find(|i| i.keyword == "STOPSIGNAL") {
        assert_eq!(signal.arguments, "SIGTERM");
    }
    let delay: u64 = env
        .get("OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS")
        .expect("the image sets a shutdown delay")
        .parse()
        .expect("seconds");
    assert!((1..10).contains(&delay), "{delay}");
}

// ---------------------------------------------------------------------------
// compose.yaml and nats.conf.

/// A compose service's environment, from the map or the list form.
fn compose_env(service: &Yaml) -> BTreeMap<String, String> {
    match key(service, "environment") {
        Yaml::Hash(hash) => hash
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().expect("a name").to_owned(),
                    scalar(value).unwrap_or_default(),
                )
            })
            .collect(),
        Yaml::Array(items) => items
            .iter()
            .filter_map(Yaml::as_str)
            .map(|item| {
                let (name, value) = item.split_once('=').unwrap_or((item, ""));
                (name.to_owned(), value.to_owned())
            })
            .collect(),
        _ => BTreeMap::new(),
    }
}

/// The compose services, by name.
fn compose_services() -> BTreeMap<String, Yaml> {
    let docs = yaml("compose.yaml");
    let services = key(&docs[0], "services")
        .as_hash()
        .expect("compose.yaml has services");
    services
        .iter()
        .map(|(name, service)| (name.as_str().expect("a name").to_owned(), service.clone()))
        .collect()
}

/// The compose services that run openclaw-proxy (built from the Containerfile).
fn compose_nodes(services: &BTreeMap<String, Yaml>) -> BTreeMap<String, Yaml> {
    services
        .iter()
        .filter(|(_, service)| {
            key(key(service, "build"), "dockerfile").as_str() == Some("deploy/Containerfile")
        })
        .map(|(name, service)| (name.clone(), service.clone()))
        .collect()
}

fn strings(node: &Yaml) -> Vec<String> {
    match node {
        Yaml::Array(items) => items.iter().filter_map(scalar).collect(),
        other => scalar(other).into_iter().collect(),
    }
}

#[test]
fn compose_runs_three_nodes_on_nats_with_jetstream_behind_haproxy() {
    let services = compose_services();
    let nodes = compose_nodes(&services);
    assert_eq!(nodes.len(), 3, "{:?}", nodes.keys());
    let balancer = haproxy();

    for (name, node) in &nodes {
        let env = compose_env(node);
        let port = listen_port(&env);
        let delay = seconds(
            env.get("OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS")
                .map_or("0", String::as_str),
        );
        let grace = seconds(
            key(node, "stop_grace_period")
                .as_str()
                .expect("stop_grace_period"),
        );
        assert!(
            grace > delay,
            "{name}: stop_grace_period {grace} <= delay {delay}"
        );

        // Its NATS is the compose nats service, on the port nats.conf names.
        let nats_url = env.get("OPENCLAW_PROXY_NATS_URL").expect("cluster mode");
        let host_port = nats_url.strip_prefix("nats://").expect("nats://");
        let (host, nats_port) = host_port.split_once(':').expect("host:port");
        let nats = services
            .get(host)
            .unwrap_or_else(|| panic!("no service {host}"));
        assert!(
            nats_port.parse::<u16>().ok() == Some(nats_conf_port()),
            "{nats_url}"
        );
        let image = key(nats, "image").as_str().expect("nats image");
        let tag = image.rsplit_once(':').expect("a pinned tag").1;
        let version: Vec<u32> = tag
            .split(['.', '-'])
            .take(2)
            .map(|part| part.parse().expect("a version"))
            .collect();
        assert!(
            image.contains("nats") && version >= vec![2, 11],
            "{image}: the session bucket needs nats-server 2.11+"
        );
        let command = strings(key(nats, "command")).join(" ");
        let mounts = strings(key(nats, "volumes"));
        // nats.conf is mounted where the command points the server.
        let mounted = mounts
            .iter()
            .find_map(|mount| mount.strip_prefix("./nats.conf:"))
            .and_then(|inside| inside.split(':').next())
            .expect("nats.conf mounted");
        assert!(
            command.contains(&format!("--config {mounted}")),
            "{command} {mounts:?}"
        );

        // Secrets come from an env file that is not committed, whose
        // example is.
        let env_files = strings(key(node, "env_file"));
        assert!(!env_files.is_empty(), "{name}: no env_file");
        for file in env_files {
            assert!(
                read(".gitignore").lines().any(|line| line.trim() == file),
                "{file} is not ignored by git"
            );
            assert!(
                deploy().join(format!("{file}.example")).exists(),
                "{file}.example"
            );
        }

        // The balancer's servers are these nodes on their port.
        assert!(
            balancer
                .servers("http")
                .iter()
                .any(|(_, address)| address == &format!("{name}:{port}")),
            "haproxy.cfg does not name {name}:{port}: {:?}",
            balancer.servers("http")
        );
        // The balancer is the trusted proxy whose X-Forwarded-For counts.
        let trusted = env
            .get("OPENCLAW_PROXY_TRUSTED_PROXIES")
            .expect("trusted proxies");
        let haproxy_address = key(
            key(key(&services["haproxy"], "networks"), "cluster"),
            "ipv4_address",
        )
        .as_str()
        .expect("the balancer's fixed address");
        assert_eq!(trusted, haproxy_address);
    }

    let haproxy = services.get("haproxy").expect("a haproxy service");
    let mounts = strings(key(haproxy, "volumes"));
    assert!(
        mounts
            .iter()
            .any(|mount| mount.starts_with("./haproxy.cfg:")),
        "{mounts:?}"
    );
    let published = strings(key(haproxy, "ports"));
    assert_eq!(published.len(), 1, "{published:?}");
    let inside = published[0].rsplit(':').next().expect("a port");
    assert_eq!(inside.parse::<u16>().ok(), Some(port_of(&balancer.bind())));
}

/// The client port nats.conf sets (4222 when it sets none).
fn nats_conf_port() -> u16 {
    read("nats.conf")
        .lines()
        .find_map(|line| line.trim().strip_prefix("port:"))
        .map_or(4222, |port| port.trim().parse().expect("a port"))
}

#[tokio::test]
async fn nats_conf_has_jetstream_and_reads_its_token_from_the_environment() {
    let conf = read("nats.conf");
    assert!(
        conf.lines()
            .any(|line| line.trim().starts_with("jetstream")),
        "{conf}"
    );
    let server = nats_server_binary(Path::new(env!("CARGO_TARGET_TMPDIR"))).await;
    let check = |token: Option<&str>| {
        let mut command = Command::new(&server);
        command
            .arg("-c")
            .arg(deploy().join("nats.conf"))
            .arg("-t")
            .env_clear();
        if let Some(token) = token {
            command.env("OPENCLAW_PROXY_NATS_TOKEN", token);
        }
        command.output().expect("run nats-server -t")
    };
    let valid = check(Some("a-token-from-secrets-env"));
    assert!(valid.status.success(), "{valid:?}");
    // The token is a reference to the environment, not a value: without
    // the variable the configuration does not load.
    let without = check(None);
    assert!(!without.status.success(), "{without:?}");
    let said = String::from_utf8_lossy(&without.stderr).to_string()
        + &String::from_utf8_lossy(&without.stdout);
    assert!(said.contains("OPENCLAW_PROXY_NATS_TOKEN"), "{said}");
}

// ---------------------------------------------------------------------------
// haproxy.cfg.

/// haproxy.cfg as sections (`frontend x`, `backend y`, ...) of directive lines.
struct HaproxyConfig {
    sections: Vec<(String, Vec<String>)>,
}

fn haproxy() -> HaproxyConfig {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    for line in read("haproxy.cfg").lines() {
        let content = line.split('#').next().unwrap_or("");
        if content.trim().is_empty() {
            continue;
        }
        if content.starts_with(char::is_whitespace) {
            sections
                .last_mut()
                .expect("a directive inside a section")
                .1
                .push(content.split_whitespace().collect::<Vec<_>>().join(" "));
        } else {
            sections.push((content.trim().to_owned(), Vec::new()));
        }
    }
    HaproxyConfig { sections }
}

impl HaproxyConfig {
    fn section(&self, name: &str) -> &[String] {
        &self
            .sections
            .iter()
            .find(|(section, _)| section == name)
            .unwrap_or_else(|| panic!("haproxy.cfg has no section {name:?}"))
            .1
    }

    fn backends(&self) -> Vec<String> {
        self.sections
            .iter()
            .filter_map(|(section, _)| section.strip_prefix("backend "))
            .map(str::to_owned)
            .collect()
    }

    fn frontend(&self) -> &[String] {
        let frontends: Vec<&(String, Vec<String>)> = self
            .sections
            .iter()
            .filter(|(section, _)| section.starts_with("frontend "))
            .collect();
        assert_eq!(frontends.len(), 1, "one frontend");
        &frontends[0].1
    }

    /// An address as HAProxy reads it here: `"${VAR-default}"` is its default.
    fn address(word: &str) -> String {
        let word = word.trim_matches('"');
        match word
            .strip_prefix("${")
            .and_then(|rest| rest.strip_suffix('}'))
        {
            Some(variable) => variable
                .split_once('-')
                .expect("a default value")
                .1
                .to_owned(),
            None => word.to_owned(),
        }
    }

    fn bind(&self) -> String {
        let bind = self
            .frontend()
            .iter()
            .find_map(|line| line.strip_prefix("bind "))
            .expect("bind");
        Self::address(bind.split_whitespace().next().unwrap_or(""))
    }

    /// A backend's servers: (name, default address).
    fn servers(&self, backend: &str) -> Vec<(String, String)> {
        self.section(&format!("backend {backend}"))
            .iter()
            .filter_map(|line| line.strip_prefix("server "))
            .map(|rest| {
                let words: Vec<&str> = rest.split_whitespace().collect();
                (words[0].to_owned(), Self::address(words[1]))
            })
            .collect()
    }

    /// The environment variables the server lines read their address from.
    fn server_variables(&self) -> BTreeSet<String> {
        self.sections
            .iter()
            .flat_map(|(_, lines)| lines)
            .filter_map(|line| line.strip_prefix("server "))
            .filter_map(|rest| rest.split_once("\"${"))
            .filter_map(|(_, rest)| rest.split_once('-'))
            .map(|(variable, _)| variable.to_owned())
            .collect()
    }
}

/// What `path,field(n,/)` gives for `path` (HAProxy counts fields from 1).
fn haproxy_field(path: &str, field: usize) -> &str {
    path.split('/').nth(field - 1).unwrap_or("")
}

#[test]
fn haproxy_hashes_every_request_on_its_session_id() {
    let config = haproxy();
    let frontend = config.frontend();
    let set_var: Vec<&String> = frontend
        .iter()
        .filter(|line| line.starts_with("http-request set-var(txn.session_id) "))
        .collect();

    // The MCP-Session-Id header: MCP by header, and gRPC metadata.
    assert!(
        set_var
            .iter()
            .any(|line| line.contains("req.hdr(mcp-session-id)")),
        "{set_var:#?}"
    );
    // The path segments, checked on the server's own route shapes.
    for (route, example) in [
        ("/v1/mcp/", "/v1/mcp/SESSION"),
        ("/v1/mcp/", "/v1/mcp/SESSION/messages"),
        ("/v1/chat/sessions/", "/v1/chat/sessions/SESSION"),
        ("/v1/chat/sessions/", "/v1/chat/sessions/SESSION/bridge"),
        ("/v1/chat/sessions/", "/v1/chat/sessions/SESSION/tools"),
    ] {
        let rule = set_var
            .iter()
            .find(|line| line.contains(&format!("path_reg ^{route}")))
            .unwrap_or_else(|| panic!("no rule takes the session from {route}: {set_var:#?}"));
        let field: usize = rule
            .split("field(")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("{rule}"));
        assert_eq!(
            haproxy_field(example, field),
            "SESSION",
            "{rule} on {example}"
        );
    }
    // The path rules come after the header's, so they win when both are there.
    let header_at = frontend
        .iter()
        .position(|line| line.contains("req.hdr(mcp-session-id)"));
    let path_at = frontend.iter().position(|line| line.contains("path_reg"));
    assert!(header_at < path_at, "{frontend:#?}");

    // gRPC goes to a backend speaking HTTP/2 to the nodes; the rest to HTTP/1.1.
    assert!(
        frontend
            .iter()
            .any(|line| line
                == "use_backend grpc if { req.hdr(content-type) -m beg application/grpc }"),
        "{frontend:#?}"
    );
    assert!(frontend.iter().any(|line| line == "default_backend http"));
    let backends = config.backends();
    assert_eq!(backends, ["http", "grpc"]);
    for backend in &backends {
        let lines = config.section(&format!("backend {backend}"));
        assert!(
            lines
                .iter()
                .any(|line| line == "balance hash var(txn.session_id)"),
            "backend {backend}: {lines:#?}"
        );
        assert!(
            lines.iter().any(|line| line == "hash-type consistent"),
            "{lines:#?}"
        );
    }
    // The same nodes in the same order: one session, one node, in both.
    assert_eq!(config.servers("http"), config.servers("grpc"));
    assert_eq!(config.servers("http").len(), 3);
    let grpc = config.section("backend grpc");
    assert!(
        grpc.iter()
            .any(|line| line.starts_with("default-server proto h2")),
        "{grpc:#?}"
    );
    // WebSocket bridges and silent calls outlive the default timeouts.
    let defaults = config.section("defaults");
    for (timeout, least) in [("tunnel", 3600), ("server", 3600), ("client", 3600)] {
        let value = defaults
            .iter()
            .find_map(|line| line.strip_prefix(&format!("timeout {timeout} ")))
            .unwrap_or_else(|| panic!("timeout {timeout}"));
        assert!(seconds(value) >= least, "timeout {timeout} {value}");
    }
    // Every node's address is a variable of its own (a test or another
    // deployment points them elsewhere without editing the file).
    assert_eq!(
        config.server_variables(),
        ["LB_NODE1", "LB_NODE2", "LB_NODE3"]
            .map(str::to_owned)
            .into_iter()
            .collect()
    );
}

#[tokio::test]
async fn haproxy_accepts_the_config() {
    let haproxy = match balancer::haproxy(Path::new(env!("CARGO_TARGET_TMPDIR"))).await {
        Ok(haproxy) => haproxy,
        Err(why) => {
            println!("note: {why}; haproxy.cfg was not checked by haproxy -c");
            return;
        }
    };
    let check = async |variables: &[(&str, &str)]| {
        let output = haproxy
            .command()
            .arg("-c")
            .arg("-f")
            .arg(deploy().join("haproxy.cfg"))
            .envs(variables.iter().copied())
            .output()
            .await
            .expect("run haproxy -c");
        let said = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), said)
    };
    // With loopback nodes, as a test on this machine would run it: no
    // warning at all.
    let (valid, said) = check(&[
        ("LB_BIND", "127.0.0.1:18000"),
        ("LB_NODE1", "127.0.0.1:18001"),
        ("LB_NODE2", "127.0.0.1:18002"),
        ("LB_NODE3", "127.0.0.1:18003"),
    ])
    .await;
    assert!(valid, "{said}");
    assert!(
        !said.contains("[WARNING]") && !said.contains("[ALERT]"),
        "{said}"
    );
    // With the compose defaults, whose names resolve only in compose: valid,
    // those servers waiting for their address.
    let (valid, said) = check(&[]).await;
    assert!(valid, "{said}");
    for line in said.lines().filter(|line| line.contains("[WARNING]")) {
        assert!(line.contains("could not resolve address"), "{said}");
    }
}

// ---------------------------------------------------------------------------
// Kubernetes.

/// Every document of the Kubernetes manifests, by kind.
fn kubernetes() -> BTreeMap<String, Yaml> {
    let kustomization = yaml("kubernetes/kustomization.yaml");
    let resources = strings(key(&kustomization[0], "resources"));
    assert!(!resources.is_empty());
    let mut kinds = BTreeMap::new();
    for resource in resources {
        for doc in yaml(&format!("kubernetes/{resource}")) {
            let kind = key(&doc, "kind").as_str().expect("kind").to_owned();
            assert!(kinds.insert(kind.clone(), doc).is_none(), "two {kind}s");
        }
    }
    kinds
}

/// The one container of the Deployment.
fn container(deployment: &Yaml) -> &Yaml {
    let containers = key(
        key(key(key(deployment, "spec"), "template"), "spec"),
        "containers",
    )
    .as_vec()
    .expect("containers");
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// A container's literal environment (`value:` entries).
fn container_env(container: &Yaml) -> BTreeMap<String, String> {
    key(container, "env")
        .as_vec()
        .expect("env")
        .iter()
        .filter_map(|entry| {
            Some((
                key(entry, "name").as_str()?.to_owned(),
                scalar(key(entry, "value"))?,
            ))
        })
        .collect()
}

/// A named or numbered container port, as a number.
fn container_port(container: &Yaml, port: &Yaml) -> u16 {
    let ports = key(container, "ports").as_vec().expect("ports");
    let number = match port {
        Yaml::Integer(number) => *number,
        Yaml::String(name) => ports
            .iter()
            .find(|p| key(p, "name").as_str() == Some(name))
            .and_then(|p| key(p, "containerPort").as_i64())
            .unwrap_or_else(|| panic!("no container port named {name}")),
        other => panic!("port {other:?}"),
    };
    u16::try_from(number).expect("a port")
}

fn labels_match(selector: &Yaml, labels: &Yaml) -> bool {
    let selector = key(selector, "matchLabels")
        .as_hash()
        .or_else(|| selector.as_hash())
        .expect("a selector");
    !selector.is_empty()
        && selector
            .iter()
            .all(|(name, value)| &labels[name.as_str().unwrap_or("")] == value)
}

#[test]
fn kubernetes_probes_ports_and_shutdown_match_the_server() {
    let kinds = kubernetes();
    let deployment = &kinds["Deployment"];
    let pod = key(key(deployment, "spec"), "template");
    let container = container(deployment);
    let env = container_env(container);
    let port = listen_port(&env);

    let readiness = key(key(container, "readinessProbe"), "httpGet");
    let liveness = key(key(container, "livenessProbe"), "httpGet");
    assert_eq!(key(readiness, "path").as_str(), Some("/ready"));
    assert_eq!(key(liveness, "path").as_str(), Some("/health"));
    assert_eq!(container_port(container, key(readiness, "port")), port);
    assert_eq!(container_port(container, key(liveness, "port")), port);

    // preStop sleeps as long as the shutdown delay, and the grace period
    // holds both.
    let delay: i64 = env
        .get("OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS")
        .expect("a shutdown delay")
        .parse()
        .expect("seconds");
    let sleep = key(
        key(key(key(container, "lifecycle"), "preStop"), "sleep"),
        "seconds",
    )
    .as_i64()
    .expect("preStop sleep (no shell in the image for an exec sleep)");
    assert_eq!(sleep, delay);
    let grace = key(key(pod, "spec"), "terminationGracePeriodSeconds")
        .as_i64()
        .expect("terminationGracePeriodSeconds");
    assert!(grace > sleep + delay, "{grace} <= {sleep} + {delay}");

    // Secrets come from a Secret the manifests only reference.
    let secret = key(key(&key(container, "envFrom")[0], "secretRef"), "name");
    assert!(secret.as_str().is_some(), "envFrom secretRef");
    assert!(
        !kinds.contains_key("Secret"),
        "a Secret with values in the manifests"
    );

    // The Service reaches that port on these Pods; the budget counts them.
    let service = &kinds["Service"];
    let service_port = &key(key(service, "spec"), "ports")[0];
    assert_eq!(
        container_port(container, key(service_port, "targetPort")),
        port
    );
    let pod_labels = key(key(pod, "metadata"), "labels");
    assert!(labels_match(
        key(key(service, "spec"), "selector"),
        pod_labels
    ));
    assert!(labels_match(
        key(key(deployment, "spec"), "selector"),
        pod_labels
    ));
    let budget = &kinds["PodDisruptionBudget"];
    assert!(labels_match(
        key(key(budget, "spec"), "selector"),
        pod_labels
    ));

    // NATS: the official chart, with JetStream, named beside the manifests.
    let readme = read("kubernetes/README.md");
    for wanted in ["nats-io/k8s", "nats/nats", "JetStream", "nats-values.yaml"] {
        assert!(readme.contains(wanted), "README.md lacks {wanted}");
    }
    let values = &yaml("kubernetes/nats-values.yaml")[0];
    assert_eq!(
        key(key(key(values, "config"), "jetstream"), "enabled").as_bool(),
        Some(true)
    );
    let replicas = key(key(key(values, "config"), "cluster"), "replicas").as_i64();
    let kv_replicas = env
        .get("OPENCLAW_PROXY_NATS_KV_REPLICAS")
        .and_then(|n| n.parse().ok());
    assert_eq!(replicas, kv_replicas, "KV replicas as many as NATS servers");
    let nats_host = env
        .get("OPENCLAW_PROXY_NATS_URL")
        .and_then(|url| url.strip_prefix("nats://"))
        .expect("nats://");
    assert!(
        readme.contains("helm install nats "),
        "the release named as the URL's host {nats_host}"
    );
    assert_eq!(nats_host, "nats:4222");
}

#[test]
fn kustomize_renders_the_manifests_when_kubectl_is_installed() {
    let output = match Command::new("kubectl")
        .arg("kustomize")
        .arg(deploy().join("kubernetes"))
        .output()
    {
        Ok(output) => output,
        Err(_) => {
            println!("note: kubectl is not installed; deploy/kubernetes was not rendered");
            return;
        }
    };
    assert!(output.status.success(), "{output:?}");
    let rendered = YamlLoader::load_from_str(&String::from_utf8_lossy(&output.stdout))
        .expect("kustomize renders YAML");
    let kinds: BTreeSet<&str> = rendered
        .iter()
        .filter_map(|doc| key(doc, "kind").as_str())
        .collect();
    assert_eq!(
        kinds,
        ["Deployment", "PodDisruptionBudget", "Service"]
            .into_iter()
            .collect()
    );
    let image = rendered
        .iter()
        .find(|doc| key(doc, "kind").as_str() == Some("Deployment"))
        .map(|deployment| key(container(deployment), "image").clone());
    assert!(
        image
            .as_ref()
            .and_then(Yaml::as_str)
            .is_some_and(|image| image.contains('/')),
        "the images entry sets the image: {image:?}"
    );
}

// ---------------------------------------------------------------------------
// systemd.

/// The unit's `[Service]` directives, each with every value it is given.
fn service_unit() -> BTreeMap<String, Vec<String>> {
    let mut directives: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in read("systemd/openclaw-proxy.service").lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_owned();
        } else if section == "[Service]" {
            let (name, value) = line.split_once('=').expect("Name=value");
            directives
                .entry(name.to_owned())
                .or_default()
                .push(value.to_owned());
        }
    }
    directives
}

/// The variables the unit's `Environment=` lines set.
fn unit_env(unit: &BTreeMap<String, Vec<String>>) -> BTreeMap<String, String> {
    unit.get("Environment")
        .into_iter()
        .flatten()
        .flat_map(|line| line.split_whitespace())
        .map(|pair| {
            let (name, value) = pair.trim_matches('"').split_once('=').expect("NAME=value");
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

#[test]
fn the_systemd_unit_is_hardened_and_stops_after_the_shutdown_delay() {
    let unit = service_unit();
    let one = |name: &str| -> &str {
        let values = unit.get(name).unwrap_or_else(|| panic!("no {name}="));
        values.last().expect("a value")
    };
    for (name, wanted) in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("PrivateTmp", "yes"),
        ("ProtectHome", "yes"),
        ("CapabilityBoundingSet", ""),
        ("MemoryDenyWriteExecute", "yes"),
        ("KillSignal", "SIGTERM"),
    ] {
        assert_eq!(one(name), wanted, "{name}=");
    }
    let families: BTreeSet<&str> = one("RestrictAddressFamilies").split_whitespace().collect();
    assert!(
        families
            .iter()
            .all(|family| ["AF_INET", "AF_INET6", "AF_UNIX"].contains(family)),
        "{families:?}"
    );
    assert_eq!(unit["SystemCallFilter"][0], "@system-service");
    assert!(
        one("ExecStart").ends_with("/openclaw-proxy"),
        "{}",
        one("ExecStart")
    );
    let env_file = one("EnvironmentFile");
    assert!(
        !env_file.starts_with('-'),
        "the secrets file is required: {env_file}"
    );

    let env = unit_env(&unit);
    assert!(env.contains_key("OPENCLAW_PROXY_LISTEN"));
    let delay = seconds(&env["OPENCLAW_PROXY_SHUTDOWN_DELAY_SECONDS"]);
    let stop = seconds(one("TimeoutStopSec"));
    assert!(
        stop > delay,
        "TimeoutStopSec {stop} <= shutdown delay {delay}"
    );
}

#[tokio::test]
async fn systemd_analyze_verifies_the_unit_with_the_real_binary_when_installed() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("note: systemd-analyze is not installed; the unit was not verified");
        return;
    }
    // The unit as installed, but for where the binary and the secrets are.
    let binary = proxy_binary().await;
    let text = read("systemd/openclaw-proxy.service")
        .lines()
        .map(|line| {
            if line.starts_with("ExecStart=") {
                format!("ExecStart={}", binary.display())
            } else if line.starts_with("EnvironmentFile=") {
                "EnvironmentFile=-/nonexistent/secrets.env".to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deploy-systemd");
    std::fs::create_dir_all(&folder).expect("mkdir");
    let path = folder.join("openclaw-proxy.service");
    std::fs::write(&path, text).expect("write the unit");

    let verify = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("run systemd-analyze verify");
    let said = String::from_utf8_lossy(&verify.stderr);
    // It reports unknown keys and bad values on stderr, exiting 0.
    assert!(verify.status.success() && said.trim().is_empty(), "{said}");

    // The exposure systemd itself rates: "OK" (at most 2.0 of 10).
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
        .arg(&path)
        .output()
        .expect("run systemd-analyze security");
    assert!(
        security.status.success(),
        "{}",
        String::from_utf8_lossy(&security.stdout)
    );
}

// ---------------------------------------------------------------------------
// Across the recipes.

#[tokio::test]
async fn every_setting_the_recipes_name_is_one_the_server_has() {
    let settings = settings().await;
    let mut unknown = Vec::new();
    let mut named = 0;
    for (file, text) in recipe_files() {
        for (line, name) in named_settings(&text) {
            named += 1;
            if !settings.contains(&name) {
                unknown.push(format!("deploy/{file}:{line}: {name}"));
            }
        }
    }
    assert!(named > 20, "the recipes name {named} settings");
    assert!(
        unknown.is_empty(),
        "not settings of openclaw-proxy:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn no_recipe_writes_a_secret() {
    let mut found = Vec::new();
    for (file, text) in recipe_files() {
        for (line, secret) in inline_secrets_in_text(&text) {
            found.push(format!("deploy/{file}:{line}: {secret}"));
        }
        if file.ends_with(".yaml") || file.ends_with(".yml") {
            let mut in_yaml = Vec::new();
            for doc in yaml(&file) {
                inline_secrets_in_yaml(&doc, &mut in_yaml);
            }
            found.extend(
                in_yaml
                    .into_iter()
                    .map(|secret| format!("deploy/{file}: {secret}")),
            );
        }
    }
    let image = env_of(containerfile().last().expect("a stage"));
    for (name, value) in image {
        if is_secret_name(&name) && !is_no_secret_value(&value) {
            found.push(format!("deploy/Containerfile: ENV {name}"));
        }
    }
    assert!(
        found.is_empty(),
        "secrets written inline:\n{}",
        found.join("\n")
    );
}

/// The scanners find what they are for: a test that cannot fail proves
/// nothing.
#[test]
fn the_secret_scanners_find_inline_secrets() {
    for line in [
        "Environment=OPENCLAW_PROXY_APP_TOKEN=abc123",
        "ENV OPENCLAW_PROXY_REQUEST_STATE_KEY=k",
        "    OPENCLAW_PROXY_NATS_PASSWORD: hunter2",
        "  token: s3cr3t",
        "OPENCLAW_PROXY_OPENCLAW_TOKEN=\"quoted\"",
    ] {
        assert_eq!(inline_secrets_in_text(line).len(), 1, "{line}");
    }
    for line in [
        "OPENCLAW_PROXY_APP_TOKEN=",
        "token: $OPENCLAW_PROXY_NATS_TOKEN",
        "Environment=OPENCLAW_PROXY_TLS_KEY_FILE=%d/tls.key",
        "set OPENCLAW_PROXY_APP_TOKEN in secrets.env",
        "envFrom:",
        "  - secretRef:",
    ] {
        assert!(inline_secrets_in_text(line).is_empty(), "{line}");
    }
    for document in [
        "env:\n  - name: OPENCLAW_PROXY_APP_TOKEN\n    value: abc\n",
        "environment:\n  - OPENCLAW_PROXY_NATS_TOKEN=abc\n",
        "environment:\n  OPENCLAW_PROXY_REQUEST_STATE_KEY: 12345\n",
        "kind: Secret\nstringData:\n  anything: here\n",
    ] {
        let mut found = Vec::new();
        for doc in YamlLoader::load_from_str(document).expect("YAML") {
            inline_secrets_in_yaml(&doc, &mut found);
        }
        assert!(!found.is_empty(), "{document}");
    }
}

/// The values the recipes give, with a filled-in secrets file, are accepted
/// by the binary: it parses every setting before `--probe` runs, so a value
/// it refuses exits 2 with clap's message instead of the probe's 1.
#[tokio::test]
async fn the_binary_accepts_every_value_the_recipes_give() {
    let binary = proxy_binary().await;
    let secrets: BTreeMap<String, String> = read("secrets.env.example")
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (name, _) = line.split_once('=').expect("NAME=");
            (
                name.to_owned(),
                "0123456789abcdef0123456789abcdef".to_owned(),
            )
        })
        .collect();
    assert!(
        secrets.contains_key("OPENCLAW_PROXY_APP_TOKEN"),
        "{secrets:?}"
    );

    let services = compose_services();
    let mut recipes: Vec<(String, BTreeMap<String, String>)> = vec![
        (
            "Containerfile".into(),
            env_of(containerfile().last().expect("a stage")),
        ),
        ("systemd unit".into(), unit_env(&service_unit())),
        (
            "kubernetes Deployment".into(),
            container_env(container(&kubernetes()["Deployment"])),
        ),
    ];
    for (name, node) in compose_nodes(&services) {
        recipes.push((format!("compose {name}"), compose_env(&node)));
    }
    for (recipe, env) in recipes {
        assert!(!env.is_empty(), "{recipe} sets nothing");
        let output = Command::new(&binary)
            .args(["--probe", "http://127.0.0.1:9/ready"])
            .env_clear()
            .envs(&secrets)
            .envs(&env)
            .output()
            .expect("run the binary");
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{recipe}: {said}");
        assert!(said.contains("cannot connect"), "{recipe}: {said}");
    }
}

/// Every probe path in the recipes, tried on a running server: readiness
/// probes answer `ready`, liveness probes `ok`, and the image's health
/// check, run as the image runs it, exits 0.
#[tokio::test]
async fn every_probe_in_the_recipes_answers_on_a_running_server() {
    let mut readiness = Vec::new();
    let mut liveness = Vec::new();
    let check = healthcheck();
    let image_path = check[2]
        .splitn(4, '/')
        .nth(3)
        .map(|path| format!("/{path}"))
        .expect("a path");
    readiness.push(("Containerfile HEALTHCHECK", image_path.clone()));
    let deployment = &kubernetes()["Deployment"];
    let container = container(deployment);
    for (probe, list) in [
        ("readinessProbe", &mut readiness),
        ("livenessProbe", &mut liveness),
    ] {
        let path = key(key(key(container, probe), "httpGet"), "path")
            .as_str()
            .expect("a path")
            .to_owned();
        list.push((probe, path));
    }
    let balancer = haproxy();
    let http_check = balancer
        .section("backend http")
        .iter()
        .find_map(|line| line.strip_prefix("http-check send "))
        .expect("http-check send")
        .split_whitespace()
        .skip_while(|word| *word != "uri")
        .nth(1)
        .expect("uri")
        .to_owned();
    readiness.push(("haproxy http-check", http_check));

    let server = ServerBuilder::default().spawn().await;
    for (what, path) in &readiness {
        let answer = openclaw_proxy_tests::http_client()
            .get(format!("{}{path}", server.url()))
            .send()
            .await
            .expect("GET");
        assert_eq!(answer.status(), 200, "{what} {path}");
        assert_eq!(answer.text().await.expect("body"), "ready", "{what} {path}");
    }
    for (what, path) in &liveness {
        let answer = openclaw_proxy_tests::http_client()
            .get(format!("{}{path}", server.url()))
            .send()
            .await
            .expect("GET");
        assert_eq!(answer.status(), 200, "{what} {path}");
        assert_eq!(answer.text().await.expect("body"), "ok", "{what} {path}");
    }
    // The HEALTHCHECK command itself, pointed at this server's port.
    let output = Command::new(proxy_binary().await)
        .args(&check[1..2])
        .arg(format!("{}{image_path}", server.url()))
        .output()
        .expect("run the health check");
    assert!(output.status.success(), "{output:?}");
}

#[test]
fn the_readme_links_every_recipe() {
    let readme = std::fs::read_to_string(deploy().join("../README.md")).expect("README.md");
    let section = readme
        .split("\n## Deploying")
        .nth(1)
        .expect("a Deploying section")
        .split("\n## ")
        .next()
        .unwrap_or("");
    for recipe in [
        "deploy/Containerfile",
        "deploy/compose.yaml",
        "deploy/haproxy.cfg",
        "deploy/kubernetes",
        "deploy/systemd/openclaw-proxy.service",
        "deploy/secrets.env.example",
    ] {
        assert!(
            section.contains(&format!("({recipe}")),
            "the Deploying section does not link {recipe}"
        );
    }
}

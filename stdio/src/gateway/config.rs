//! Gateway mode settings: flags and environment over the JSON config file
//! (`OPENCLAW_MCP_CONFIG`), resolved once at start. Which tools are served is
//! settled later, after discovery ([`super::tools::assemble`]); what can be
//! checked without the Gateway (the token, the custom tool files, and with
//! discovery off the built-in names) is checked here, so a bad setting stops
//! the binary at once with status 2.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::tools::{ToolDef, ToolFileError, builtin_tools, load_tool_file};
use crate::limits::{LimitArgs, Limits};

/// The Gateway's default address.
pub const DEFAULT_GATEWAY_URL: &str = "http://127.0.0.1:18789";

/// `openclaw-proxy-stdio gateway`: serve the OpenClaw Gateway's tools over stdio.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct GatewayArgs {
    /// Base URL of the OpenClaw Gateway [default: http://127.0.0.1:18789].
    #[arg(long, env = "OPENCLAW_GATEWAY_URL")]
    pub gateway_url: Option<String>,
    /// Bearer token of the Gateway (required, here or in the config file).
    #[arg(long, env = "OPENCLAW_GATEWAY_TOKEN", hide_env_values = true)]
    pub gateway_token: Option<String>,
    /// Tools to expose, comma-separated [default: all the Gateway serves, or all built-ins].
    #[arg(long, env = "OPENCLAW_MCP_TOOLS", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Ask the Gateway which tools it serves (on), or serve the built-in list (off) [default: on].
    #[arg(long, env = "OPENCLAW_MCP_DISCOVERY", value_parser = parse_switch)]
    pub discovery: Option<bool>,
    /// JSON config file: {"gateway": {"url", "token"}, "tools": [...], "customTools": [...]}.
    #[arg(long, env = "OPENCLAW_MCP_CONFIG")]
    pub config: Option<PathBuf>,
    /// Custom tool files, comma-separated; each holds one tool or {"tools": [...]}.
    #[arg(long, env = "OPENCLAW_MCP_CUSTOM_TOOLS", value_delimiter = ',')]
    pub custom_tools: Option<Vec<PathBuf>>,
    /// Session key used when a call gives none.
    #[arg(long, env = "OPENCLAW_MCP_SESSION_KEY")]
    pub session_key: Option<String>,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// The resolved settings.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Base URL of the Gateway, without trailing slash.
    pub url: String,
    /// Bearer token of the Gateway.
    pub token: String,
    /// The built-in tools: served without discovery, and the schemas of the
    /// discovered tools we know.
    pub builtins: Vec<ToolDef>,
    /// `OPENCLAW_MCP_TOOLS`: the names to serve, in order (`None`: all).
    pub selection: Option<Vec<String>>,
    /// The custom tools, added after the others or replacing one of theirs.
    pub custom: Vec<ToolDef>,
    /// Whether to ask the Gateway which tools it serves.
    pub discovery: bool,
    /// Session key used when a call gives none.
    pub default_session_key: Option<String>,
    /// Line limit, HTTP timeouts and answer size.
    pub limits: Limits,
}

/// Why gateway mode cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no Gateway token: set OPENCLAW_GATEWAY_TOKEN (or --gateway-token, or gateway.token in the config file)"
    )]
    MissingToken,
    #[error("config file {path}: {reason}")]
    ConfigFile { path: String, reason: String },
    #[error(transparent)]
    ToolFile(#[from] ToolFileError),
    #[error(
        "unknown built-in tool {name:?} in OPENCLAW_MCP_TOOLS: choose from {available} (or turn discovery on to serve what the Gateway offers)"
    )]
    UnknownTool { name: String, available: String },
    #[error(
        "tool {0:?} is defined twice in the custom tool files (a custom tool may replace a built-in or discovered tool, not another custom one)"
    )]
    DuplicateTool(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    #[serde(default)]
    gateway: FileGateway,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default, rename = "customTools")]
    custom_tools: Option<Vec<PathBuf>>,
    #[serde(default)]
    discovery: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGateway {
    url: Option<String>,
    token: Option<String>,
}

fn read_file_config(path: &Path) -> Result<FileConfig, ConfigError> {
    let error = |reason: String| ConfigError::ConfigFile {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(format!("cannot read it: {e}")))?;
    serde_json::from_str(&text).map_err(|e| error(e.to_string()))
}

/// `on`/`off` and the usual spellings of a boolean.
fn parse_switch(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        other => Err(format!("{other:?} is not on or off")),
    }
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

impl GatewayArgs {
    /// Resolves flags, environment and config file into settings.
    pub fn resolve(self) -> Result<GatewayConfig, ConfigError> {
        let file = match &self.config {
            Some(path) => read_file_config(path)?,
            None => FileConfig::default(),
        };
        let base_dir = self
            .config
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let url = non_empty(self.gateway_url)
            .or(non_empty(file.gateway.url))
            .unwrap_or_else(|| DEFAULT_GATEWAY_URL.to_owned())
            .trim_end_matches('/')
            .to_owned();
        let token = non_empty(self.gateway_token)
            .or(non_empty(file.gateway.token))
            .ok_or(ConfigError::MissingToken)?;

        let discovery = self.discovery.or(file.discovery).unwrap_or(true);
        let builtins = builtin_tools();
        let selection: Option<Vec<String>> = self.tools.or(file.tools).map(|names| {
            names
                .into_iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect()
        });
        if !discovery && let Some(names) = &selection {
            for name in names {
                if !builtins.iter().any(|tool| &tool.name == name) {
                    return Err(ConfigError::UnknownTool {
                        name: name.clone(),
                        available: builtins
                            .iter()
                            .map(|t| t.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
            }
        }
        let custom_paths: Vec<PathBuf> = match self.custom_tools {
            Some(paths) => paths,
            None => file
                .custom_tools
                .unwrap_or_default()
                .into_iter()
                .map(|path| {
                    if path.is_relative() {
                        base_dir.join(path)
                    } else {
                        path
                    }
                })
                .collect(),
        };
        let mut custom: Vec<ToolDef> = Vec::new();
        for path in custom_paths.iter().filter(|p| !p.as_os_str().is_empty()) {
            for tool in load_tool_file(path)? {
                if custom.iter().any(|existing| existing.name == tool.name) {
                    return Err(ConfigError::DuplicateTool(tool.name));
                }
                custom.push(tool);
            }
        }
        Ok(GatewayConfig {
            url,
            token,
            builtins,
            selection,
            custom,
            discovery,
            default_session_key: non_empty(self.session_key),
            limits: self.limits.resolve(),
        })
    }
}

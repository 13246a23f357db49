//! [`AppBuilder`]: an app's settings and declarations collected one call at
//! a time, with their defaults, and checked once by [`AppBuilder::build`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use backon::ExponentialBuilder;
use openclaw_proxy_proto::v1::{SessionMetadata, SessionOwner};

use super::{App, SessionCallback};
use crate::call::CallContext;
use crate::completion::{self, CompletionHandler, CompletionOutput, CompletionRequest};
use crate::declarations::Declarations;
use crate::error::AppError;
use crate::mcp_error::McpError;
use crate::prompt::Prompt;
use crate::proxy::{Proxy, ProxySettings, SessionInfo};
use crate::resource::{Resource, ResourceTemplate};
use crate::tool::Tool;

/// Collects an app's settings and declarations; [`AppBuilder::build`]
/// checks them.
#[must_use]
pub struct AppBuilder {
    settings: ProxySettings,
    metadata: SessionMetadata,
    owner: Option<SessionOwner>,
    name: String,
    tools: Vec<Tool>,
    resources: Vec<Resource>,
    resource_templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    completion: Option<Arc<CompletionHandler>>,
    max_concurrent_calls: usize,
    max_queued_calls: usize,
    on_session: Option<Arc<SessionCallback>>,
    min_delay: Duration,
    max_delay: Duration,
    idle_timeout: Duration,
}

impl AppBuilder {
    /// The defaults, for the proxy at `proxy_url`.
    pub(super) fn new(proxy_url: String) -> Self {
        Self {
            settings: ProxySettings {
                url: proxy_url,
                app_token: None,
                mcp_base_url: None,
                ca_certificate_pem: None,
            },
            metadata: SessionMetadata {
                device_id: "unknown-device".to_owned(),
                device_name: String::new(),
                app_version: "unknown".to_owned(),
                chat_id: String::new(),
            },
            owner: None,
            name: String::new(),
            tools: Vec::new(),
            resources: Vec::new(),
            resource_templates: Vec::new(),
            prompts: Vec::new(),
            completion: None,
            max_concurrent_calls: 32,
            max_queued_calls: 32,
            on_session: None,
            min_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(70),
        }
    }

    /// The app token (`OPENCLAW_PROXY_APP_TOKEN` on the proxy); empty or
    /// unset means none.
    pub fn app_token(mut self, token: impl Into<String>) -> Self {
        self.settings.app_token = Some(token.into());
        self
    }

    /// A stable id of the device the app runs on (required by the proxy;
    /// defaults to `"unknown-device"`).
    pub fn device_id(mut self, device_id: impl Into<String>) -> Self {
        self.metadata.device_id = device_id.into();
        self
    }

    /// A human-readable device name.
    pub fn device_name(mut self, device_name: impl Into<String>) -> Self {
        self.metadata.device_name = device_name.into();
        self
    }

    /// The app's version (required by the proxy; defaults to `"unknown"`).
    pub fn app_version(mut self, app_version: impl Into<String>) -> Self {
        self.metadata.app_version = app_version.into();
        self
    }

    /// The chat this session belongs to.
    pub fn chat_id(mut self, chat_id: impl Into<String>) -> Self {
        self.metadata.chat_id = chat_id.into();
        self
    }

    /// Binds the session to the OAuth subject `subject` (the `sub` of the
    /// user's access tokens) of `issuer` (empty: the issuer the proxy is
    /// configured with). Such a user's MCP client, signed in, then reaches
    /// this session and no other; the session's `mcp_token` works as before.
    pub fn owner(mut self, subject: impl Into<String>, issuer: impl Into<String>) -> Self {
        self.owner = Some(SessionOwner {
            subject: subject.into(),
            issuer: issuer.into(),
        });
        self
    }

    /// The session's short name in its owner's one-URL view, where its
    /// tools and prompts appear as `{name}__{tool}` (1 to 32 characters of
    /// A-Z, a-z, 0-9, `_`, `-`, no `__`). Unset: the proxy makes one from
    /// the device name. The proxy adds `_2`, `_3`, ... when another live
    /// session of the same owner holds the name already.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a resource: a document at a fixed URI.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }

    /// Adds a resource template: documents addressed by a URI template.
    /// A URI that no resource has exactly goes to the first template it
    /// fits, in the order they were added.
    pub fn resource_template(mut self, template: ResourceTemplate) -> Self {
        self.resource_templates.push(template);
        self
    }

    /// Adds a prompt.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompts.push(prompt);
        self
    }

    /// Answers `completion/complete` (suggestions for a prompt's argument or
    /// a template's variable) with `handler`. It is only asked about
    /// declared prompts and templates and their own arguments. Without one,
    /// every question gets no suggestions.
    pub fn completion<R, F, Fut>(mut self, handler: F) -> Self
    where
        R: CompletionOutput,
        F: Fn(CompletionRequest, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, McpError>> + Send + 'static,
    {
        self.completion = Some(completion::boxed(handler));
        self
    }

    /// How many calls run at once (default 32), MCP requests such as
    /// `resources/read` included. Calls beyond that wait, up to as many
    /// again; past that they are answered at once with an error saying the
    /// app is busy.
    pub fn max_concurrent_calls(mut self, limit: usize) -> Self {
        self.max_concurrent_calls = limit.max(1);
        self.max_queued_calls = self.max_concurrent_calls;
        self
    }

    /// Called with the session's id, MCP URL and MCP token once the session
    /// is created and its bridge attached, and again whenever it is
    /// re-created (the proxy restarted or forgot it). Runs on the serve loop:
    /// keep it short (store, print, send).
    pub fn on_session(mut self, callback: impl Fn(&SessionInfo) + Send + Sync + 'static) -> Self {
        self.on_session = Some(Arc::new(callback));
        self
    }

    /// The reconnection delays: exponential from `min` to `max`, each with
    /// random jitter so that many apps do not return to a restarted proxy at
    /// the same instant (defaults 250 ms and 30 s).
    pub fn reconnect_delays(mut self, min: Duration, max: Duration) -> Self {
        self.min_delay = min;
        self.max_delay = max.max(min);
        self
    }

    /// How long the bridge may stay silent before the app presumes the
    /// connection dead and reconnects (default 70 s; the proxy pings every
    /// 20 s by default).
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The base of the reported MCP URL, when OpenClaw reaches the proxy at
    /// another address than the app does (a reverse proxy); defaults to the
    /// proxy URL.
    pub fn mcp_base_url(mut self, url: impl Into<String>) -> Self {
        self.settings.mcp_base_url = Some(url.into());
        self
    }

    /// Trusts this PEM certificate authority for `https://` proxy URLs, in
    /// addition to the public web roots (a private CA, a self-signed proxy).
    pub fn tls_ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.settings.ca_certificate_pem = Some(pem.into());
        self
    }

    /// Checks the settings and declarations; nothing is dialled yet.
    pub fn build(self) -> Result<App, AppError> {
        if !self.name.is_empty() {
            openclaw_proxy_proto::session_name::validate(&self.name)?;
        }
        let declarations = Declarations::new(
            self.tools,
            self.resources,
            self.resource_templates,
            self.prompts,
            self.completion,
        )?;
        let proxy = Proxy::new(self.settings)?;
        Ok(App {
            proxy,
            metadata: self.metadata,
            owner: self.owner,
            name: self.name,
            declarations,
            max_concurrent_calls: self.max_concurrent_calls,
            max_queued_calls: self.max_queued_calls,
            on_session: self.on_session,
            backoff: ExponentialBuilder::default()
                .with_min_delay(self.min_delay)
                .with_max_delay(self.max_delay)
                .with_factor(2.0)
                .with_jitter()
                .without_max_times(),
            idle_timeout: self.idle_timeout,
        })
    }
}

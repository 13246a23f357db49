//! Declaring resources: documents the app lets an agent read (a note, a
//! ticket, a file), each at a URI, and resource templates, families of them
//! addressed by a URI template (`notes:///{id}`).
//!
//! The proxy lists them from the declaration, without asking the app; only
//! a `resources/read` reaches the app, which answers it with the handler of
//! the resource whose URI is the one asked for, or else with the first
//! template the URI fits. A handler returns typed contents
//! ([`ResourceContents`], [`ReadResourceResult`]) or, for anything those do
//! not cover, the raw result object as a `serde_json::Value`.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use openclaw_proxy_proto::v1::{ResourceDefinition, ResourceTemplateDefinition};
use serde::Serialize;
use serde_json::Value;

use crate::call::CallContext;
use crate::content::{Annotations, Icon, ResourceContents, ResourceLink, json_text};
use crate::mcp_error::McpError;
use crate::tool::BoxFuture;
use crate::uri_template::UriTemplate;

/// A `resources/read` as a handler sees it: the URI asked for and, for a
/// template, its variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadRequest {
    uri: String,
    variables: BTreeMap<String, String>,
}

impl ReadRequest {
    pub(crate) fn new(uri: String, variables: BTreeMap<String, String>) -> Self {
        Self { uri, variables }
    }

    /// The URI the client asked to read.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// One variable of the template the URI fits, percent-decoded (`None`
    /// for a plain resource, or a name the template does not have).
    pub fn variable(&self, name: &str) -> Option<&str> {
        self.variables.get(name).map(String::as_str)
    }

    /// All of the template's variables.
    pub fn variables(&self) -> &BTreeMap<String, String> {
        &self.variables
    }
}

/// Who may keep a result for its `ttlMs` (MCP 2026-07-28, SEP-2549).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// Any client, for any user.
    Public,
    /// Only the client that asked, for its user.
    Private,
}

/// The result of `resources/read`: one or more contents (a resource may
/// hold several parts, each with its own URI), and optionally how long it
/// may be cached.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[must_use]
pub struct ReadResourceResult {
    contents: Vec<ResourceContents>,
    #[serde(rename = "ttlMs", skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    #[serde(rename = "cacheScope", skip_serializing_if = "Option::is_none")]
    cache_scope: Option<CacheScope>,
}

impl ReadResourceResult {
    /// A result holding these contents.
    pub fn new(contents: impl IntoIterator<Item = ResourceContents>) -> Self {
        Self {
            contents: contents.into_iter().collect(),
            ttl_ms: None,
            cache_scope: None,
        }
    }

    /// How long, in milliseconds, a client may treat the result as fresh
    /// (`ttlMs`; MCP 2026-07-28 asks every read result for it and
    /// [`cache_scope`](Self::cache_scope): see
    /// [`CallContext::protocol_version`]). Left out unless set.
    pub fn ttl_ms(mut self, ttl_ms: u64) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self
    }

    /// Who may cache it (`cacheScope`). Left out unless set.
    pub fn cache_scope(mut self, scope: CacheScope) -> Self {
        self.cache_scope = Some(scope);
        self
    }
}

/// What a read handler may return: the typed result, one or several
/// contents, or the raw result object (`{"contents": [...]}`) as JSON.
pub trait ReadOutput: Send + 'static {
    /// The `resources/read` result object as JSON text.
    fn into_json(self) -> serde_json::Result<String>;
}

impl ReadOutput for ReadResourceResult {
    fn into_json(self) -> serde_json::Result<String> {
        serde_json::to_string(&self)
    }
}

impl ReadOutput for ResourceContents {
    fn into_json(self) -> serde_json::Result<String> {
        ReadResourceResult::new([self]).into_json()
    }
}

impl ReadOutput for Vec<ResourceContents> {
    fn into_json(self) -> serde_json::Result<String> {
        ReadResourceResult::new(self).into_json()
    }
}

impl ReadOutput for Value {
    fn into_json(self) -> serde_json::Result<String> {
        serde_json::to_string(&self)
    }
}

type ReadHandler =
    dyn Fn(ReadRequest, CallContext) -> BoxFuture<Result<String, McpError>> + Send + Sync;

fn boxed<R, F, Fut>(handler: F) -> Arc<ReadHandler>
where
    R: ReadOutput,
    F: Fn(ReadRequest, CallContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, McpError>> + Send + 'static,
{
    Arc::new(
        move |request: ReadRequest, call: CallContext| -> BoxFuture<_> {
            let reading = handler(request, call);
            Box::pin(async move {
                let output = reading.await?;
                output.into_json().map_err(|error| {
                    McpError::internal(format!(
                        "The resource's contents are not valid JSON: {error}"
                    ))
                })
            })
        },
    )
}

/// Refuses here what the proxy would refuse at registration: a URI (or
/// URI template) needs a scheme (`notes:`, `file://`, ...) and holds no
/// whitespace or control characters.
fn check_uri(uri: &str) -> Result<(), String> {
    let scheme = uri.split_once(':').map(|(scheme, _)| scheme);
    let valid_scheme = scheme.is_some_and(|scheme| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
    });
    if !valid_scheme {
        return Err("it needs a scheme, such as \"notes:\" or \"file://\"".to_owned());
    }
    if uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it holds whitespace or control characters; percent-encode them".to_owned());
    }
    Ok(())
}

/// What resources and templates declare alike besides their address.
#[derive(Clone, Debug, Default)]
struct Described {
    title: String,
    description: String,
    mime_type: String,
    annotations: Option<Annotations>,
    icons: Vec<Icon>,
}

impl Described {
    fn annotations_json(&self) -> String {
        self.annotations.as_ref().map(json_text).unwrap_or_default()
    }

    fn icons_json(&self) -> String {
        if self.icons.is_empty() {
            String::new()
        } else {
            json_text(&self.icons)
        }
    }
}

/// One document the app serves at a fixed URI.
#[derive(Clone)]
pub struct Resource {
    pub(crate) uri: String,
    pub(crate) name: String,
    described: Described,
    size: Option<u64>,
    pub(crate) handler: Arc<ReadHandler>,
}

impl fmt::Debug for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resource")
            .field("uri", &self.uri)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Resource {
    /// The resource at `uri` (unique within the app), called `name` (a
    /// short identifier; MCP requires one), read by `handler`.
    pub fn new<R, F, Fut>(uri: impl Into<String>, name: impl Into<String>, handler: F) -> Self
    where
        R: ReadOutput,
        F: Fn(ReadRequest, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, McpError>> + Send + 'static,
    {
        Self {
            uri: uri.into(),
            name: name.into(),
            described: Described::default(),
            size: None,
            handler: boxed(handler),
        }
    }

    /// A human-readable title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.described.title = title.into();
        self
    }

    /// What it holds, for the agent.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.described.description = description.into();
        self
    }

    /// Its MIME type.
    #[must_use]
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.described.mime_type = mime_type.into();
        self
    }

    /// Its size in bytes, when known.
    #[must_use]
    pub fn size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }

    /// Hints for the client.
    #[must_use]
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.described.annotations = Some(annotations);
        self
    }

    /// Icons for it.
    #[must_use]
    pub fn icons(mut self, icons: impl IntoIterator<Item = Icon>) -> Self {
        self.described.icons = icons.into_iter().collect();
        self
    }

    /// Its URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// A link to it, for a prompt or a tool result to point at.
    pub fn link(&self) -> ResourceLink {
        let described = &self.described;
        let mut link = ResourceLink::new(&self.uri, &self.name);
        if !described.title.is_empty() {
            link = link.title(&described.title);
        }
        if !described.description.is_empty() {
            link = link.description(&described.description);
        }
        if !described.mime_type.is_empty() {
            link = link.mime_type(&described.mime_type);
        }
        if let Some(size) = self.size {
            link = link.size(size);
        }
        if let Some(annotations) = &described.annotations {
            link = link.annotations(annotations.clone());
        }
        link.icons(described.icons.iter().cloned())
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        check_uri(&self.uri)?;
        if self.name.is_empty() {
            return Err("the name is empty; MCP requires every resource to have one".to_owned());
        }
        Ok(())
    }

    pub(crate) fn definition(&self) -> ResourceDefinition {
        let described = &self.described;
        ResourceDefinition {
            uri: self.uri.clone(),
            name: self.name.clone(),
            title: described.title.clone(),
            description: described.description.clone(),
            mime_type: described.mime_type.clone(),
            size: self.size,
            annotations_json: described.annotations_json(),
            icons_json: described.icons_json(),
        }
    }
}

/// A family of documents the app serves by URI template, such as
/// `notes:///{id}`: the handler gets the URI asked for and its variables.
///
/// Templates take `{name}` (one segment: no `/`, `?` or `#`) and `{name}`'s
/// reserved form `{+name}` (a path, `/` included), separated by literal
/// text; [`AppBuilder::build`](crate::AppBuilder::build) refuses others.
#[derive(Clone)]
pub struct ResourceTemplate {
    pub(crate) uri_template: String,
    pub(crate) parsed: Result<UriTemplate, String>,
    pub(crate) name: String,
    described: Described,
    pub(crate) handler: Arc<ReadHandler>,
}

impl fmt::Debug for ResourceTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceTemplate")
            .field("uri_template", &self.uri_template)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ResourceTemplate {
    /// The documents whose URIs fit `uri_template` (unique within the app),
    /// called `name`, read by `handler`.
    pub fn new<R, F, Fut>(
        uri_template: impl Into<String>,
        name: impl Into<String>,
        handler: F,
    ) -> Self
    where
        R: ReadOutput,
        F: Fn(ReadRequest, CallContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<R, McpError>> + Send + 'static,
    {
        let uri_template = uri_template.into();
        Self {
            parsed: UriTemplate::parse(&uri_template),
            uri_template,
            name: name.into(),
            described: Described::default(),
            handler: boxed(handler),
        }
    }

    /// A human-readable title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.described.title = title.into();
        self
    }

    /// What its documents hold, for the agent.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.described.description = description.into();
        self
    }

    /// The MIME type of its documents, when they share one.
    #[must_use]
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.described.mime_type = mime_type.into();
        self
    }

    /// Hints for the client.
    #[must_use]
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.described.annotations = Some(annotations);
        self
    }

    /// Icons for it.
    #[must_use]
    pub fn icons(mut self, icons: impl IntoIterator<Item = Icon>) -> Self {
        self.described.icons = icons.into_iter().collect();
        self
    }

    /// Its URI template.
    pub fn uri_template(&self) -> &str {
        &self.uri_template
    }

    /// The variables of `uri` when it fits this template.
    pub(crate) fn matches(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        self.parsed.as_ref().ok()?.matches(uri)
    }

    /// Whether the template has a variable called `name`.
    pub(crate) fn has_variable(&self, name: &str) -> bool {
        self.parsed
            .as_ref()
            .is_ok_and(|parsed| parsed.variables().any(|variable| variable == name))
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        check_uri(&self.uri_template)?;
        if let Err(reason) = &self.parsed {
            return Err(reason.clone());
        }
        if self.name.is_empty() {
            return Err("the name is empty; MCP requires every template to have one".to_owned());
        }
        Ok(())
    }

    pub(crate) fn definition(&self) -> ResourceTemplateDefinition {
        let described = &self.described;
        ResourceTemplateDefinition {
            uri_template: self.uri_template.clone(),
            name: self.name.clone(),
            title: described.title.clone(),
            description: described.description.clone(),
            mime_type: described.mime_type.clone(),
            annotations_json: described.annotations_json(),
            icons_json: described.icons_json(),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::content::Role;

    async fn nothing(_: ReadRequest, _: CallContext) -> Result<Value, McpError> {
        Ok(json!({"contents": []}))
    }

    #[test]
    fn a_result_wraps_its_contents() {
        let one = ResourceContents::text("a://b", "x")
            .into_json()
            .expect("json");
        assert_eq!(one, r#"{"contents":[{"uri":"a://b","text":"x"}]}"#);
        let two = vec![
            ResourceContents::text("a://b", "x"),
            ResourceContents::blob("a://c", "AA==").mime_type("image/png"),
        ]
        .into_json()
        .expect("json");
        assert_eq!(
            two,
            r#"{"contents":[{"uri":"a://b","text":"x"},{"uri":"a://c","mimeType":"image/png","blob":"AA=="}]}"#
        );
        let cached = ReadResourceResult::new([ResourceContents::text("a://b", "x")])
            .ttl_ms(0)
            .cache_scope(CacheScope::Private)
            .into_json()
            .expect("json");
        assert_eq!(
            cached,
            r#"{"contents":[{"uri":"a://b","text":"x"}],"ttlMs":0,"cacheScope":"private"}"#
        );
    }

    #[test]
    fn a_declaration_carries_every_field_as_the_contract_has_it() {
        let resource = Resource::new("notes:///welcome", "welcome", nothing)
            .title("Welcome")
            .description("The first note.")
            .mime_type("text/markdown")
            .size(42)
            .annotations(Annotations::new().audience([Role::User]))
            .icons([Icon::new("https://x/n.png")]);
        let definition = resource.definition();
        assert_eq!(definition.uri, "notes:///welcome");
        assert_eq!(definition.name, "welcome");
        assert_eq!(definition.title, "Welcome");
        assert_eq!(definition.mime_type, "text/markdown");
        assert_eq!(definition.size, Some(42));
        assert_eq!(definition.annotations_json, r#"{"audience":["user"]}"#);
        assert_eq!(definition.icons_json, r#"[{"src":"https://x/n.png"}]"#);
        let bare = Resource::new("a://b", "b", nothing).definition();
        assert!(bare.annotations_json.is_empty() && bare.icons_json.is_empty());
        let link = serde_json::to_value(resource.link()).expect("json");
        assert_eq!(link["uri"], "notes:///welcome");
        assert_eq!(link["size"], 42);
    }

    #[test]
    fn a_broken_template_or_a_missing_name_is_reported() {
        let broken = ResourceTemplate::new("notes:///{id", "notes", nothing);
        assert!(
            broken
                .check()
                .expect_err("unclosed")
                .contains("never closed")
        );
        let nameless = Resource::new("a://b", "", nothing);
        assert!(nameless.check().expect_err("no name").contains("name"));
        let schemeless = Resource::new("readme.txt", "readme", nothing);
        assert!(
            schemeless
                .check()
                .expect_err("no scheme")
                .contains("scheme")
        );
        let spaced = ResourceTemplate::new("notes:///{id} copy", "notes", nothing);
        assert!(spaced.check().expect_err("a space").contains("whitespace"));
        let template = ResourceTemplate::new("notes:///{id}", "notes", nothing);
        assert!(template.has_variable("id") && !template.has_variable("other"));
        assert_eq!(
            template
                .matches("notes:///7")
                .and_then(|found| found.get("id").cloned()),
            Some("7".to_owned())
        );
    }
}

//! The sessions in one user's view, each under the name its tools and
//! prompts are prefixed with, and what a prefixed name or a URI routes to.
//!
//! Taken afresh for every request from the directory (in memory on every
//! node), so a view is never stale by more than the request that reads it:
//! a session that went away is simply not there, and a call naming its
//! tool is refused as naming no tool of the user's, never handed to
//! another session.
//!
//! The hub gives each owned session a name no other live session of its
//! owner holds when it is created, and the name stays the session's for
//! its life. Two sessions can still share one (created on two nodes at the
//! same moment, or recorded before sessions had names): in the view the
//! one whose id sorts first keeps it and each other gets the first eight
//! characters of its id appended (`notes_1a2b3c4d`), which stays the same
//! for as long as both live.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use openclaw_proxy_core::directory::SessionRecord;
use openclaw_proxy_core::{Hub, OAuthIdentity};
use openclaw_proxy_proto::session_name::{self, MAX_NAME_LEN};

/// One session of the view.
pub(super) struct Member {
    pub record: Arc<SessionRecord>,
    /// Its name in the view.
    pub name: String,
}

/// The sessions of one user's view, by name.
pub(super) struct Members(Vec<Member>);

/// What the lists of a view hold, in short: a listener compares two to
/// know which lists changed.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Signature {
    pub tools: u64,
    pub prompts: u64,
    pub resources: u64,
}

impl Members {
    /// The sessions `identity` owns now.
    pub fn of(hub: &Hub, identity: &OAuthIdentity) -> Self {
        let mut members: Vec<Member> = hub
            .owned_sessions(identity)
            .into_iter()
            .map(|record| {
                let name = if record.name.is_empty() {
                    let metadata = &record.metadata;
                    session_name::default_name([
                        metadata.device_name.as_str(),
                        metadata.device_id.as_str(),
                    ])
                } else {
                    record.name.to_string()
                };
                Member { record, name }
            })
            .collect();
        members.sort_by(|a, b| (&a.name, &a.record.id).cmp(&(&b.name, &b.record.id)));
        let mut kept: Option<String> = None;
        for member in &mut members {
            if kept.as_deref() == Some(member.name.as_str()) {
                let mut base = member.name.clone();
                base.truncate(MAX_NAME_LEN - 9);
                let id: String = member.record.id.chars().take(8).collect();
                member.name = format!("{}_{id}", base.trim_end_matches('_'));
            } else {
                kept = Some(member.name.clone());
            }
        }
        members.sort_by(|a, b| a.name.cmp(&b.name));
        Self(members)
    }

    /// The sessions, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Member> {
        self.0.iter()
    }

    fn named(&self, name: &str) -> Option<&Member> {
        self.0
            .binary_search_by(|member| member.name.as_str().cmp(name))
            .ok()
            .map(|at| &self.0[at])
    }

    /// The session and its own tool name of a tool's name in the view.
    pub fn tool<'a>(&self, prefixed: &'a str) -> Option<(&Member, &'a str)> {
        let (name, tool) = session_name::split(prefixed)?;
        let member = self.named(name)?;
        member.record.has_tool(tool).then_some((member, tool))
    }

    /// The session and its own prompt name of a prompt's name in the view.
    pub fn prompt<'a>(&self, prefixed: &'a str) -> Option<(&Member, &'a str)> {
        let (name, prompt) = session_name::split(prefixed)?;
        let member = self.named(name)?;
        member
            .record
            .catalog()
            .prompt(prompt)
            .is_some()
            .then_some((member, prompt))
    }

    /// The session a read of `uri` goes to: the first by name that declares
    /// it as a resource, else the first with a template it expands.
    pub fn reader(&self, uri: &str) -> Option<&Member> {
        self.0
            .iter()
            .find(|member| member.record.catalog().resource(uri).is_some())
            .or_else(|| {
                self.0
                    .iter()
                    .find(|member| member.record.catalog().serves(uri))
            })
    }

    /// The session a completion of the template `uri_template` goes to: the
    /// first by name that declares that template, else the reader of it as
    /// a URI.
    pub fn template_owner(&self, uri_template: &str) -> Option<&Member> {
        self.0
            .iter()
            .find(|member| {
                member
                    .record
                    .catalog()
                    .resource_templates
                    .iter()
                    .any(|template| &*template.uri_template == uri_template)
            })
            .or_else(|| self.reader(uri_template))
    }

    /// What the view's lists hold, hashed.
    pub fn signature(&self) -> Signature {
        let hash = |feed: &dyn Fn(&mut std::collections::hash_map::DefaultHasher)| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            feed(&mut hasher);
            hasher.finish()
        };
        Signature {
            tools: hash(&|hasher| {
                for member in &self.0 {
                    member.name.hash(hasher);
                    for tool in member.record.tools().iter() {
                        tool.name.hash(hasher);
                        tool.description.hash(hasher);
                        tool.input_schema.as_str().hash(hasher);
                    }
                }
            }),
            prompts: hash(&|hasher| {
                for member in &self.0 {
                    member.name.hash(hasher);
                    for prompt in member.record.catalog().prompts.iter() {
                        prompt.to_mcp().to_string().hash(hasher);
                    }
                }
            }),
            resources: hash(&|hasher| {
                for member in &self.0 {
                    let catalog = member.record.catalog();
                    for resource in catalog.resources.iter() {
                        resource.to_mcp().to_string().hash(hasher);
                    }
                    for template in catalog.resource_templates.iter() {
                        template.to_mcp().to_string().hash(hasher);
                    }
                }
            }),
        }
    }
}

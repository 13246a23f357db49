//! A session as the KV bucket holds it: what every node reads to serve a
//! session it did not register (its tools, catalog, credentials' digests,
//! owner, metadata and the node holding its bridge).
//!
//! JSON, versioned, so a rolling upgrade can read what an older node wrote.
//! The messages nodes send each other are [`super::wire`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::auth::{SessionCredentials, TokenDigest};
use crate::caller::Owner;
use crate::catalog;
use crate::directory::SessionRecord;
use crate::proto;
use crate::tools::{CallerNeeds, ClientCapability, ClientNeeds, Schema, TaskSupport, Tool};

/// A session as stored in the KV bucket.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredSession {
    /// Format version.
    pub v: u32,
    /// The registration metadata.
    pub metadata: StoredMetadata,
    /// The validated tools.
    pub tools: Vec<StoredTool>,
    /// The validated resources, resource templates and prompts (absent in
    /// entries written before sessions declared them).
    #[serde(default)]
    pub catalog: StoredCatalog,
    /// The node that holds the session's bridge, if one claimed it.
    #[serde(default)]
    pub holder: Option<String>,
    /// SHA-256 of the session token, hex (the token itself is never stored).
    pub session_token_sha256: String,
    /// SHA-256 of the MCP token, hex.
    pub mcp_token_sha256: String,
    /// The OAuth subject the session is bound to; absent when none (and in
    /// entries written before sessions had owners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<StoredOwner>,
    /// The session's name in its owner's one-URL view; absent in entries
    /// written before sessions had names.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// [`Owner`], stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredOwner {
    pub subject: String,
    pub issuer: String,
}

/// A session's catalog, stored: each list left out when empty.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StoredCatalog {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<catalog::Resource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_templates: Vec<catalog::ResourceTemplate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<catalog::Prompt>,
}

impl StoredCatalog {
    /// The stored form of a catalog.
    pub fn of(catalog: &catalog::Catalog) -> Self {
        Self {
            resources: catalog.resources.to_vec(),
            resource_templates: catalog.resource_templates.to_vec(),
            prompts: catalog.prompts.to_vec(),
        }
    }

    /// The catalog (validated when it was stored); the shared empty one
    /// when it holds nothing.
    pub fn parsed(&self) -> Arc<catalog::Catalog> {
        let parsed = catalog::Catalog {
            resources: self.resources.clone().into(),
            resource_templates: self.resource_templates.clone().into(),
            prompts: self.prompts.clone().into(),
        };
        if parsed.is_empty() {
            catalog::empty()
        } else {
            Arc::new(parsed)
        }
    }
}

/// [`proto::SessionMetadata`], stored.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredMetadata {
    pub device_id: String,
    pub device_name: String,
    pub app_version: String,
    pub chat_id: String,
}

/// One validated tool, stored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The schema's JSON as stored (an object), kept as text.
    pub input_schema: Box<RawValue>,
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub timeout_seconds: u32,
    /// What the user is asked to confirm each call, when they must.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<String>,
    /// The client capabilities each call needs, by name; a name this node
    /// does not know (stored by a newer one) is left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_client: Vec<String>,
    /// Whether calls may run as MCP tasks, by MCP's name; absent for
    /// plain calls only (a name this node does not know reads as that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_support: Option<String>,
    /// The OAuth scopes a caller needs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_scopes: Vec<String>,
    /// The kinds of caller admitted; a kind this node does not know is
    /// left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires_caller_kinds: Vec<String>,
}

impl StoredSession {
    /// The stored form of a record.
    pub fn of(record: &SessionRecord, holder: Option<String>) -> Self {
        let metadata = &record.metadata;
        Self {
            v: 1,
            metadata: StoredMetadata {
                device_id: metadata.device_id.clone(),
                device_name: metadata.device_name.clone(),
                app_version: metadata.app_version.clone(),
                chat_id: metadata.chat_id.clone(),
            },
            tools: Self::stored_tools(&record.tools()),
            catalog: StoredCatalog::of(&record.catalog()),
            holder,
            session_token_sha256: hex(&record.credentials.session_token_digest),
            mcp_token_sha256: hex(&record.credentials.mcp_token_digest),
            owner: record.credentials.owner.as_ref().map(|owner| StoredOwner {
                subject: owner.subject.clone(),
                issuer: owner.issuer.clone(),
            }),
            name: record.name.to_string(),
        }
    }

    /// Tools in their stored form.
    pub fn stored_tools(tools: &[Tool]) -> Vec<StoredTool> {
        tools
            .iter()
            .map(|tool| StoredTool {
                name: tool.name.to_string(),
                description: tool.description.to_string(),
                input_schema: tool.input_schema.to_raw(),
                path: tool.path.to_string(),
                timeout_seconds: tool.timeout_seconds,
                confirm: tool.confirm.as_deref().map(str::to_owned),
                requires_client: tool.requires_client.names(),
                task_support: tool
                    .task_support
                    .allows_task()
                    .then(|| tool.task_support.as_str().to_owned()),
                requires_scopes: tool.requires_caller.scope_names(),
                requires_caller_kinds: tool.requires_caller.kind_names(),
            })
            .collect()
    }

    /// The stored tools (validated when they were stored).
    pub fn tools_parsed(&self) -> Vec<Tool> {
        self.tools
            .iter()
            .map(|tool| Tool {
                name: tool.name.as_str().into(),
                description: tool.description.as_str().into(),
                input_schema: Schema::trusted(tool.input_schema.get()),
                path: tool.path.as_str().into(),
                timeout_seconds: tool.timeout_seconds,
                confirm: tool.confirm.as_deref().map(Into::into),
                requires_client: tool
                    .requires_client
                    .iter()
                    .filter_map(|name| ClientCapability::parse(name))
                    .fold(ClientNeeds::NONE, ClientNeeds::with),
                task_support: tool
                    .task_support
                    .as_deref()
                    .and_then(TaskSupport::parse)
                    .unwrap_or_default(),
                requires_caller: CallerNeeds::trusted(
                    &tool.requires_scopes,
                    &tool.requires_caller_kinds,
                ),
            })
            .collect()
    }

    /// The record's parts (its tools were validated when it was stored).
    pub fn into_parts(mut self) -> Result<StoredParts, String> {
        let credentials = SessionCredentials {
            session_token_digest: unhex(&self.session_token_sha256)
                .ok_or("session_token_sha256 is not 64 hex digits")?,
            mcp_token_digest: unhex(&self.mcp_token_sha256)
                .ok_or("mcp_token_sha256 is not 64 hex digits")?,
            owner: self.owner.take().map(|owner| Owner {
                subject: owner.subject,
                issuer: owner.issuer,
            }),
        };
        let tools = self.tools_parsed();
        let catalog = self.catalog.parsed();
        let metadata = proto::SessionMetadata {
            device_id: self.metadata.device_id,
            device_name: self.metadata.device_name,
            app_version: self.metadata.app_version,
            chat_id: self.metadata.chat_id,
        };
        Ok(StoredParts {
            name: std::mem::take(&mut self.name),
            metadata,
            tools,
            catalog,
            credentials,
            holder: self.holder,
        })
    }
}

/// A stored session, read back.
#[derive(Debug)]
pub struct StoredParts {
    pub name: String,
    pub metadata: proto::SessionMetadata,
    pub tools: Vec<Tool>,
    pub catalog: Arc<catalog::Catalog>,
    pub credentials: SessionCredentials,
    pub holder: Option<String>,
}

fn hex(digest: &TokenDigest) -> String {
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<TokenDigest> {
    if text.len() != 64 || !text.is_ascii() {
        return None;
    }
    let mut digest = [0_u8; 32];
    for (index, byte) in digest.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(index * 2..index * 2 + 2)?, 16).ok()?;
    }
    Some(digest)
}

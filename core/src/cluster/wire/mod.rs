//! What nodes say to each other: the messages of one call between the node that received it and the node that
//! holds the session's bridge, and the changes of a session ([`Change`]).
//! Session records in the KV bucket are in `stored.rs`.
//!
//! JSON, versioned, so a rolling upgrade can read what an older node wrote.
//!
//! A call is a tool call ([`TOOL`] names the tool; its answer is of kind
//! [`KIND_ANSWER`]) or another MCP request the app answers ([`METHOD`] names
//! the method; its answer is of kind [`KIND_MCP_RESULT`] or
//! [`KIND_MCP_ERROR`]). A tool call's messages are those of nodes that
//! forwarded only tool calls, so either side may run the previous version.
//!
//! The app's requests to a caller on another node, and the answers and
//! retries that come back for them, are in `asks.rs`.
//!
//! This file holds the wire version and the headers of a forwarded call;
//! `reply.rs` the messages that come back on the call's reply subject,
//! `change.rs` a session's changes.

pub mod asks;
mod change;
mod reply;

use async_nats::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::outcome::InvokeError;
use crate::proto;

pub use change::{CHANGE_VERSION, Change, NODE, ReadChange, change_message, read_change};
pub use reply::{
    Answer, Failure, KIND_ALIVE, KIND_ANSWER, KIND_FAILURE, KIND_LOG, KIND_MCP_ERROR,
    KIND_MCP_RESULT, KIND_PROGRESS, LogRecord, McpError, Progress, ReadAnswer, ReadMcpError,
    mcp_reply_message, read_mcp_reply,
};

/// Header carrying the wire version of a message between nodes: the
/// version of the headers and bodies of this module. Absent from nodes of
/// versions before it existed, which wrote version 1.
pub const WIRE: &str = "Ocp-Wire";
/// The wire version this node writes on every message but a gated call.
/// Raise it when a message changes in a way an older node would misread; a
/// change an older node can ignore (a new optional header) keeps it.
pub const WIRE_VERSION: u32 = 2;
/// The wire version of a call of a tool that needs the user's
/// confirmation: its holding node asks (`hub/confirm.rs`), where a node of
/// a release before would run it unasked, since its caller's node used to
/// ask. Such a node refuses the version instead; a holding node that reads
/// an older version knows the calling node asked already.
pub const GATED_CALL_VERSION: u32 = 3;
/// The newest wire version this node reads.
pub const READS_UP_TO: u32 = GATED_CALL_VERSION;

/// The wire version of a message: 1 without the header (a node before it
/// existed), 0 for one that is not a number ([`readable`] refuses it).
pub fn version(headers: Option<&HeaderMap>) -> u32 {
    match headers.and_then(|headers| headers.get(WIRE)) {
        None => 1,
        Some(version) => version.as_str().trim().parse().unwrap_or(0),
    }
}

/// Fails a message whose wire version this node cannot read (a newer one,
/// or no number), naming both versions; reads one without the header as
/// version 1. A node refuses such a call rather than misread it.
pub fn readable(headers: Option<&HeaderMap>) -> Result<(), InvokeError> {
    let Some(version) = headers.and_then(|headers| headers.get(WIRE)) else {
        return Ok(());
    };
    match version.as_str().trim().parse::<u32>() {
        Ok(version) if version <= READS_UP_TO => Ok(()),
        _ => Err(InvokeError::Remote(format!(
            "Another proxy node sent a message of this call in wire version {}, and this node reads versions up to {READS_UP_TO}: the cluster is part way through an upgrade; finish it, node by node (docs/cluster.md, \"Rolling upgrades\").",
            crate::escape::quoted(version.as_str())
        ))),
    }
}

/// Header naming the kind of a message on a call's reply subject.
pub const KIND: &str = "Ocp-Kind";
/// Header carrying the tool of a forwarded call.
pub const TOOL: &str = "Ocp-Tool";
/// Header carrying the MCP method of a forwarded request (instead of
/// [`TOOL`]).
pub const METHOD: &str = "Ocp-Method";
/// Header carrying what a forwarded request names (a URI, a prompt), as a
/// JSON string; absent when it names nothing.
pub const TARGET: &str = "Ocp-Target";
/// Header carrying how long the caller waits, in milliseconds.
pub const TIMEOUT_MS: &str = "Ocp-Timeout-Ms";
/// Header carrying the MCP request's `params._meta` (JSON text).
pub const META: &str = "Ocp-Meta";
/// Header carrying the caller's [`Client`] (JSON text).
pub const CLIENT: &str = "Ocp-Client";
/// Header carrying the verified [`Caller`] (JSON text); absent when no
/// credential was needed, and from nodes of versions before it existed.
pub const CALLER: &str = "Ocp-Caller";
/// Header carrying the W3C `traceparent` of the calling node's span, so the
/// holding node's spans (and the app's) join the caller's trace.
pub const TRACE_PARENT: &str = "traceparent";
/// The MCP task a forwarded call runs as, when it runs as one.
pub const TASK_ID: &str = "Ocp-Task-Id";
/// Header carrying the least severe log record the caller wants (an MCP
/// level name); absent for none.
pub const LOG_LEVEL: &str = "Ocp-Log-Level";
/// [`proto::CallerInfo`] between nodes.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Client {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub protocol_version: String,
}

impl Client {
    /// The wire form of a caller.
    pub fn of(info: &proto::CallerInfo) -> Self {
        Self {
            name: info.name.clone(),
            version: info.version.clone(),
            protocol_version: info.protocol_version.clone(),
        }
    }

    /// The caller it describes.
    pub fn into_proto(self) -> proto::CallerInfo {
        proto::CallerInfo {
            name: self.name,
            version: self.version,
            protocol_version: self.protocol_version,
        }
    }
}

/// [`crate::Caller`] between nodes: the fields of its gRPC form.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Caller {
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub issuer: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subject: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
}

impl Caller {
    /// The wire form of a caller.
    pub fn of(caller: &crate::Caller) -> Self {
        let proto::CallerIdentity {
            kind,
            issuer,
            subject,
            client_id,
            scopes,
        } = caller.to_proto();
        Self {
            kind,
            issuer,
            subject,
            client_id,
            scopes,
        }
    }

    /// The caller it describes.
    pub fn into_caller(self) -> crate::Caller {
        crate::Caller::from_proto(proto::CallerIdentity {
            kind: self.kind,
            issuer: self.issuer,
            subject: self.subject,
            client_id: self.client_id,
            scopes: self.scopes,
        })
    }
}

/// What a forwarded call asks for, besides its body (the tool's arguments
/// or the request's params), as the calling node names it in headers.
#[derive(Clone, Copy, Debug)]
pub enum Asks<'a> {
    /// A tool call.
    Tool(&'a str),
    /// Another MCP request.
    Request { method: &'a str, target: &'a str },
}

impl Asks<'_> {
    /// Names it in `headers`; fails for a method a header cannot carry
    /// (one with a line break, which no MCP method has).
    pub fn write(self, headers: &mut HeaderMap) -> Result<(), InvokeError> {
        match self {
            Self::Tool(tool) => headers.insert(TOOL, tool),
            Self::Request { method, target } => {
                let value = method.parse::<HeaderValue>().map_err(|_| {
                    InvokeError::Remote(format!(
                        "The MCP method {} cannot be sent to another proxy node.",
                        crate::escape::quoted(method)
                    ))
                })?;
                headers.insert(METHOD, value);
                if !target.is_empty() {
                    // JSON escapes line breaks, which a header cannot hold.
                    let json = serde_json::to_string(target).unwrap_or_default();
                    headers.insert(TARGET, json.as_str());
                }
            }
        }
        Ok(())
    }
}

/// What a forwarded call asks for, as the holding node reads its headers.
#[derive(Debug, PartialEq, Eq)]
pub enum Forwarded {
    /// A tool call (also every call of a node that forwarded only those).
    Tool(String),
    /// Another MCP request.
    Request { method: String, target: String },
}

impl Forwarded {
    /// What `headers` ask for: a request when they name a method, a tool
    /// call otherwise.
    pub fn read(headers: Option<&HeaderMap>) -> Self {
        let header = |name: &str| {
            headers
                .and_then(|headers| headers.get(name))
                .map(HeaderValue::as_str)
        };
        match header(METHOD) {
            Some(method) => Self::Request {
                method: method.to_owned(),
                target: header(TARGET)
                    .and_then(|json| serde_json::from_str(json).ok())
                    .unwrap_or_default(),
            },
            None => Self::Tool(header(TOOL).unwrap_or_default().to_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers_of(asks: Asks<'_>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        asks.write(&mut headers).expect("headers");
        headers
    }

    #[test]
    fn a_request_crosses_with_its_method_and_target() {
        let read =
            |method, target| Forwarded::read(Some(&headers_of(Asks::Request { method, target })));
        assert_eq!(
            read("resources/read", "notes://a b\r\n\"c\"/ü"),
            Forwarded::Request {
                method: "resources/read".into(),
                target: "notes://a b\r\n\"c\"/ü".into(),
            }
        );
        // A target with line breaks still makes valid header text.
        let headers = headers_of(Asks::Request {
            method: "prompts/get",
            target: "two\nlines",
        });
        let raw = headers.get(TARGET).expect("target").as_str();
        assert!(!raw.contains('\n'), "{raw}");
        assert_eq!(
            read("completion/complete", ""),
            Forwarded::Request {
                method: "completion/complete".into(),
                target: String::new(),
            }
        );
        assert!(
            headers_of(Asks::Request {
                method: "completion/complete",
                target: ""
            })
            .get(TARGET)
            .is_none()
        );
        // A method no header can carry fails the call instead of the node.
        let mut headers = HeaderMap::new();
        let error = Asks::Request {
            method: "bad\r\nOcp-Tool: x",
            target: "",
        }
        .write(&mut headers)
        .expect_err("refused");
        assert!(error.to_string().contains("cannot be sent"), "{error}");
    }

    #[test]
    fn a_wire_version_this_node_cannot_read_is_refused_naming_both() {
        let with = |version: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(WIRE, version);
            headers
        };
        assert!(readable(None).is_ok(), "a node before the header");
        assert!(readable(Some(&HeaderMap::new())).is_ok());
        assert!(readable(Some(&with("1"))).is_ok());
        assert!(readable(Some(&with(&WIRE_VERSION.to_string()))).is_ok());
        assert!(readable(Some(&with(&GATED_CALL_VERSION.to_string()))).is_ok());
        for unreadable in ["4", "99", "x", "-1"] {
            let error = readable(Some(&with(unreadable)))
                .expect_err(unreadable)
                .to_string();
            assert!(
                error.contains(&format!("\"{unreadable}\""))
                    && error.contains(&format!("up to {READS_UP_TO}")),
                "{error}"
            );
        }
    }

    #[test]
    fn a_tool_call_reads_as_before_requests_crossed_nodes() {
        let headers = headers_of(Asks::Tool("echo_text"));
        assert!(headers.get(METHOD).is_none());
        assert_eq!(
            Forwarded::read(Some(&headers)),
            Forwarded::Tool("echo_text".into())
        );
        // What a node of the previous version sends: the tool header only.
        let mut old = HeaderMap::new();
        old.insert(TOOL, "echo_text");
        old.insert(TIMEOUT_MS, "60000");
        assert_eq!(
            Forwarded::read(Some(&old)),
            Forwarded::Tool("echo_text".into())
        );
        assert_eq!(Forwarded::read(None), Forwarded::Tool(String::new()));
    }
}

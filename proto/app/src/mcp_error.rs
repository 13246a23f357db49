//! The one error an MCP request can end in, [`McpError`], and its mapping
//! to the contract's form: the JSON-RPC codes MCP gives a meaning, and the
//! one code that depends on the client's protocol revision (SEP-2164).

use std::fmt;

use openclaw_proxy_proto::v1 as proto;
use serde_json::{Value, json};

use crate::content::json_text;
use crate::error::with_causes;

/// The revision from which the specification (SEP-2164) names "invalid
/// params" rather than -32002 for a resource that does not exist.
const INVALID_PARAMS_FOR_UNKNOWN_RESOURCES_FROM: &str = "2026-07-28";

/// A failed MCP request, as the client receives it: a JSON-RPC error code,
/// a message, and optional data.
///
/// Any error converts into it with `?` as an internal error (-32603), its
/// message being the error and its sources joined by `": "`; the
/// constructors make the codes MCP gives a meaning.
#[derive(Clone, PartialEq)]
pub struct McpError {
    code: i32,
    message: String,
    data: Option<Value>,
}

impl McpError {
    /// "Resource not found" (MCP up to 2025-11-25).
    pub const RESOURCE_NOT_FOUND: i32 = -32002;
    /// "Invalid params": an unknown prompt, a missing argument.
    pub const INVALID_PARAMS: i32 = -32602;
    /// "Method not found": the app does not serve this request.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// "Internal error": the app failed to answer.
    pub const INTERNAL_ERROR: i32 = -32603;

    /// An error with this code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The same error carrying `data` for the client.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The resource at `uri` does not exist: code -32002 with
    /// `data: {"uri": uri}`, as the specification names it. A client at
    /// revision 2026-07-28 or later receives -32602 instead, which that
    /// revision names for it (SEP-2164).
    pub fn resource_not_found(uri: impl Into<String>) -> Self {
        let uri = uri.into();
        Self::new(
            Self::RESOURCE_NOT_FOUND,
            format!("Resource not found: {uri}"),
        )
        .with_data(json!({ "uri": uri }))
    }

    /// The request's params are wrong (-32602); say how.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(Self::INVALID_PARAMS, message)
    }

    /// The app does not serve `method` (-32601).
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            Self::METHOD_NOT_FOUND,
            format!("This app does not serve {method}."),
        )
    }

    /// The app failed to answer (-32603); say why.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(Self::INTERNAL_ERROR, message)
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The message the client will see.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The data the client will see, if any.
    pub fn data(&self) -> Option<&Value> {
        self.data.as_ref()
    }

    /// The contract's form, for a client at `revision`.
    pub(crate) fn into_proto(self, revision: Option<&str>) -> proto::McpError {
        let modern =
            revision.is_some_and(|revision| revision >= INVALID_PARAMS_FOR_UNKNOWN_RESOURCES_FROM);
        let code = if self.code == Self::RESOURCE_NOT_FOUND && modern {
            Self::INVALID_PARAMS
        } else {
            self.code
        };
        proto::McpError {
            code,
            message: self.message,
            data_json: self.data.as_ref().map(json_text).unwrap_or_default(),
        }
    }
}

// Not `std::error::Error` on purpose: that keeps the blanket `From` below
// coherent, as with `ToolError`.
impl<E: std::error::Error> From<E> for McpError {
    fn from(error: E) -> Self {
        Self::internal(with_causes(&error))
    }
}

impl fmt::Debug for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpError")
            .field("code", &self.code)
            .field("message", &self.message)
            .field("data", &self.data)
            .finish()
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (JSON-RPC error {})", self.message, self.code)
    }
}

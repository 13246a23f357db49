//! Whether a caller may see and call a session's tool, by what the app
//! declared it needs (`ToolDefinition.requires.scopes`, `.caller_kinds`).
//!
//! Applied once per call on the node the caller reached, before the
//! confirmation gate and before the call is routed anywhere, so the app
//! never sees a call its own declaration refuses and a forwarded call is
//! not judged twice. A caller is only told about the tools it may see: the
//! names offered with an unknown tool leave the others out.

use std::sync::Arc;

use crate::call::CallContext;
use crate::caller::Caller;
use crate::directory::SessionRecord;
use crate::outcome::InvokeError;
use crate::tools::{Missing, Tool};

impl Caller {
    /// What this caller lacks for `tool`, the first thing only; `None`
    /// when it may see and call it.
    pub fn lacks(&self, tool: &Tool) -> Option<Missing> {
        let needs = &tool.requires_caller;
        if needs.is_empty() {
            return None;
        }
        needs.missing(self.kind, self.scopes())
    }

    /// Whether this caller may see and call `tool`.
    pub fn may_use(&self, tool: &Tool) -> bool {
        self.lacks(tool).is_none()
    }

    /// The scopes the caller's OAuth token granted; none for other kinds.
    pub fn scopes(&self) -> &[String] {
        self.identity
            .as_deref()
            .map_or(&[], |identity| identity.scopes.as_slice())
    }
}

/// Admits the caller of `context` to call `tool_name` of the session: an
/// unknown tool names only the tools this caller may see; a tool whose
/// requirements it lacks names what it lacks. Admitted, the call's
/// confirmation question when one is asked (the tool's own, else the
/// policy's). The context is taken and handed back (rather than borrowed)
/// so that the call's future, which holds it across waits, keeps no room
/// apart for a borrow.
pub fn admit(
    record: &SessionRecord,
    tool_name: &str,
    mut context: CallContext,
) -> Result<(CallContext, Option<Arc<str>>), InvokeError> {
    judge(record, tool_name, &context.caller)?;
    let policy = context.confirm.take();
    let confirmation = record.confirmation(tool_name).or(policy);
    Ok((context, confirmation))
}

fn judge(record: &SessionRecord, tool_name: &str, caller: &Caller) -> Result<(), InvokeError> {
    let tools = record.tools();
    match tools.iter().find(|tool| &*tool.name == tool_name) {
        Some(tool) => match caller.lacks(tool) {
            None => Ok(()),
            Some(missing) => Err(InvokeError::NotForCaller {
                tool: tool_name.to_owned(),
                missing: Box::new(missing),
            }),
        },
        None => Err(InvokeError::UnknownTool {
            tool: tool_name.to_owned(),
            available: visible_names(&tools, caller),
        }),
    }
}

/// The names of the tools `caller` may see, for an error message.
fn visible_names(tools: &[Tool], caller: &Caller) -> String {
    let names: Vec<&str> = tools
        .iter()
        .filter(|tool| caller.may_use(tool))
        .map(|tool| &*tool.name)
        .collect();
    if names.is_empty() {
        return "no tools".into();
    }
    names.join(", ")
}

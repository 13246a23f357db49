//! The tools of sessions: the rules live in the contract crate
//! ([`openclaw_proxy_proto::tools`]), shared with the stdio binary; this
//! module adds what only the proxy needs, the sharing of identical tool sets.

use std::collections::HashMap;
use std::sync::Arc;

use openclaw_proxy_proto::tools::schema_json;
pub use openclaw_proxy_proto::tools::{
    Definition, MAX_TOOL_NAME_LEN, Tool, ToolError, is_valid_tool_name, json_kind,
};

use crate::proto;

/// Validates a session's tool definitions as they arrive over gRPC (and
/// REST, which speaks the same messages).
pub fn validate_tools(definitions: Vec<proto::ToolDefinition>) -> Result<Vec<Tool>, ToolError> {
    openclaw_proxy_proto::tools::validate_tools(
        definitions.into_iter().map(Definition::from).collect(),
    )
}

/// Shares identical tool sets between sessions.
///
/// An app usually registers the same tools in every session it opens; with
/// thousands of sessions, one copy of the schemas instead of thousands keeps
/// an idle session small. Entries are weak: a tool set lives as long as a
/// session uses it.
#[derive(Debug, Default)]
pub struct ToolSetCache {
    sets: std::sync::Mutex<HashMap<u64, std::sync::Weak<[Tool]>>>,
}

impl ToolSetCache {
    /// The shared copy of `tools`, adding it if no session uses it yet.
    pub fn intern(&self, tools: Vec<Tool>) -> Arc<[Tool]> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for tool in &tools {
            tool.name.hash(&mut hasher);
            tool.description.hash(&mut hasher);
            tool.path.hash(&mut hasher);
            schema_json(&tool.input_schema).hash(&mut hasher);
        }
        let key = hasher.finish();
        let mut sets = self
            .sets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(shared) = sets.get(&key).and_then(std::sync::Weak::upgrade)
            && *shared == *tools
        {
            return shared;
        }
        // Forget released sets now and then (whenever the map reaches a
        // power of two), so distinct one-off sets cannot grow it forever.
        if sets.len() > 64 && sets.len().is_power_of_two() {
            sets.retain(|_, set| set.strong_count() > 0);
        }
        let shared: Arc<[Tool]> = tools.into();
        sets.insert(key, Arc::downgrade(&shared));
        shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, schema: &str) -> proto::ToolDefinition {
        proto::ToolDefinition {
            name: name.into(),
            input_schema_json: schema.into(),
            ..Default::default()
        }
    }

    #[test]
    fn identical_tool_sets_are_shared_and_released() {
        let cache = ToolSetCache::default();
        let tools =
            || validate_tools(vec![def("a", r#"{"type":"object"}"#), def("b", "")]).expect("valid");
        let first = cache.intern(tools());
        let second = cache.intern(tools());
        assert!(Arc::ptr_eq(&first, &second), "equal sets share one copy");
        let other = cache.intern(validate_tools(vec![def("a", "")]).expect("valid"));
        assert!(!Arc::ptr_eq(&first, &other));
        let weak = Arc::downgrade(&first);
        drop((first, second));
        assert!(weak.upgrade().is_none(), "the cache keeps no set alive");
        let again = cache.intern(tools());
        assert_eq!(again.len(), 2);
    }
}

//! The tools of sessions: the rules live in the contract crate
//! ([`openclaw_proxy_proto::tools`]), shared with the stdio binary; this
//! module adds what only the proxy needs, the sharing of identical tool sets.

use std::collections::HashMap;
use std::sync::Arc;

pub use openclaw_proxy_proto::tools::{
    CallerNeeds, ClientCapability, ClientNeeds, Definition, MAX_TOOL_NAME_LEN, Missing, Schema,
    TaskSupport, Tool, ToolError, is_valid_tool_name, json_kind,
};

use crate::proto;

/// Validates a session's tool definitions as they arrive over gRPC (and
/// REST, which speaks the same messages).
pub fn validate_tools(definitions: Vec<proto::ToolDefinition>) -> Result<Vec<Tool>, ToolError> {
    openclaw_proxy_proto::tools::validate_tools(
        definitions.into_iter().map(Definition::from).collect(),
    )
}

/// Shares identical tool sets between sessions, and counts the bytes of
/// the sets it holds (for `OPENCLAW_PROXY_MAX_TOTAL_TOOL_DEFINITION_BYTES`).
///
/// An app usually registers the same tools in every session it opens; with
/// thousands of sessions, one copy of the schemas instead of thousands keeps
/// an idle session small. Entries are weak: a tool set lives as long as a
/// session uses it. A set counts once however many sessions share it: the
/// count is what the server holds.
#[derive(Debug, Default)]
pub struct ToolSetCache {
    sets: std::sync::Mutex<Sets>,
}

#[derive(Debug, Default)]
struct Sets {
    /// Each set by its hash, with its bytes.
    by_hash: HashMap<u64, (std::sync::Weak<[Tool]>, usize)>,
    /// The bytes of the entries of `by_hash`, released ones included until
    /// they are forgotten.
    bytes: usize,
}

impl Sets {
    /// Forgets the sets no session uses any more.
    fn forget_released(&mut self) {
        self.by_hash.retain(|_, (set, _)| set.strong_count() > 0);
        self.bytes = self.by_hash.values().map(|(_, bytes)| bytes).sum();
    }
}

/// The bytes of text a validated tool set holds, counted as the limits
/// count a definition: names, descriptions, schemas and paths.
pub fn set_bytes(tools: &[Tool]) -> usize {
    tools
        .iter()
        .map(|tool| {
            tool.name.len() + tool.description.len() + tool.input_schema.len() + tool.path.len()
        })
        .sum()
}

impl ToolSetCache {
    fn lock(&self) -> std::sync::MutexGuard<'_, Sets> {
        // Plain data, never left half-updated by a panic: poison is harmless.
        self.sets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The bytes of the tool sets sessions use now.
    pub fn held_bytes(&self) -> usize {
        let mut sets = self.lock();
        sets.forget_released();
        sets.bytes
    }

    /// Whether `tools` fits under `limit` bytes held in all (`0`: no
    /// limit): `Err` with the bytes held when it does not. A set already
    /// held fits: it is shared, not added.
    pub fn fits(&self, tools: &[Tool], limit: usize) -> Result<(), usize> {
        if limit == 0 {
            return Ok(());
        }
        let bytes = set_bytes(tools);
        let key = hash_of(tools);
        let mut sets = self.lock();
        if let Some((held, _)) = sets.by_hash.get(&key)
            && held.upgrade().is_some_and(|held| *held == *tools)
        {
            return Ok(());
        }
        if sets.bytes + bytes > limit {
            sets.forget_released();
        }
        if sets.bytes + bytes > limit {
            return Err(sets.bytes);
        }
        Ok(())
    }

    /// The shared copy of `tools`, adding it if no session uses it yet.
    pub fn intern(&self, tools: Vec<Tool>) -> Arc<[Tool]> {
        let key = hash_of(&tools);
        let mut sets = self.lock();
        if let Some(shared) = sets.by_hash.get(&key).and_then(|(set, _)| set.upgrade())
            && *shared == *tools
        {
            return shared;
        }
        // Forget released sets now and then (whenever the map reaches a
        // power of two), so distinct one-off sets cannot grow it forever.
        if sets.by_hash.len() > 64 && sets.by_hash.len().is_power_of_two() {
            sets.forget_released();
        }
        let bytes = set_bytes(&tools);
        let shared: Arc<[Tool]> = tools.into();
        if let Some((_, replaced)) = sets.by_hash.insert(key, (Arc::downgrade(&shared), bytes)) {
            sets.bytes -= replaced;
        }
        sets.bytes += bytes;
        shared
    }
}

fn hash_of(tools: &[Tool]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for tool in tools {
        tool.name.hash(&mut hasher);
        tool.description.hash(&mut hasher);
        tool.path.hash(&mut hasher);
        tool.input_schema.hash(&mut hasher);
    }
    hasher.finish()
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

    #[test]
    fn held_bytes_count_shared_sets_once_and_forget_released_ones() {
        let cache = ToolSetCache::default();
        let set = |schema: &str| validate_tools(vec![def("a", schema)]).expect("valid");
        let first = cache.intern(set(r#"{"type":"object","x":1}"#));
        let shared = cache.intern(set(r#"{"type":"object","x":1}"#));
        let bytes = set_bytes(&first);
        assert_eq!(bytes, 1 + r#"{"type":"object","x":1}"#.len());
        assert_eq!(cache.held_bytes(), bytes, "a shared set counts once");
        assert_eq!(
            cache.fits(&set(r#"{"type":"object","x":1}"#), bytes),
            Ok(())
        );
        assert_eq!(
            cache.fits(&set(r#"{"type":"object","y":2}"#), bytes),
            Err(bytes)
        );
        assert_eq!(cache.fits(&set(r#"{"type":"object","y":2}"#), 0), Ok(()));
        drop((first, shared));
        assert_eq!(
            cache.fits(&set(r#"{"type":"object","y":2}"#), bytes),
            Ok(())
        );
        assert_eq!(cache.held_bytes(), 0);
    }
}

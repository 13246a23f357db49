//! A session's changes between nodes: the node where a session's tools,
//! resources or prompts change tells the nodes that watch the session
//! (`{prefix}.changes.{session_id}`, sent by `cluster/changes.rs`), in a
//! versioned JSON a node of another version reads or passes over.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::hub::SessionEvent;

/// Header naming the node a session's change comes from (its id, as in
/// KV), so that this node skips its own: it told its watchers already.
pub const NODE: &str = "Ocp-Node";

/// The version of [`Change`] this build writes and reads.
pub const CHANGE_VERSION: u32 = 1;

/// A session's change, from the node where it happened to the nodes that
/// watch the session (`{prefix}.changes.{session_id}`).
#[derive(Debug, Serialize)]
pub struct Change<'a> {
    /// Format version ([`CHANGE_VERSION`]); a reader ignores a change of a
    /// version it does not know.
    pub v: u32,
    /// What changed: `resource_updated`, `tools_changed`,
    /// `resources_changed` or `prompts_changed`; a reader ignores a name it
    /// does not know (one a later version added).
    pub change: &'a str,
    /// The resource that changed, for `resource_updated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<&'a str>,
}

/// [`Change`] as the receiving node reads it.
#[derive(Debug, Deserialize)]
pub struct ReadChange {
    pub v: u32,
    pub change: String,
    #[serde(default)]
    pub uri: Option<String>,
}

/// The body of the message that tells other nodes of a change.
pub fn change_message(change: &SessionEvent) -> Bytes {
    let (name, uri) = match change {
        SessionEvent::ResourceUpdated(uri) => ("resource_updated", Some(&**uri)),
        SessionEvent::ToolsChanged => ("tools_changed", None),
        SessionEvent::ResourcesChanged => ("resources_changed", None),
        SessionEvent::PromptsChanged => ("prompts_changed", None),
    };
    let body = serde_json::to_vec(&Change {
        v: CHANGE_VERSION,
        change: name,
        uri,
    })
    .unwrap_or_default();
    Bytes::from(body)
}

/// The change a message of another node carries; `Ok(None)` for one this
/// version does not know (of a later version), the error says what is
/// wrong with the message.
pub fn read_change(payload: &[u8]) -> Result<Option<SessionEvent>, String> {
    let read: ReadChange = serde_json::from_slice(payload).map_err(|error| error.to_string())?;
    if read.v != CHANGE_VERSION {
        return Ok(None);
    }
    Ok(match (read.change.as_str(), read.uri) {
        ("resource_updated", Some(uri)) => Some(SessionEvent::ResourceUpdated(uri.into())),
        ("resource_updated", None) => return Err("resource_updated names no uri".into()),
        ("tools_changed", _) => Some(SessionEvent::ToolsChanged),
        ("resources_changed", _) => Some(SessionEvent::ResourcesChanged),
        ("prompts_changed", _) => Some(SessionEvent::PromptsChanged),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_crosses_as_versioned_json_and_unknown_ones_are_ignored() {
        let changes = [
            SessionEvent::ResourceUpdated("notes://a \"b\"\n/ü".into()),
            SessionEvent::ToolsChanged,
            SessionEvent::ResourcesChanged,
            SessionEvent::PromptsChanged,
        ];
        for change in changes {
            let body = change_message(&change);
            assert_eq!(read_change(&body), Ok(Some(change)));
        }
        assert_eq!(
            &change_message(&SessionEvent::ResourceUpdated("n://1".into()))[..],
            br#"{"v":1,"change":"resource_updated","uri":"n://1"}"#
        );
        assert_eq!(
            &change_message(&SessionEvent::PromptsChanged)[..],
            br#"{"v":1,"change":"prompts_changed"}"#
        );
        // What a later version may add is passed over, not refused.
        assert_eq!(
            read_change(br#"{"v":1,"change":"roots_changed","extra":true}"#),
            Ok(None)
        );
        assert_eq!(
            read_change(br#"{"v":2,"change":"tools_changed"}"#),
            Ok(None)
        );
        // A malformed message is an error, never a change.
        assert!(read_change(br#"{"v":1,"change":"resource_updated"}"#).is_err());
        assert!(read_change(b"{\"v\":").is_err());
        assert!(read_change(b"\xff").is_err());
    }
}

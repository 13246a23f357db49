//! The call a frame names when the frame itself cannot be read.
//!
//! A frame the bridge's reader refuses as a whole (a duplicate key, say
//! `"ok"` twice) would only earn the app an error frame, and the call it
//! answers would wait for its timeout although its answer has come and gone.
//! Here the frame is read once more, leniently (its members in order, as
//! text, duplicates kept), for the `type` and the request id: a result or a
//! progress report that names a call fails that call at once with the
//! reader's complaint, as a malformed answer does.

use std::borrow::Cow;
use std::fmt;

use openclaw_proxy_core::Inbound;
use serde::de::{DeserializeSeed, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A JSON object's members, in order, duplicates kept, values as text: as
/// many as can be read before the text goes wrong.
struct Members<'a, 'b>(&'b mut Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> DeserializeSeed<'de> for Members<'de, '_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Members<'de, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Each member is kept as soon as it is read, so that a fault
        // further on (a number such as `01`, a raw control character,
        // characters after the object) leaves those before it readable.
        while let Some(member) = map.next_entry::<Cow<'de, str>, &'de RawValue>()? {
            self.0.push(member);
        }
        Ok(())
    }
}

/// The malformed answer `text` is, when it is a result or a progress report
/// whose `type` and request id can still be read (they come before whatever
/// is wrong with it); the call it names then fails with `problem`.
pub(super) fn naming_call(text: &str, problem: &str) -> Option<Inbound> {
    let mut members = Vec::new();
    let mut reader = serde_json::Deserializer::from_str(text);
    // The text is known to be wrong; what matters is what was read first.
    let _ = Members(&mut members).deserialize(&mut reader);
    let string = |name: &str| {
        members
            .iter()
            .filter(|(key, _)| key == name)
            .find_map(|(_, value)| serde_json::from_str::<String>(value.get()).ok())
    };
    let result = match string("type")?.as_str() {
        "invoke_result" | "mcp_result" => true,
        "progress" => false,
        _ => return None,
    };
    let request_id = string("request_id").or_else(|| string("requestId"))?;
    Some(Inbound::Malformed {
        request_id,
        result,
        problem: problem.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_with_a_duplicate_key_still_names_its_call() {
        let frame = r#"{"type":"invoke_result","request_id":"s:1","ok":true,"ok":false}"#;
        match naming_call(frame, "duplicate field `ok`") {
            Some(Inbound::Malformed {
                request_id,
                result,
                problem,
            }) => {
                assert_eq!(request_id, "s:1");
                assert!(result);
                assert!(problem.contains("duplicate"));
            }
            other => panic!("{other:?}"),
        }
        let progress = r#"{"type":"progress","requestId":"s:2","progress":1,"progress":2}"#;
        assert!(matches!(
            naming_call(progress, "x"),
            Some(Inbound::Malformed { result: false, .. })
        ));
        // Nothing to fail: no call named, or not an answer.
        assert!(naming_call(r#"{"type":"invoke_result","ok":1,"ok":2}"#, "x").is_none());
        assert!(naming_call(r#"{"type":"pong","a":1,"a":2}"#, "x").is_none());
        assert!(naming_call("not json", "x").is_none());
    }

    #[test]
    fn a_result_that_goes_wrong_after_its_request_id_still_names_its_call() {
        for frame in [
            r#"{"type":"invoke_result","request_id":"s:1","ok":true,"content":"x"} trailing"#,
            r#"{"type":"invoke_result","request_id":"s:1","ok":true,"count":01}"#,
            "{\"type\":\"invoke_result\",\"request_id\":\"s:1\",\"content\":\"a\u{1}b\"}",
        ] {
            match naming_call(frame, "unreadable") {
                Some(Inbound::Malformed { request_id, .. }) => assert_eq!(request_id, "s:1"),
                other => panic!("{frame}: {other:?}"),
            }
        }
        // Gone wrong before the request id: nothing can be named.
        let early = r#"{"type":"invoke_result","ok":01,"request_id":"s:1"}"#;
        assert!(naming_call(early, "x").is_none());
    }
}

//! A request's params with one name replaced: the view's `{name}__{tool}`
//! becomes the app's own `tool` before the request goes on to the session.
//! Every other member stays the exact text the client sent, in its order
//! (the arguments and `_meta` reach the app unchanged, as on the session's
//! own URL).

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON object's members in order, their values unread.
struct Object(Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Object {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = Object;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(member) = map.next_entry::<String, Box<RawValue>>()? {
                    members.push(member);
                }
                Ok(Object(members))
            }
        }
        deserializer.deserialize_map(Members)
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl Object {
    fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.0.iter_mut().find(|(name, _)| name == key) {
            Some(member) => member.1 = value,
            None => self.0.push((key.to_owned(), value)),
        }
    }

    fn get(&self, key: &str) -> Option<&RawValue> {
        self.0
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| &**value)
    }
}

/// `params` (an object's text) with `key` set to the string `value`, or
/// with `key` of its object member `outer` set, when `outer` is given.
pub(super) fn renamed(
    params: &str,
    outer: Option<&str>,
    key: &str,
    value: &str,
) -> Result<Box<RawValue>, serde_json::Error> {
    let mut object: Object = serde_json::from_str(params)?;
    let value = serde_json::value::to_raw_value(value)?;
    match outer {
        None => object.set(key, value),
        Some(outer) => {
            let mut inner: Object = match object.get(outer) {
                Some(raw) => serde_json::from_str(raw.get())?,
                None => Object(Vec::new()),
            };
            inner.set(key, value);
            object.set(outer, serde_json::value::to_raw_value(&inner)?);
        }
    }
    serde_json::value::to_raw_value(&object)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_name_changes_and_the_rest_keeps_its_text_and_order() {
        let params = r#"{"name":"notes__find","arguments":{"n":9007199254740993,"x":1.50},"_meta":{"progressToken":"p"}}"#;
        let call = renamed(params, None, "name", "find").expect("renamed");
        assert_eq!(
            call.get(),
            r#"{"name":"find","arguments":{"n":9007199254740993,"x":1.50},"_meta":{"progressToken":"p"}}"#
        );
        let completion = r#"{"ref":{"type":"ref/prompt","name":"notes__greet"},"argument":{"name":"who","value":"A"}}"#;
        let complete = renamed(completion, Some("ref"), "name", "greet").expect("renamed");
        assert_eq!(
            complete.get(),
            r#"{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"A"}}"#
        );
        assert!(renamed("[1]", None, "name", "x").is_err());
    }
}

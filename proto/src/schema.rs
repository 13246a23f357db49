//! A tool's input schema as the proxy keeps it: the schema's compact JSON
//! text, checked once when the tool is registered.
//!
//! Why text and not a `serde_json::Value` tree: every node of a tree is an
//! allocation of its own (a map entry, a `String`, a `Value`), so a 1 MB
//! schema of 34,000 small properties took 27 MB as a tree, and a client
//! holding the app token (which ships in every copy of an app) could make
//! the server hold gigabytes with a few hundred sessions. As text the
//! schema costs its length. The check ([`parse`]) reads the text once
//! without building a tree, accepting exactly what `serde_json` would parse
//! into one (the same nesting limit, no number out of range), so a schema
//! can always be rendered as the tree an MCP library wants when a
//! `tools/list` asks for it ([`Schema::to_object`]).

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, LazyLock};

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A validated input schema: a JSON object whose `"type"`, if present, is
/// `"object"`, as compact JSON text.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Schema(Arc<str>);

/// The schema of a tool that gave none: any object.
const OBJECT_SCHEMA: &str = r#"{"type":"object"}"#;

impl Schema {
    /// `{"type":"object"}`, shared by every tool that gave no schema.
    pub fn object() -> Self {
        static OBJECT: LazyLock<Schema> = LazyLock::new(|| Schema(OBJECT_SCHEMA.into()));
        OBJECT.clone()
    }

    /// Text already validated by [`parse`] (stored by this server or
    /// another node of its cluster), compacted.
    pub fn trusted(json: &str) -> Self {
        if json == OBJECT_SCHEMA {
            return Self::object();
        }
        Self(compact(json).into())
    }

    /// The compact JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The length of the text in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the text is empty (never, for a validated schema).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The schema as a JSON object tree, built on each call (for a
    /// `tools/list` answer): as large as the tree is, it lives only as long
    /// as the answer is being rendered.
    pub fn to_object(&self) -> Map<String, Value> {
        // Validated as something serde_json parses into an object.
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    /// The schema as raw JSON, for a message that embeds it unchanged.
    pub fn to_raw(&self) -> Box<RawValue> {
        RawValue::from_string(self.0.to_string())
            .unwrap_or_else(|_| RawValue::from_string(OBJECT_SCHEMA.to_owned()).unwrap_or_default())
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 256;
        match self.0.char_indices().nth(SHOWN) {
            Some((cut, _)) => write!(f, "Schema({}… {} bytes)", &self.0[..cut], self.0.len()),
            None => write!(f, "Schema({})", self.0),
        }
    }
}

impl serde::Serialize for Schema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_raw().serialize(serializer)
    }
}

/// What the text of a schema turned out to be.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// An object: the schema, unless its `"type"` is not `"object"` (the
    /// offending value's JSON then).
    Object(Result<Schema, String>),
    /// `null`: no schema given.
    Null,
    /// Any other kind of JSON value (its name, as `json_kind` says).
    Other(&'static str),
}

/// Reads `json` without building a tree: `Err` with serde_json's reason
/// when it is not JSON a tree could hold.
pub fn parse(json: &str) -> Result<Parsed, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let top = deserializer.deserialize_any(TopLevel)?;
    deserializer.end()?;
    Ok(match top {
        Top::Object(Ok(())) if json.len() == OBJECT_SCHEMA.len() && json == OBJECT_SCHEMA => {
            Parsed::Object(Ok(Schema::object()))
        }
        Top::Object(Ok(())) => Parsed::Object(Ok(Schema(compact(json).into()))),
        Top::Object(Err(found)) => Parsed::Object(Err(found)),
        Top::Null => Parsed::Null,
        Top::Other(kind) => Parsed::Other(kind),
    })
}

/// Valid JSON text without the whitespace between its tokens.
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            out.push(c);
            continue;
        }
        match c {
            ' ' | '\t' | '\n' | '\r' => {}
            '"' => {
                in_string = true;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

enum Top {
    Object(Result<(), String>),
    Null,
    Other(&'static str),
}

/// The top of a schema: its kind, and for an object whether every
/// `"type"` key says `"object"`.
struct TopLevel;

impl<'de> Visitor<'de> for TopLevel {
    type Value = Top;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top, A::Error> {
        let mut verdict = Ok(());
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == "type" {
                let kind: Value = map.next_value()?;
                if verdict.is_ok() && kind != "object" {
                    verdict = Err(kind.to_string());
                }
            } else {
                map.next_value::<Valid>()?;
            }
        }
        Ok(Top::Object(verdict))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Top, A::Error> {
        Valid.visit_seq(seq)?;
        Ok(Top::Other("an array"))
    }

    fn visit_unit<E>(self) -> Result<Top, E> {
        Ok(Top::Null)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Top, E> {
        Ok(Top::Other("a boolean"))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Top, E> {
        Ok(Top::Other("a number"))
    }

    fn visit_str<E>(self, _: &str) -> Result<Top, E> {
        Ok(Top::Other("a string"))
    }
}

/// Any JSON value, read and dropped as it is read: what serde_json would
/// parse into a tree (its nesting limit and number checks apply, as they
/// do to every value it reads), without the tree.
struct Valid;

impl<'de> de::Deserialize<'de> for Valid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Valid)
    }
}

impl<'de> DeserializeSeed<'de> for Valid {
    type Value = Valid;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Valid, D::Error> {
        deserializer.deserialize_any(Valid)
    }
}

impl<'de> Visitor<'de> for Valid {
    type Value = Valid;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Valid, A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value::<Valid>()?;
        }
        Ok(Valid)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Valid, A::Error> {
        while seq.next_element::<Valid>()?.is_some() {}
        Ok(Valid)
    }

    fn visit_unit<E>(self) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Valid, E> {
        Ok(Valid)
    }

    fn visit_str<E>(self, _: &str) -> Result<Valid, E> {
        Ok(Valid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(json: &str) -> Schema {
        match parse(json) {
            Ok(Parsed::Object(Ok(schema))) => schema,
            other => panic!("{json}: {other:?}"),
        }
    }

    #[test]
    fn schemas_are_kept_compact_and_render_as_their_tree() {
        let text = "{ \"type\" : \"object\",\n \"properties\": {\"a b\": {\"description\": \"x \\\" y \"}}, \"n\": 1.50 }";
        let kept = schema(text);
        assert_eq!(
            kept.as_str(),
            r#"{"type":"object","properties":{"a b":{"description":"x \" y "}},"n":1.50}"#
        );
        let tree: Value = serde_json::from_str(text).expect("json");
        assert_eq!(Value::Object(kept.to_object()), tree);
        assert_eq!(Schema::trusted(kept.as_str()), kept);
        assert!(Arc::ptr_eq(&schema(OBJECT_SCHEMA).0, &Schema::object().0));
    }

    #[test]
    fn what_a_tree_cannot_hold_is_refused() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        assert!(parse(&deep).is_err(), "nesting beyond serde_json's limit");
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        assert!(parse(r#"{"a":1e400}"#).is_err(), "a number out of range");
        assert!(parse(r#"{"a":1} x"#).is_err(), "trailing characters");
        assert!(
            parse(r#"{"a":"\ud800"}"#).is_err()
                == serde_json::from_str::<Value>(r#"{"a":"\ud800"}"#).is_err()
        );
    }

    #[test]
    fn kinds_and_types_are_reported() {
        assert_eq!(parse("null").ok(), Some(Parsed::Null));
        assert_eq!(parse("[1, {}]").ok(), Some(Parsed::Other("an array")));
        assert_eq!(parse("\"s\"").ok(), Some(Parsed::Other("a string")));
        assert_eq!(
            parse(r#"{"type":"object","type":["string"]}"#).ok(),
            Some(Parsed::Object(Err(r#"["string"]"#.into()))),
            "every \"type\" key is checked"
        );
    }
}

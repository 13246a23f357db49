//! The pieces MCP results are made of, typed so that an app cannot misspell a
//! field the client looks for: content blocks (text, image, audio, an
//! embedded resource, a link to a resource), the contents of a resource, and
//! the annotations and icons that may ride on them.
//!
//! They serialise to MCP's JSON exactly (camelCase names, a `type` tag on
//! content blocks, absent optional fields left out). Binary data travels as
//! base64, as MCP carries it; the `*_bytes` constructors encode it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;

/// A value as JSON text; values of this crate's own types always serialise.
pub(crate) fn json_text(value: &impl Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Who a message or an annotation is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human side of the conversation.
    User,
    /// The model.
    Assistant,
}

/// MCP `annotations`: hints to the client about how to use a piece of
/// content.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[must_use]
pub struct Annotations {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    audience: Vec<Role>,
    #[serde(skip_serializing_if = "Option::is_none")]
    priority: Option<f64>,
    #[serde(rename = "lastModified", skip_serializing_if = "Option::is_none")]
    last_modified: Option<String>,
}

impl Annotations {
    /// No hints yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Who the content is meant for.
    pub fn audience(mut self, audience: impl IntoIterator<Item = Role>) -> Self {
        self.audience = audience.into_iter().collect();
        self
    }

    /// How important it is, from 0 (optional) to 1 (required).
    pub fn priority(mut self, priority: f64) -> Self {
        self.priority = Some(priority);
        self
    }

    /// When it last changed, as an ISO 8601 timestamp.
    pub fn last_modified(mut self, timestamp: impl Into<String>) -> Self {
        self.last_modified = Some(timestamp.into());
        self
    }
}

/// An icon a client may show beside a resource, template or prompt.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[must_use]
pub struct Icon {
    src: String,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sizes: Vec<String>,
}

impl Icon {
    /// An icon at `src` (an `https:` or `data:` URI).
    pub fn new(src: impl Into<String>) -> Self {
        Self {
            src: src.into(),
            mime_type: None,
            sizes: Vec::new(),
        }
    }

    /// Its MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// The sizes it comes in, such as `"48x48"` or `"any"`.
    pub fn sizes(mut self, sizes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.sizes = sizes.into_iter().map(Into::into).collect();
        self
    }
}

/// What a resource holds, as `resources/read` returns it and as a prompt or
/// tool embeds it: text, or binary data in base64.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[must_use]
pub struct ResourceContents {
    uri: String,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    #[serde(flatten)]
    body: Body,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
enum Body {
    Text { text: String },
    Blob { blob: String },
}

impl ResourceContents {
    /// Text contents of the resource at `uri`.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            mime_type: None,
            body: Body::Text { text: text.into() },
        }
    }

    /// Binary contents of the resource at `uri`, already in base64.
    pub fn blob(uri: impl Into<String>, base64: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            mime_type: None,
            body: Body::Blob {
                blob: base64.into(),
            },
        }
    }

    /// Binary contents of the resource at `uri`, encoded here.
    pub fn blob_bytes(uri: impl Into<String>, bytes: impl AsRef<[u8]>) -> Self {
        Self::blob(uri, BASE64.encode(bytes))
    }

    /// Its MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// The URI these contents belong to.
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

/// A link to a resource, for the client to read if it wants (MCP
/// `ResourceLink`): the resource's description without its contents.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[must_use]
pub struct ResourceLink {
    uri: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    #[serde(rename = "mimeType", skip_serializing_if = "Option::is_none")]
    mime_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<Annotations>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    icons: Vec<Icon>,
}

impl ResourceLink {
    /// A link to the resource at `uri`, called `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            annotations: None,
            icons: Vec::new(),
        }
    }

    /// A human-readable title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the resource holds.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Its MIME type.
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }

    /// Its size in bytes.
    pub fn size(mut self, size: u64) -> Self {
        self.size = Some(size);
        self
    }

    /// Hints for the client.
    pub fn annotations(mut self, annotations: Annotations) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// Icons for it.
    pub fn icons(mut self, icons: impl IntoIterator<Item = Icon>) -> Self {
        self.icons = icons.into_iter().collect();
        self
    }
}

/// One MCP content block, as a prompt message (or a tool result) carries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Plain text.
    #[non_exhaustive]
    Text {
        /// The text.
        text: String,
        /// Hints for the client.
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    /// An image, base64-encoded.
    #[non_exhaustive]
    Image {
        /// The image's bytes in base64.
        data: String,
        /// Its MIME type, such as `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Hints for the client.
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    /// A sound, base64-encoded.
    #[non_exhaustive]
    Audio {
        /// The audio's bytes in base64.
        data: String,
        /// Its MIME type, such as `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Hints for the client.
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    /// A resource's contents, embedded.
    #[non_exhaustive]
    Resource {
        /// The contents.
        resource: ResourceContents,
        /// Hints for the client.
        #[serde(skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
    },
    /// A link to a resource the client may read.
    ResourceLink(ResourceLink),
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text {
            text: text.into(),
            annotations: None,
        }
    }

    /// An image block from base64 data.
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Image {
            data: base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
        }
    }

    /// An image block from raw bytes, encoded here.
    pub fn image_bytes(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Self {
        Self::image(BASE64.encode(bytes), mime_type)
    }

    /// An audio block from base64 data.
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Audio {
            data: base64.into(),
            mime_type: mime_type.into(),
            annotations: None,
        }
    }

    /// An audio block from raw bytes, encoded here.
    pub fn audio_bytes(bytes: impl AsRef<[u8]>, mime_type: impl Into<String>) -> Self {
        Self::audio(BASE64.encode(bytes), mime_type)
    }

    /// An embedded resource.
    pub fn resource(contents: ResourceContents) -> Self {
        Self::Resource {
            resource: contents,
            annotations: None,
        }
    }

    /// A link to a resource.
    pub fn resource_link(link: ResourceLink) -> Self {
        Self::ResourceLink(link)
    }

    /// The same block with these hints for the client.
    #[must_use]
    pub fn with_annotations(mut self, hints: Annotations) -> Self {
        match &mut self {
            Self::Text { annotations, .. }
            | Self::Image { annotations, .. }
            | Self::Audio { annotations, .. }
            | Self::Resource { annotations, .. } => *annotations = Some(hints),
            Self::ResourceLink(link) => link.annotations = Some(hints),
        }
        self
    }
}

impl From<&str> for Content {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<String> for Content {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, to_value};

    use super::*;

    #[test]
    fn resource_contents_are_text_or_a_base64_blob() {
        let text = ResourceContents::text("test://static-text", "hello").mime_type("text/plain");
        assert_eq!(
            to_value(&text).expect("json"),
            json!({"uri": "test://static-text", "mimeType": "text/plain", "text": "hello"})
        );
        let blob = ResourceContents::blob_bytes("test://bin", [0xff, 0x00, 0x10]);
        assert_eq!(
            to_value(&blob).expect("json"),
            json!({"uri": "test://bin", "blob": "/wAQ"})
        );
    }

    #[test]
    fn every_content_type_has_its_mcp_shape() {
        let blocks = [
            Content::text("hi"),
            Content::image("iVBO", "image/png"),
            Content::audio_bytes(b"RIFF", "audio/wav"),
            Content::resource(ResourceContents::text("a://b", "embedded")),
            Content::resource_link(
                ResourceLink::new("a://c", "c")
                    .mime_type("text/markdown")
                    .size(12)
                    .icons([Icon::new("https://x/icon.png").sizes(["48x48"])]),
            ),
        ];
        assert_eq!(
            to_value(blocks).expect("json"),
            json!([
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "iVBO", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "a://b", "text": "embedded"}},
                {"type": "resource_link", "uri": "a://c", "name": "c", "mimeType": "text/markdown",
                 "size": 12, "icons": [{"src": "https://x/icon.png", "sizes": ["48x48"]}]}
            ])
        );
    }

    #[test]
    fn annotations_ride_on_any_block() {
        let hints = Annotations::new()
            .audience([Role::User, Role::Assistant])
            .priority(0.5)
            .last_modified("2026-01-01T00:00:00Z");
        let expected = json!({"audience": ["user", "assistant"], "priority": 0.5, "lastModified": "2026-01-01T00:00:00Z"});
        let text = Content::text("x").with_annotations(hints.clone());
        assert_eq!(to_value(text).expect("json")["annotations"], expected);
        let link = Content::resource_link(ResourceLink::new("a://b", "b")).with_annotations(hints);
        assert_eq!(to_value(link).expect("json")["annotations"], expected);
    }
}

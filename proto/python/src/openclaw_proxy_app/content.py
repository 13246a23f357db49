"""MCP content, and how a handler's return value becomes an MCP result.

A tool may return a `str` (one text block), a `dict`, dataclass or pydantic
model (structured content, with its JSON as text), a list of content blocks
(passed as they are), or None. Resource handlers return `str`, `bytes` or
`ResourceContents`; prompt handlers a `str`, `PromptMessage`s or both."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import pydantic

Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class TextContent:
    text: str
    type: Literal["text"] = field(default="text", init=False)

    def to_mcp(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True)
class ImageContent:
    """An image; `data` is its bytes (sent as base64)."""

    data: bytes
    mime_type: str

    def to_mcp(self) -> dict[str, Any]:
        return {"type": "image", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(frozen=True)
class AudioContent:
    data: bytes
    mime_type: str

    def to_mcp(self) -> dict[str, Any]:
        return {"type": "audio", "data": _b64(self.data), "mimeType": self.mime_type}


@dataclass(frozen=True)
class ResourceContents:
    """One resource's contents: `text`, or `blob` bytes (sent as base64)."""

    uri: str
    text: str | None = None
    blob: bytes | None = None
    mime_type: str | None = None

    def to_mcp(self) -> dict[str, Any]:
        out: dict[str, Any] = {"uri": self.uri}
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.blob is not None:
            out["blob"] = _b64(self.blob)
        else:
            out["text"] = self.text or ""
        return out


@dataclass(frozen=True)
class EmbeddedResource:
    resource: ResourceContents

    def to_mcp(self) -> dict[str, Any]:
        return {"type": "resource", "resource": self.resource.to_mcp()}


@dataclass(frozen=True)
class ResourceLink:
    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None

    def to_mcp(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "resource_link", "uri": self.uri, "name": self.name}
        if self.description:
            out["description"] = self.description
        if self.mime_type:
            out["mimeType"] = self.mime_type
        return out


Content = Union[TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink]
CONTENT_TYPES = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)


@dataclass(frozen=True)
class PromptMessage:
    role: Role
    content: Content | str

    def to_mcp(self) -> dict[str, Any]:
        content = TextContent(self.content) if isinstance(self.content, str) else self.content
        return {"role": self.role, "content": content.to_mcp()}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def plain(value: Any) -> Any:
    """A dataclass or pydantic model as JSON-ready data; others unchanged."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return pydantic.TypeAdapter(type(value)).dump_python(value, mode="json")
    return value


def tool_content_json(value: Any) -> str:
    """A tool's return value as ToolResult.content_json: an object becomes
    structured content, a string one text block, a list of content blocks
    passes through; any other JSON value is wrapped as {"result": value}."""
    if value is None:
        return ""
    if isinstance(value, CONTENT_TYPES):
        return json.dumps([value.to_mcp()])
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, CONTENT_TYPES) for v in value):
        return json.dumps([v.to_mcp() for v in value])
    value = plain(value)
    if isinstance(value, (str, dict)):
        return json.dumps(value)
    return json.dumps({"result": value})


def read_result(uri: str, value: Any, mime_type: str | None) -> dict[str, Any]:
    """A resource handler's return value as a `resources/read` result."""
    if isinstance(value, dict):
        return value  # the raw MCP result
    items: Sequence[Any] = value if isinstance(value, (list, tuple)) else [value]
    contents = []
    for item in items:
        if isinstance(item, ResourceContents):
            contents.append(item.to_mcp())
        elif isinstance(item, (bytes, bytearray)):
            contents.append(ResourceContents(uri, blob=bytes(item), mime_type=mime_type).to_mcp())
        elif isinstance(item, str):
            contents.append(ResourceContents(uri, text=item, mime_type=mime_type).to_mcp())
        else:
            raise TypeError(f"a resource handler returned {type(item).__name__}; return str, bytes or ResourceContents")
    return {"contents": contents}


def prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    """A prompt handler's return value as a `prompts/get` result."""
    if isinstance(value, dict):
        return value
    items: Sequence[Any] = value if isinstance(value, (list, tuple)) else [value]
    messages = []
    for item in items:
        if isinstance(item, PromptMessage):
            messages.append(item.to_mcp())
        elif isinstance(item, str) or isinstance(item, CONTENT_TYPES):
            messages.append(PromptMessage("user", item).to_mcp())
        else:
            raise TypeError(f"a prompt handler returned {type(item).__name__}; return str or PromptMessage")
    result: dict[str, Any] = {"messages": messages}
    if description:
        result["description"] = description
    return result

"""How handlers' return values become MCP results, and how arguments are
read into Python values."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pydantic
import pytest

from openclaw_proxy_app import (
    Context,
    ImageContent,
    PromptMessage,
    ResourceContents,
    TextContent,
    ToolError,
)
from openclaw_proxy_app.content import prompt_result, read_result, tool_content_json
from openclaw_proxy_app.signature import Signature
from openclaw_proxy_app.uri_template import UriTemplate


@dataclasses.dataclass
class Echoed:
    echoed_text: str


class Model(pydantic.BaseModel):
    count: int


@pytest.mark.parametrize("value, expected", [
    ("hello", "hello"),
    ({"a": 1}, {"a": 1}),
    (Echoed("x"), {"echoed_text": "x"}),
    (Model(count=2), {"count": 2}),
    (42, {"result": 42}),
    ([1, 2], {"result": [1, 2]}),
    (TextContent("hi"), [{"type": "text", "text": "hi"}]),
    ([TextContent("a"), ImageContent(b"\x00", "image/png")],
     [{"type": "text", "text": "a"}, {"type": "image", "data": "AA==", "mimeType": "image/png"}]),
])
def test_tool_results(value: Any, expected: Any) -> None:
    assert json.loads(tool_content_json(value)) == expected


def test_none_is_an_empty_result() -> None:
    assert tool_content_json(None) == ""


def test_read_results() -> None:
    assert read_result("a:b", "text", "text/plain") == {
        "contents": [{"uri": "a:b", "mimeType": "text/plain", "text": "text"}]}
    assert read_result("a:b", b"\x01\x02", None) == {"contents": [{"uri": "a:b", "blob": "AQI="}]}
    assert read_result("a:b", [ResourceContents("a:c", text="x")], None) == {
        "contents": [{"uri": "a:c", "text": "x"}]}
    raw = {"contents": [], "ttlMs": 5}
    assert read_result("a:b", raw, None) is raw
    with pytest.raises(TypeError, match="return str, bytes or ResourceContents"):
        read_result("a:b", 3, None)


def test_prompt_results() -> None:
    assert prompt_result("hi", None) == {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}]}
    assert prompt_result([PromptMessage("assistant", "ok")], "d") == {
        "messages": [{"role": "assistant", "content": {"type": "text", "text": "ok"}}], "description": "d"}


def test_arguments_are_validated_and_converted() -> None:
    def handler(count: int, names: list[str], ctx: Context) -> None: ...

    signature = Signature(handler, "tool")
    assert signature.bind({"count": "3", "names": ["a"]}, None) == {"count": 3, "names": ["a"], "ctx": None}
    with pytest.raises(ToolError, match="invalid arguments: count: "):
        signature.bind({"count": "three", "names": []}, None)
    with pytest.raises(ToolError, match="names: Field required"):
        signature.bind({"count": 1}, None)


def test_a_model_parameter_receives_an_instance() -> None:
    def handler(args: Echoed) -> None: ...

    assert Signature(handler, "tool").bind({"echoed_text": "x"}, None) == {"args": Echoed("x")}


def test_uri_templates_match_one_segment_or_a_path_and_decode() -> None:
    template = UriTemplate("notes:///{folder}/{name}")
    assert template.match("notes:///a/b%20c") == {"folder": "a", "name": "b c"}
    assert template.match("notes:///a/b/c") is None
    assert UriTemplate("files://{+path}").match("files://x/y/z.txt") == {"path": "x/y/z.txt"}
    assert UriTemplate("notes:///index").match("notes:///index") == {}


@pytest.mark.parametrize("template", ["notes:///{?q}", "notes:///{a}{b}", "notes:///{a,b}"])
def test_unsupported_templates_are_refused_naming_them(template: str) -> None:
    with pytest.raises(ValueError, match="URI template"):
        UriTemplate(template)

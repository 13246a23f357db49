"""How MCP requests from the bridge reach the app's handlers, and the
JSON-RPC errors they end with."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from openclaw_proxy_app import App, Caller, ClientInfo, CompletionRequest, Context, McpError
from openclaw_proxy_app._proto import proxy_pb2 as pb
from openclaw_proxy_app.serving import _Backoff


class Recorder:
    """Where a context's messages go: kept, for the test to read."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.sent: list[pb.AppMessage] = []

    def send_soon(self, message: pb.AppMessage) -> None:
        self.sent.append(message)

    async def ask(self, request_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"color": "teal"}}


def context(link: Recorder, method: str, revision: str = "2025-11-25") -> Context:
    return Context(request_id="s:1", method=method, client=ClientInfo("c", "1", revision),
                   caller=Caller("session_token"), meta={}, trace_parent="", _link=link)


def notes_app() -> App:
    app = App("http://127.0.0.1:1")

    @app.resource("notes:///index")
    def index() -> str:
        return "welcome, plans"

    @app.resource("notes:///{name}", mime_type="text/markdown")
    async def note(name: str, ctx: Context) -> str:
        if name != "welcome":
            raise McpError.resource_not_found(f"notes:///{name}")
        ctx.log("info", f"reading {name}", logger="notes")
        return "# Welcome"

    @app.prompt
    def summarise(note: str, style: str = "brief") -> str:
        return f"Summarise {note} ({style})."

    @app.completion
    def complete(request: CompletionRequest) -> list[str]:
        return [v for v in ["brief", "bulleted", "long"] if v.startswith(request.value)]

    return app


async def test_a_read_goes_to_the_resource_or_the_first_template_that_fits() -> None:
    app, link = notes_app(), Recorder()
    assert await app.answer_mcp("resources/read", {"uri": "notes:///index"}, context(link, "resources/read")) == {
        "contents": [{"uri": "notes:///index", "text": "welcome, plans"}]}
    assert await app.answer_mcp("resources/read", {"uri": "notes:///welcome"}, context(link, "resources/read")) == {
        "contents": [{"uri": "notes:///welcome", "mimeType": "text/markdown", "text": "# Welcome"}]}
    [record] = link.sent
    assert record.log.level == "info" and json.loads(record.log.data_json) == "reading welcome"


async def test_an_unknown_uri_is_resource_not_found_naming_it() -> None:
    app = notes_app()
    with pytest.raises(McpError) as raised:
        await app.answer_mcp("resources/read", {"uri": "other:x"}, context(Recorder(), "resources/read"))
    assert (raised.value.code, raised.value.data) == (-32002, {"uri": "other:x"})


async def test_prompts_take_their_arguments_and_refuse_missing_ones() -> None:
    app, ctx = notes_app(), context(Recorder(), "prompts/get")
    result = await app.answer_mcp("prompts/get", {"name": "summarise", "arguments": {"note": "plans"}}, ctx)
    assert result == {"messages": [{"role": "user", "content": {"type": "text", "text": "Summarise plans (brief)."}}]}
    with pytest.raises(McpError) as raised:
        await app.answer_mcp("prompts/get", {"name": "summarise", "arguments": {}}, ctx)
    assert raised.value.code == -32602 and "note" in raised.value.message
    with pytest.raises(McpError) as raised:
        await app.answer_mcp("prompts/get", {"name": "nope"}, ctx)
    assert raised.value.code == -32602 and "'nope'" in raised.value.message


async def test_completions_and_unknown_methods() -> None:
    app, ctx = notes_app(), context(Recorder(), "completion/complete")
    params = {"ref": {"type": "ref/prompt", "name": "summarise"}, "argument": {"name": "style", "value": "b"}}
    assert await app.answer_mcp("completion/complete", params, ctx) == {
        "completion": {"values": ["brief", "bulleted"]}}
    with pytest.raises(McpError) as raised:
        await app.answer_mcp("tasks/list", {}, ctx)
    assert raised.value.code == -32601


async def test_elicit_reads_the_answer_into_the_type_asked_for() -> None:
    import dataclasses

    @dataclasses.dataclass
    class Color:
        color: str

    answer = await context(Recorder(), "tools/call").elicit("Pick a color", Color)
    assert answer.action == "accept" and answer.data == Color("teal")


def test_backoff_grows_with_jitter_up_to_its_ceiling_and_resets() -> None:
    backoff = _Backoff(ceiling=2.0)
    delays = [backoff.next() for _ in range(8)]
    assert 0.125 <= delays[0] <= 0.375
    assert all(delay <= 3.0 for delay in delays)
    assert delays[-1] >= 1.0
    backoff.reset()
    assert backoff.next() <= 0.375


async def test_beyond_the_running_and_waiting_calls_a_new_one_is_busy() -> None:
    from openclaw_proxy_app.serving import Serving

    serving = Serving(App("http://127.0.0.1:1", max_concurrent_calls=2))
    serving._admitted = 4  # two running, two waiting
    assert serving._busy() is None
    serving._admitted = 5
    assert serving._busy() == ("the app is busy: 2 calls are running and 2 more are waiting; try again shortly")

"""The WebSocket bridge's JSON frames (docs/websocket-bridge.md) and the
protobuf messages serving works with, translated both ways."""

from __future__ import annotations

import json

from openclaw_proxy_app import App
from openclaw_proxy_app._proto import proxy_pb2 as pb
from openclaw_proxy_app.transport import app_frame, declarations_json, proxy_message


def test_an_invoke_frame_becomes_an_invoke_tool_message_with_its_caller() -> None:
    message = proxy_message({
        "type": "invoke_tool", "mcpSessionId": "S", "request_id": "S:1", "requestId": "S:1",
        "tool_name": "echo_text", "toolName": "echo_text", "arguments": {"text": "hello", "n": 9223372036854775807},
        "_meta": {"progressToken": "t"}, "traceparent": "00-a-b-01",
        "client": {"name": "openclaw", "version": "2026.9.6", "protocolVersion": "2025-11-25"},
        "caller": {"kind": "oauth", "issuer": "https://id", "subject": "u", "client_id": "c", "scopes": ["x"]}})
    assert message is not None and message.WhichOneof("kind") == "invoke"
    invoke = message.invoke
    assert (invoke.request_id, invoke.tool_name) == ("S:1", "echo_text")
    assert json.loads(invoke.arguments_json) == {"text": "hello", "n": 9223372036854775807}
    assert json.loads(invoke.meta_json) == {"progressToken": "t"}
    assert invoke.client.protocol_version == "2025-11-25" and invoke.trace_parent == "00-a-b-01"
    assert (invoke.caller.kind, invoke.caller.subject, list(invoke.caller.scopes)) == ("oauth", "u", ["x"])


def test_the_other_proxy_frames() -> None:
    cancel = proxy_message({"type": "cancel_tool", "requestId": "S:1", "reason": "gone"})
    assert cancel is not None and (cancel.cancel.request_id, cancel.cancel.reason) == ("S:1", "gone")
    ping = proxy_message({"type": "ping", "nonce": 3})
    assert ping is not None and ping.ping.nonce == 3
    answered = proxy_message({"type": "client_response", "request_id": "S:7", "id": "1",
                              "result": {"action": "accept"}})
    assert answered is not None and json.loads(answered.client_response.result_json) == {"action": "accept"}
    failed = proxy_message({"type": "client_response", "request_id": "S:7", "id": "2",
                            "error": {"code": -32601, "message": "no"}})
    assert failed is not None and failed.client_response.error.code == -32601
    request = proxy_message({"type": "mcp_request", "request_id": "S:5", "method": "resources/read",
                             "params": {"uri": "notes:///7"}})
    assert request is not None and json.loads(request.mcp_request.params_json) == {"uri": "notes:///7"}
    assert proxy_message({"type": "something-new"}) is None


def test_app_messages_become_frames() -> None:
    result = app_frame(pb.AppMessage(result=pb.ToolResult(request_id="S:1", ok=True, content_json='{"a":1}')))
    assert result == {"type": "invoke_result", "request_id": "S:1", "ok": True, "content": {"a": 1}}
    failed = app_frame(pb.AppMessage(result=pb.ToolResult(request_id="S:2", ok=False, error="read-only")))
    assert failed == {"type": "invoke_result", "request_id": "S:2", "ok": False, "error": "read-only"}
    progress = app_frame(pb.AppMessage(progress=pb.ToolProgress(request_id="S:3", progress=1, total=4)))
    assert progress == {"type": "progress", "request_id": "S:3", "progress": 1.0, "total": 4.0}
    error = app_frame(pb.AppMessage(mcp_result=pb.McpResult(
        request_id="S:6", error=pb.McpError(code=-32002, message="nope", data_json='{"uri":"x"}'))))
    assert error == {"type": "mcp_result", "request_id": "S:6",
                     "error": {"code": -32002, "message": "nope", "data": {"uri": "x"}}}
    assert app_frame(pb.AppMessage(hello=pb.Hello(session_id="S"))) is None


def test_declarations_are_spelled_as_the_rest_body_spells_them() -> None:
    app = App("http://127.0.0.1:1")

    @app.tool(confirm=True, timeout_seconds=5)
    def wipe() -> None: ...

    @app.resource("notes:///{name}", mime_type="text/markdown")
    def note(name: str) -> str:
        return name

    @app.prompt
    def summarise(note: str) -> str:
        return note

    body = declarations_json(*app.declarations())
    assert body["tools"] == [{"name": "wipe", "description": "", "confirm": True, "timeout_seconds": 5,
                              "input_schema": {"type": "object", "properties": {}}}]
    assert body["resource_templates"] == [{"uriTemplate": "notes:///{name}", "name": "note",
                                           "mimeType": "text/markdown"}]
    assert body["prompts"] == [{"name": "summarise", "arguments": [{"name": "note", "required": True}]}]

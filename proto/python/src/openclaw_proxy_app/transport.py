"""The two ways to reach the proxy, behind one interface: gRPC
(`SessionService.CreateSession` and `BridgeService.Attach`, the default) and,
for networks without HTTP/2, REST registration and the WebSocket bridge,
whose JSON frames are translated to and from the same protobuf messages, so
that serving is written once.

Each tells serving how a bridge or a registration ended: `SessionGone` (the
proxy no longer knows the session: register anew), `BridgeLost` (try again
after a delay) or `AppError` (retrying cannot help)."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import grpc
import grpc.aio
import websockets
from google.protobuf import json_format
from websockets.asyncio.client import connect

from ._proto import proxy_pb2 as pb
from ._rpc import Stubs
from .errors import AppError

Dispatch = Callable[[pb.ProxyMessage], None]

_TOKEN_REFUSED = "the proxy refused the token; check app_token (the proxy's OPENCLAW_PROXY_APP_TOKEN)"
_DECLARATIONS_REFUSED = "the proxy refused the app's declarations"
_TAKEN_OVER = "another bridge took this session over; serving stopped so as not to fight it"


class SessionGone(Exception):
    """The proxy no longer knows the session."""


class BridgeLost(Exception):
    """The connection failed or the bridge ended; worth trying again."""


class Transport(Protocol):
    async def create(self, request: pb.CreateSessionRequest, app_token: str) -> pb.CreateSessionResponse: ...

    async def attach(self, session_id: str, token: str, outbox: asyncio.Queue[pb.AppMessage | None],
                     dispatch: Dispatch) -> None: ...

    async def delete(self, session_id: str, token: str) -> None: ...

    async def close(self) -> None: ...


def _bearer(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),) if token else ()


class GrpcTransport:
    _FATAL = {
        grpc.StatusCode.UNAUTHENTICATED: _TOKEN_REFUSED,
        grpc.StatusCode.PERMISSION_DENIED: "the proxy refused the token for this session",
        grpc.StatusCode.INVALID_ARGUMENT: _DECLARATIONS_REFUSED,
        grpc.StatusCode.ABORTED: _TAKEN_OVER,
    }

    def __init__(self, proxy_url: str, timeout: float) -> None:
        parsed = urllib.parse.urlsplit(proxy_url)
        options = [("grpc.keepalive_time_ms", 20000), ("grpc.keepalive_timeout_ms", 10000),
                   ("grpc.max_reconnect_backoff_ms", 5000)]
        self._channel = (grpc.aio.secure_channel(parsed.netloc, grpc.ssl_channel_credentials(), options)
                         if parsed.scheme == "https" else grpc.aio.insecure_channel(parsed.netloc, options))
        self._stubs = Stubs(self._channel)
        self._timeout = timeout

    def _fail(self, error: grpc.aio.AioRpcError) -> Exception:
        code = error.code()
        if code == grpc.StatusCode.NOT_FOUND:
            return SessionGone()
        if code in self._FATAL:
            return AppError(f"{self._FATAL[code]} ({code.name}: {error.details()})")
        return BridgeLost(f"{code.name}: {error.details()}")

    async def create(self, request: pb.CreateSessionRequest, app_token: str) -> pb.CreateSessionResponse:
        try:
            return await self._stubs.create_session(request, metadata=_bearer(app_token), timeout=self._timeout)
        except grpc.aio.AioRpcError as error:
            raise self._fail(error) from None

    async def attach(self, session_id: str, token: str, outbox: asyncio.Queue[pb.AppMessage | None],
                     dispatch: Dispatch) -> None:
        async def outgoing() -> AsyncIterator[pb.AppMessage]:
            yield pb.AppMessage(hello=pb.Hello(session_id=session_id))
            while (message := await outbox.get()) is not None:
                yield message

        # mcp-session-id lets a load balancer send the bridge where the
        # session's MCP calls go.
        call = self._stubs.attach(outgoing(), metadata=_bearer(token) + (("mcp-session-id", session_id),))
        try:
            message = await asyncio.wait_for(call.read(), self._timeout)
            while message is not grpc.aio.EOF:
                assert isinstance(message, pb.ProxyMessage)
                dispatch(message)
                message = await call.read()
        except grpc.aio.AioRpcError as error:
            raise self._fail(error) from None
        except asyncio.TimeoutError:
            raise BridgeLost(f"the proxy did not answer hello within {self._timeout} s") from None
        finally:
            call.cancel()
        raise BridgeLost("the proxy ended the bridge")

    async def delete(self, session_id: str, token: str) -> None:
        try:
            await self._stubs.delete_session(pb.DeleteSessionRequest(session_id=session_id),
                                             metadata=_bearer(token), timeout=5)
        except grpc.aio.AioRpcError as error:
            raise self._fail(error) from None

    async def close(self) -> None:
        await self._channel.close()


# --- the WebSocket bridge -------------------------------------------------------


def _loads(text: str) -> Any:
    return json.loads(text) if text else None


def declarations_json(tools: list[pb.ToolDefinition], resources: list[pb.ResourceDefinition],
                      templates: list[pb.ResourceTemplateDefinition],
                      prompts: list[pb.PromptDefinition]) -> dict[str, Any]:
    """The declarations as the REST body and `update_tools` frame spell them."""
    def tool(t: pb.ToolDefinition) -> dict[str, Any]:
        out: dict[str, Any] = {"name": t.name, "description": t.description,
                               "input_schema": _loads(t.input_schema_json) or {"type": "object"}}
        if t.timeout_seconds:
            out["timeout_seconds"] = t.timeout_seconds
        if t.HasField("confirm"):
            out["confirm"] = {"message": t.confirm.message} if t.confirm.message else True
        return out

    def described(fields: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in fields.items() if value}

    return {
        "tools": [tool(t) for t in tools],
        "resources": [described({"uri": r.uri, "name": r.name, "title": r.title, "description": r.description,
                                 "mimeType": r.mime_type}) for r in resources],
        "resource_templates": [described({"uriTemplate": r.uri_template, "name": r.name, "title": r.title,
                                          "description": r.description, "mimeType": r.mime_type})
                               for r in templates],
        "prompts": [described({"name": p.name, "title": p.title, "description": p.description,
                               "arguments": [described({"name": a.name, "title": a.title,
                                                        "description": a.description, "required": a.required})
                                             for a in p.arguments]}) for p in prompts],
    }


def _error_json(error: pb.McpError) -> dict[str, Any]:
    out: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data_json:
        out["data"] = json.loads(error.data_json)
    return out


def app_frame(message: pb.AppMessage) -> dict[str, Any] | None:
    """The WebSocket frame of an app message (None for `hello`, which has none)."""
    kind = message.WhichOneof("kind")
    if kind == "result":
        r = message.result
        frame: dict[str, Any] = {"type": "invoke_result", "request_id": r.request_id, "ok": r.ok}
        if r.ok:
            frame["content"] = _loads(r.content_json)
        else:
            frame["error"] = r.error
        return frame
    if kind == "progress":
        p = message.progress
        frame = {"type": "progress", "request_id": p.request_id, "progress": p.progress}
        if p.HasField("total"):
            frame["total"] = p.total
        if p.message:
            frame["message"] = p.message
        return frame
    if kind == "log":
        entry = message.log
        return {"type": "log", "request_id": entry.request_id, "level": entry.level,
                "logger": entry.logger or None, "data": _loads(entry.data_json)}
    if kind == "mcp_result":
        m = message.mcp_result
        if m.WhichOneof("outcome") == "error":
            return {"type": "mcp_result", "request_id": m.request_id, "error": _error_json(m.error)}
        return {"type": "mcp_result", "request_id": m.request_id, "result": _loads(m.result_json)}
    if kind == "client_request":
        c = message.client_request
        return {"type": "client_request", "request_id": c.request_id, "id": c.id, "method": c.method,
                "params": _loads(c.params_json)}
    if kind == "resource_updated":
        return {"type": "resource_updated", "uri": message.resource_updated.uri}
    if kind == "update_tools":
        u = message.update_tools
        return {"type": "update_tools", **declarations_json(
            list(u.tools), list(u.resources.resources), list(u.resource_templates.resource_templates),
            list(u.prompts.prompts))}
    if kind == "pong":
        return {"type": "pong", "nonce": message.pong.nonce}
    return None


def _caller(frame: dict[str, Any]) -> pb.CallerIdentity:
    caller = frame.get("caller") or {}
    return pb.CallerIdentity(kind=str(caller.get("kind", "")), issuer=str(caller.get("issuer", "")),
                             subject=str(caller.get("subject", "")), client_id=str(caller.get("client_id", "")),
                             scopes=[str(s) for s in caller.get("scopes") or []])


def _client(frame: dict[str, Any]) -> pb.CallerInfo:
    client = frame.get("client") or {}
    return pb.CallerInfo(name=str(client.get("name", "")), version=str(client.get("version", "")),
                         protocol_version=str(client.get("protocolVersion", "")))


def _request_id(frame: dict[str, Any]) -> str:
    return str(frame.get("request_id") or frame.get("requestId") or "")


def proxy_message(frame: dict[str, Any]) -> pb.ProxyMessage | None:
    """The protobuf message of a proxy frame (None for a frame this package
    does not use)."""
    kind = frame.get("type")
    if kind == "invoke_tool":
        meta = frame.get("_meta")
        return pb.ProxyMessage(invoke=pb.InvokeTool(
            session_id=str(frame.get("mcpSessionId", "")), request_id=_request_id(frame),
            tool_name=str(frame.get("tool_name") or frame.get("toolName") or ""),
            arguments_json=json.dumps(frame.get("arguments") or {}),
            meta_json="" if meta is None else json.dumps(meta), client=_client(frame),
            trace_parent=str(frame.get("traceparent", "")), caller=_caller(frame)))
    if kind == "mcp_request":
        return pb.ProxyMessage(mcp_request=pb.McpRequest(
            session_id=str(frame.get("mcpSessionId", "")), request_id=_request_id(frame),
            method=str(frame.get("method", "")), params_json=json.dumps(frame.get("params") or {}),
            client=_client(frame), trace_parent=str(frame.get("traceparent", "")), caller=_caller(frame)))
    if kind == "cancel_tool":
        return pb.ProxyMessage(cancel=pb.CancelTool(request_id=_request_id(frame),
                                                    reason=str(frame.get("reason", ""))))
    if kind == "ping":
        return pb.ProxyMessage(ping=pb.Ping(nonce=int(frame.get("nonce") or 0)))
    if kind == "error":
        return pb.ProxyMessage(error=pb.ErrorNotice(message=str(frame.get("message", "")),
                                                    request_id=_request_id(frame)))
    if kind == "tools_updated":
        return pb.ProxyMessage(tools_updated=pb.ToolsUpdated(tools=int(frame.get("tools") or 0)))
    if kind == "client_response":
        response = pb.ClientResponse(request_id=_request_id(frame), id=str(frame.get("id", "")))
        if isinstance(frame.get("error"), dict):
            error = frame["error"]
            response.error.CopyFrom(pb.McpError(
                code=int(error.get("code", 0)), message=str(error.get("message", "")),
                data_json="" if error.get("data") is None else json.dumps(error["data"])))
        else:
            response.result_json = json.dumps(frame.get("result"))
        return pb.ProxyMessage(client_response=response)
    return None


class WebSocketTransport:
    """REST registration and the WebSocket bridge (docs/websocket-bridge.md)."""

    # Close codes (docs/websocket-bridge.md).
    _GONE, _BAD_TOKEN, _TAKEN_OVER = 4404, 4401, 4409

    def __init__(self, proxy_url: str, timeout: float) -> None:
        self._base = proxy_url
        parsed = urllib.parse.urlsplit(proxy_url)
        self._ws_base = f"{'wss' if parsed.scheme == 'https' else 'ws'}://{parsed.netloc}{parsed.path}"
        self._timeout = timeout

    def _request(self, method: str, path: str, token: str, body: dict[str, Any] | None) -> Any:
        request = urllib.request.Request(
            f"{self._base}{path}", method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"content-type": "application/json", **({"authorization": f"Bearer {token}"} if token else {})})
        with urllib.request.urlopen(request, timeout=self._timeout) as response:
            return json.loads(response.read() or b"null")

    async def create(self, request: pb.CreateSessionRequest, app_token: str) -> pb.CreateSessionResponse:
        body: dict[str, Any] = {
            **json_format.MessageToDict(request.metadata, preserving_proto_field_name=True),
            **declarations_json(list(request.tools), list(request.resources), list(request.resource_templates),
                                list(request.prompts))}
        body.setdefault("device_id", "")
        body.setdefault("app_version", "")
        if request.HasField("owner"):
            body["owner"] = {"subject": request.owner.subject, "issuer": request.owner.issuer}
        try:
            created = await asyncio.to_thread(self._request, "POST", "/v1/chat/sessions", app_token, body)
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")[:500]
            if error.code in (401, 403):
                raise AppError(f"{_TOKEN_REFUSED} (HTTP {error.code}: {detail})") from None
            if 400 <= error.code < 500 and error.code != 429:
                raise AppError(f"{_DECLARATIONS_REFUSED} (HTTP {error.code}: {detail})") from None
            raise BridgeLost(f"HTTP {error.code}: {detail}") from None
        except (OSError, ValueError) as error:
            raise BridgeLost(f"cannot register: {error}") from None
        return pb.CreateSessionResponse(session_id=str(created["mcpSessionId"]),
                                        session_token=str(created.get("session_token", "")),
                                        mcp_token=str(created.get("mcp_token", "")),
                                        name=str(created.get("name", "")))

    async def attach(self, session_id: str, token: str, outbox: asyncio.Queue[pb.AppMessage | None],
                     dispatch: Dispatch) -> None:
        url = f"{self._ws_base}/v1/chat/sessions/{urllib.parse.quote(session_id)}/bridge"
        headers = {"authorization": f"Bearer {token}"} if token else {}
        try:
            async with connect(url, additional_headers=headers, proxy=None, open_timeout=self._timeout,
                               max_size=None, compression=None) as socket:
                # The upgrade is the answer to the session being named.
                dispatch(pb.ProxyMessage(attached=pb.Attached(session_id=session_id)))

                async def send() -> None:
                    try:
                        while (message := await outbox.get()) is not None:
                            frame = app_frame(message)
                            if frame is not None:
                                await socket.send(json.dumps(frame))
                        await socket.close()
                    except websockets.exceptions.ConnectionClosed:
                        return  # the reading side says how it ended

                sender = asyncio.ensure_future(send())
                try:
                    async for text in socket:
                        frame = json.loads(text)
                        message = proxy_message(frame) if isinstance(frame, dict) else None
                        if message is not None:
                            dispatch(message)
                finally:
                    sender.cancel()
                code = socket.close_code
        except websockets.exceptions.InvalidStatus as error:
            status = error.response.status_code
            if status == 404:
                raise SessionGone() from None
            if status in (401, 403):
                raise AppError(f"{_TOKEN_REFUSED} (HTTP {status})") from None
            raise BridgeLost(f"HTTP {status}") from None
        except websockets.exceptions.ConnectionClosed as error:
            code = error.rcvd.code if error.rcvd is not None else None
        except (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException) as error:
            raise BridgeLost(f"{type(error).__name__}: {error}") from None
        if code == self._GONE:
            raise SessionGone()
        if code == self._BAD_TOKEN:
            raise AppError(f"{_TOKEN_REFUSED} (close code {code})")
        if code == self._TAKEN_OVER:
            raise AppError(f"{_TAKEN_OVER} (close code {code})")
        raise BridgeLost("the connection ended without a close frame" if code is None
                         else f"the bridge closed (code {code})")

    async def delete(self, session_id: str, token: str) -> None:
        await asyncio.to_thread(self._request, "DELETE", f"/v1/chat/sessions/{urllib.parse.quote(session_id)}",
                                token, None)

    async def close(self) -> None:
        return None

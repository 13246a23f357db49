"""Holding a session's bridge: create the session, attach, answer what the
proxy sends, and after any loss attach again with a growing, jittered delay;
when the proxy no longer knows the session (it restarted, the session
expired) create a new one and report it. Calls run concurrently, each in
its own task, so a slow handler never holds up the stream."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._proto import proxy_pb2 as pb
from .content import tool_content_json
from .context import Caller, ClientInfo, Context
from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    REVISION_WITH_INVALID_PARAMS_FOR_MISSING_RESOURCE,
    AppError,
    AskError,
    McpError,
    ToolError,
    UpdateError,
)
from .signature import call_handler
from .transport import BridgeLost, GrpcTransport, SessionGone, Transport, WebSocketTransport

if TYPE_CHECKING:
    from .app import App

log = logging.getLogger("openclaw_proxy_app")

@dataclass(frozen=True)
class SessionInfo:
    """A registered session: give `mcp_url` and `mcp_token` to the MCP
    client (OpenClaw). `session_token` is the app side's credential."""

    session_id: str
    mcp_url: str
    mcp_token: str
    session_token: str


class _Backoff:
    """Exponential delays with jitter: 0.25 s doubling up to a ceiling, each
    drawn from half to one and a half times the step."""

    def __init__(self, ceiling: float) -> None:
        self.ceiling, self.step = ceiling, 0.25

    def reset(self) -> None:
        self.step = 0.25

    def next(self) -> float:
        delay = min(self.step, self.ceiling) * random.uniform(0.5, 1.5)
        self.step = min(self.step * 2, self.ceiling)
        return delay


class _Bridge:
    """One attached stream: its outbox, the calls it delivered and the
    questions its calls asked the MCP client."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # Holds what handlers send; they are bounded by max_concurrent_calls.
        self.outbox: asyncio.Queue[pb.AppMessage | None] = asyncio.Queue()
        self.calls: dict[str, tuple[asyncio.Task[None], Context]] = {}
        self.asks: dict[tuple[str, str], asyncio.Future[pb.ClientResponse]] = {}
        self.ids = itertools.count(1)
        self.open = True

    def send_soon(self, message: pb.AppMessage) -> None:
        if not self.open:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self.outbox.put_nowait(message)
        else:  # from a sync handler's worker thread
            self.loop.call_soon_threadsafe(self.outbox.put_nowait, message)

    async def ask(self, request_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if not self.open:
            raise AskError("the bridge was lost before the MCP client could be asked")
        key = (request_id, str(next(self.ids)))
        answer: asyncio.Future[pb.ClientResponse] = self.loop.create_future()
        self.asks[key] = answer
        self.send_soon(pb.AppMessage(client_request=pb.ClientRequest(
            request_id=request_id, id=key[1], method=method, params_json=json.dumps(params))))
        try:
            response = await answer
        finally:
            self.asks.pop(key, None)
        if response.WhichOneof("outcome") == "error":
            raise AskError(f"the MCP client could not answer {method}: {response.error.message}",
                           response.error.code)
        result = json.loads(response.result_json or "{}")
        if not isinstance(result, dict):
            raise AskError(f"the MCP client answered {method} with something other than an object")
        return result

    def close(self, reason: str) -> None:
        """The stream is gone: the proxy has failed its calls already."""
        self.open = False
        self.outbox.put_nowait(None)
        for answer in self.asks.values():
            if not answer.done():
                answer.set_exception(AskError(f"the MCP client's answer cannot arrive: {reason}"))
        for task, ctx in list(self.calls.values()):
            ctx._cancel(reason)
            task.cancel()


def _caller(identity: pb.CallerIdentity) -> Caller:
    return Caller(kind=identity.kind or "none", issuer=identity.issuer, subject=identity.subject,
                  client_id=identity.client_id, scopes=tuple(identity.scopes))


def _client(info: pb.CallerInfo) -> ClientInfo:
    return ClientInfo(name=info.name, version=info.version, protocol_version=info.protocol_version)


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


class Serving:
    """A session being served: `session` is the current one, `update()`
    sends changed declarations, `resource_updated()` tells subscribers a
    resource changed, `wait_closed()` returns when serving stopped."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._session: SessionInfo | None = None
        self._bridge: _Bridge | None = None
        self._backoff = _Backoff(app.max_reconnect_delay)
        self._error: AppError | None = None
        self._closed = asyncio.Event()
        self._changed = False
        self._update_lock = asyncio.Lock()
        self._updated: asyncio.Future[pb.ToolsUpdated] | None = None
        # Calls run up to max_concurrent_calls at once, as many more wait,
        # and beyond that are answered "busy" at once.
        self._slots = asyncio.Semaphore(app.max_concurrent_calls)
        self._admitted = 0
        self._transport: Transport = (
            WebSocketTransport(app.proxy_url, app.connect_timeout) if app.bridge == "websocket"
            else GrpcTransport(app.proxy_url, app.connect_timeout))
        self._first: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task: asyncio.Task[None] | None = None

    @property
    def session(self) -> SessionInfo:
        """The session being served (a new one after the proxy forgot the old)."""
        if self._session is None:
            raise AppError("no session: the app is registering one")
        return self._session

    async def wait_closed(self) -> None:
        """Returns when serving stopped; raises the AppError that stopped it."""
        await self._closed.wait()
        if self._error is not None:
            raise self._error

    def resource_updated(self, uri: str) -> None:
        """Tells the clients subscribed to `uri` that it changed."""
        if self._bridge is not None:
            self._bridge.send_soon(pb.AppMessage(resource_updated=pb.ResourceUpdated(uri=uri)))

    async def update(self) -> None:
        """Sends the app's current tools, resources, templates and prompts
        to the proxy, which replaces the session's lists. While the bridge is
        down they go at the next attach. Raises UpdateError when the proxy
        refuses them."""
        async with self._update_lock:
            self._changed = True
            bridge = self._bridge
            if bridge is None:
                return
            self._updated = asyncio.get_running_loop().create_future()
            bridge.send_soon(self._update_message())
            try:
                await asyncio.wait_for(asyncio.shield(self._updated), self._app.connect_timeout)
            except asyncio.TimeoutError:
                log.warning("the proxy did not acknowledge the update; it is sent again at the next attach")
            finally:
                self._updated = None

    async def close(self) -> None:
        """Stops serving: cancels running calls and deletes the session
        (unless the proxy stopped it)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        session = self._session
        # Stopped by the proxy (a refused token, a session taken over by
        # another bridge): the session is not this app's to delete.
        if session is not None and self._error is None:
            try:
                await self._transport.delete(session.session_id, session.session_token or self._app.app_token)
            except SessionGone:
                pass
            except Exception as error:  # the proxy expires it in time
                log.warning("could not delete session %s: %s", session.session_id, error)
        await self._transport.close()
        self._closed.set()

    # --- the loop -------------------------------------------------------------

    async def _start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())
        try:
            await asyncio.shield(self._first)
        except BaseException:
            await self.close()
            raise

    def _update_message(self) -> pb.AppMessage:
        tools, resources, templates, prompts = self._app.declarations()
        return pb.AppMessage(update_tools=pb.UpdateTools(
            tools=tools, resources=pb.ResourceList(resources=resources),
            resource_templates=pb.ResourceTemplateList(resource_templates=templates),
            prompts=pb.PromptList(prompts=prompts)))

    async def _run(self) -> None:
        try:
            while True:
                try:
                    if self._session is None:
                        self._session = await self._create()
                        await self._app.report_session(self._session)
                    await self._attach(self._session)
                    log.info("the bridge ended; attaching again")
                except SessionGone:
                    log.info("the proxy no longer knows the session; registering a new one")
                    self._session = None
                except BridgeLost as error:
                    log.warning("bridge lost (%s); reconnecting", error)
                await asyncio.sleep(self._backoff.next())
        except AppError as error:
            self._error = error
        except Exception as error:  # a fault of this package: say so rather than hang
            log.exception("serving failed")
            self._error = AppError(f"serving failed: {type(error).__name__}: {error}")
        finally:
            if self._error is not None and not self._first.done():
                self._first.set_exception(self._error)
            self._closed.set()

    async def _create(self) -> SessionInfo:
        tools, resources, templates, prompts = self._app.declarations()
        request = pb.CreateSessionRequest(metadata=self._app.metadata, tools=tools, resources=resources,
                                          resource_templates=templates, prompts=prompts)
        if self._app.owner is not None:
            request.owner.CopyFrom(self._app.owner)
        created = await self._transport.create(request, self._app.app_token)
        self._changed = False
        return SessionInfo(session_id=created.session_id,
                           mcp_url=f"{self._app.proxy_url}/v1/mcp/{created.session_id}",
                           mcp_token=created.mcp_token, session_token=created.session_token)

    async def _attach(self, session: SessionInfo) -> None:
        bridge = _Bridge(asyncio.get_running_loop())
        reason = "the bridge was lost"
        try:
            # The session's own token opens its bridge.
            await self._transport.attach(session.session_id, session.session_token or self._app.app_token,
                                         bridge.outbox, lambda message: self._dispatch(bridge, message))
        except asyncio.CancelledError:
            reason = "the app is shutting down"
            raise
        finally:
            self._bridge = None
            bridge.close(reason)

    def _dispatch(self, bridge: _Bridge, message: pb.ProxyMessage) -> None:
        kind = message.WhichOneof("kind")
        if kind == "attached":
            self._bridge = bridge
            self._backoff.reset()
            if self._changed:  # a change made while the bridge was down
                bridge.send_soon(self._update_message())
            if not self._first.done():
                self._first.set_result(None)
        elif kind == "ping":
            bridge.send_soon(pb.AppMessage(pong=pb.Pong(nonce=message.ping.nonce)))
        elif kind == "invoke":
            invoke = message.invoke
            ctx = self._context(bridge, invoke.request_id, "tools/call", invoke.client, invoke.caller,
                                _json_object(invoke.meta_json), invoke.trace_parent, invoke.task_id)
            self._spawn(bridge, ctx, self._run_call(bridge, ctx, invoke))
        elif kind == "mcp_request":
            request = message.mcp_request
            params = _json_object(request.params_json)
            meta = params.get("_meta")
            ctx = self._context(bridge, request.request_id, request.method, request.client, request.caller,
                                meta if isinstance(meta, dict) else {}, request.trace_parent)
            self._spawn(bridge, ctx, self._run_mcp(bridge, ctx, params))
        elif kind == "cancel":
            running = bridge.calls.get(message.cancel.request_id)
            if running is not None:
                task, ctx = running
                ctx._cancel(message.cancel.reason or "the proxy cancelled the call")
                task.cancel()
        elif kind == "client_response":
            response = message.client_response
            answer = bridge.asks.get((response.request_id, response.id))
            if answer is not None and not answer.done():
                answer.set_result(response)
        elif kind == "tools_updated":
            if self._updated is not None and not self._updated.done():
                self._updated.set_result(message.tools_updated)
        elif kind == "error":
            notice = message.error
            if self._updated is not None and not self._updated.done() and not notice.request_id:
                self._updated.set_exception(UpdateError(notice.message))
            else:
                log.warning("the proxy could not use a message: %s", notice.message)

    def _context(self, bridge: _Bridge, request_id: str, method: str, client: pb.CallerInfo,
                 caller: pb.CallerIdentity, meta: dict[str, Any], trace_parent: str,
                 task_id: str = "") -> Context:
        return Context(request_id=request_id, method=method, client=_client(client), caller=_caller(caller),
                       meta=meta, trace_parent=trace_parent, _link=bridge, task_id=task_id)

    def _spawn(self, bridge: _Bridge, ctx: Context, work: Any) -> None:
        task: asyncio.Task[None] = bridge.loop.create_task(work)
        bridge.calls[ctx.request_id] = (task, ctx)
        self._admitted += 1

        def done(_: asyncio.Task[None]) -> None:
            bridge.calls.pop(ctx.request_id, None)
            self._admitted -= 1

        task.add_done_callback(done)

    def _busy(self) -> str | None:
        """Why a new call is refused, when the app is full."""
        limit = self._app.max_concurrent_calls
        if self._admitted > 2 * limit:
            return (f"the app is busy: {limit} calls are running and {limit} more are waiting; "
                    "try again shortly")
        return None

    async def _run_call(self, bridge: _Bridge, ctx: Context, invoke: pb.InvokeTool) -> None:
        result = pb.ToolResult(request_id=invoke.request_id)
        try:
            busy = self._busy()
            if busy is not None:
                raise ToolError(busy)
            async with self._slots:
                tool = self._app.tools.get(invoke.tool_name)
                if tool is None:
                    raise ToolError(f"this app has no tool named {invoke.tool_name!r}")
                arguments = json.loads(invoke.arguments_json or "{}")
                if not isinstance(arguments, dict):
                    raise ToolError("the arguments must be a JSON object")
                value = await call_handler(tool.function, tool.signature.bind(arguments, ctx))
            result.ok, result.content_json = True, tool_content_json(value)
        except ToolError as error:
            result.ok, result.error = False, str(error)
        except Exception as error:  # a failing handler fails its call, never the app
            log.exception("tool %s failed", invoke.tool_name)
            result.ok, result.error = False, f"{type(error).__name__}: {error}"
        bridge.send_soon(pb.AppMessage(result=result))

    async def _run_mcp(self, bridge: _Bridge, ctx: Context, params: dict[str, Any]) -> None:
        answer = pb.McpResult(request_id=ctx.request_id)
        try:
            busy = self._busy()
            if busy is not None:
                raise McpError(INTERNAL_ERROR, busy)
            async with self._slots:
                result = await self._app.answer_mcp(ctx.method, params, ctx)
            answer.result_json = json.dumps(result)
        except McpError as error:
            code = error.code
            if (code == RESOURCE_NOT_FOUND
                    and ctx.client.protocol_version >= REVISION_WITH_INVALID_PARAMS_FOR_MISSING_RESOURCE):
                code = INVALID_PARAMS
            answer.error.CopyFrom(pb.McpError(code=code, message=error.message,
                                              data_json="" if error.data is None else json.dumps(error.data)))
        except Exception as error:
            log.exception("%s failed", ctx.method)
            answer.error.CopyFrom(pb.McpError(code=INTERNAL_ERROR, message=f"{type(error).__name__}: {error}"))
        bridge.send_soon(pb.AppMessage(mcp_result=answer))

"""What a handler knows about the call it serves, and what it can do
during it: report progress, log to the caller, ask the MCP client (the user,
its model, its roots), and notice that the call was cancelled."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, overload

import pydantic

from ._proto import proxy_pb2 as pb

T = TypeVar("T")

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]


@dataclass(frozen=True)
class ClientInfo:
    """The MCP client behind a call, as far as the proxy knows."""

    name: str
    version: str
    protocol_version: str


@dataclass(frozen=True)
class Caller:
    """Which credential opened the MCP request, as the proxy verified it:
    `kind` is "session_token", "global_token", "oauth" or "none"; the other
    fields are set for "oauth"."""

    kind: str
    issuer: str = ""
    subject: str = ""
    client_id: str = ""
    scopes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ElicitResult(Generic[T]):
    """The user's answer: `action` is "accept", "decline" or "cancel";
    `content` the form as sent, `data` it read as the schema type asked for
    (when accepted and a type was given)."""

    action: str
    content: dict[str, Any] | None = None
    data: T | None = None


@dataclass(frozen=True)
class SampleResult:
    """What the client's model wrote (`sampling/createMessage`'s result)."""

    raw: dict[str, Any]

    @property
    def text(self) -> str:
        content = self.raw.get("content")
        blocks = content if isinstance(content, list) else [content]
        return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")

    @property
    def model(self) -> str:
        return str(self.raw.get("model", ""))


@dataclass(frozen=True)
class Root:
    uri: str
    name: str | None = None


class _Link(Protocol):
    """The bridge a call arrived on."""

    loop: asyncio.AbstractEventLoop

    def send_soon(self, message: pb.AppMessage) -> None: ...

    async def ask(self, request_id: str, method: str, params: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(eq=False)
class Context:
    """One call (a tool call, or an MCP request such as `resources/read`).
    Declare a parameter annotated `Context` to get it."""

    request_id: str
    method: str
    client: ClientInfo
    caller: Caller
    meta: dict[str, Any]
    trace_parent: str
    _link: _Link = field(repr=False)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    cancel_reason: str | None = None
    task_id: str = ""
    """The MCP task this call runs as, when the client made it a task (the
    tool declared `task_support`); empty for a plain call. Nothing else
    changes: the proxy keeps the result for the client to fetch."""

    @property
    def cancelled(self) -> bool:
        """Whether the proxy cancelled the call (its caller went away, it
        timed out) or its bridge was lost. An async handler is cancelled
        outright (`asyncio.CancelledError`); a sync one checks this."""
        return self._cancelled.is_set()

    def progress(self, progress: float, total: float | None = None, message: str = "") -> None:
        """Reports progress; the MCP client gets it when it asked for
        progress. Usable from sync and async handlers."""
        report = pb.ToolProgress(request_id=self.request_id, progress=progress, message=message)
        if total is not None:
            report.total = total
        self._link.send_soon(pb.AppMessage(progress=report))

    def log(self, level: LogLevel, data: Any, logger: str = "") -> None:
        """Sends a log record to the MCP client of this call (it gets it when
        it asked for that level). `data` is any JSON value."""
        self._link.send_soon(pb.AppMessage(log=pb.Log(
            request_id=self.request_id, level=level, logger=logger, data_json=json.dumps(data))))

    @overload
    async def elicit(self, message: str, schema: type[T]) -> ElicitResult[T]: ...

    @overload
    async def elicit(self, message: str, schema: dict[str, Any]) -> ElicitResult[dict[str, Any]]: ...

    async def elicit(self, message: str, schema: Any) -> ElicitResult[Any]:
        """Asks the user to fill in a form (`elicitation/create`, form mode).
        `schema` is a dataclass or pydantic model of flat fields, or a JSON
        Schema object. Raises AskError when the client cannot ask."""
        adapter = None if isinstance(schema, dict) else pydantic.TypeAdapter(schema)
        requested = schema if adapter is None else adapter.json_schema()
        requested = {k: v for k, v in requested.items() if k != "title"}
        answer = await self._ask("elicitation/create",
                                 {"mode": "form", "message": message, "requestedSchema": requested})
        action = str(answer.get("action", "cancel"))
        content = answer.get("content") if isinstance(answer.get("content"), dict) else None
        data = content if adapter is None else None
        if adapter is not None and action == "accept" and content is not None:
            data = adapter.validate_python(content)
        return ElicitResult(action=action, content=content, data=data)

    async def elicit_url(self, message: str, url: str, elicitation_id: str) -> ElicitResult[None]:
        """Asks the user to visit `url` (`elicitation/create`, URL mode)."""
        answer = await self._ask("elicitation/create", {
            "mode": "url", "message": message, "url": url, "elicitationId": elicitation_id})
        return ElicitResult(action=str(answer.get("action", "cancel")))

    async def sample(self, prompt: str | list[dict[str, Any]], *, max_tokens: int = 1000,
                     system_prompt: str | None = None, **params: Any) -> SampleResult:
        """Asks the client's model (`sampling/createMessage`). `prompt` is
        one user message, or MCP `SamplingMessage`s; extra MCP params pass
        as keywords (`temperature=...`, `modelPreferences=...`)."""
        messages = ([{"role": "user", "content": {"type": "text", "text": prompt}}]
                    if isinstance(prompt, str) else prompt)
        request: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens, **params}
        if system_prompt is not None:
            request["systemPrompt"] = system_prompt
        return SampleResult(await self._ask("sampling/createMessage", request))

    async def roots(self) -> list[Root]:
        """The client's roots (`roots/list`)."""
        answer = await self._ask("roots/list", {})
        return [Root(uri=str(r["uri"]), name=r.get("name"))
                for r in answer.get("roots", []) if isinstance(r, dict) and "uri" in r]

    def run(self, awaitable: Coroutine[Any, Any, T]) -> T:
        """Runs one of the async methods from a sync handler (which runs in a
        worker thread) and waits for it: `ctx.run(ctx.elicit(...))`."""
        return asyncio.run_coroutine_threadsafe(awaitable, self._link.loop).result()

    async def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self._link.ask(self.request_id, method, params)

    def _cancel(self, reason: str) -> None:
        self.cancel_reason = reason
        self._cancelled.set()


"""`App`: what an app declares (tools, resources, resource templates,
prompts, a completion handler) through decorators, and how each MCP request
the bridge delivers is routed to its handler. Serving them is `serving.py`."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import re
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from ._proto import proxy_pb2 as pb
from .content import prompt_result, read_result
from .context import Context
from .errors import METHOD_NOT_FOUND, McpError, ToolError
from .serving import Serving, SessionInfo
from .signature import Signature, call_handler
from .uri_template import UriTemplate

F = TypeVar("F", bound=Callable[..., Any])

ClientCapability = Literal["elicitation", "elicitation.url", "sampling", "roots"]
"""A client capability a tool's calls need (`requires_client=`)."""

_CLIENT_CAPABILITIES: frozenset[str] = frozenset(("elicitation", "elicitation.url", "sampling", "roots"))

log = logging.getLogger("openclaw_proxy_app")

# The most values one completion answer carries, as MCP allows.
MAX_COMPLETION_VALUES = 100


# MCP tool and prompt names, as the proxy checks them.
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def _checked_name(name: str, what: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"{what} name {name!r} is not valid: use 1 to 128 of A-Z a-z 0-9 _ - .")
    return name


def _description(function: Callable[..., Any], given: str | None) -> str:
    if given is not None:
        return given
    return inspect.cleandoc(function.__doc__ or "").split("\n\n")[0].replace("\n", " ")


@dataclass
class _Tool:
    name: str
    description: str
    function: Callable[..., Any]
    signature: Signature
    confirm: str | None
    timeout_seconds: int
    requires_client: tuple[str, ...] = ()

    def definition(self) -> pb.ToolDefinition:
        out = pb.ToolDefinition(name=self.name, description=self.description,
                                input_schema_json=json.dumps(self.signature.schema()),
                                timeout_seconds=self.timeout_seconds)
        if self.confirm is not None:
            out.confirm.message = self.confirm
        if self.requires_client:
            out.requires.client_capabilities.extend(self.requires_client)
        return out


@dataclass
class _Resource:
    uri: str
    name: str
    title: str
    description: str
    mime_type: str
    function: Callable[..., Any]
    signature: Signature
    template: UriTemplate | None

    def definition(self) -> pb.ResourceDefinition:
        return pb.ResourceDefinition(uri=self.uri, name=self.name, title=self.title,
                                     description=self.description, mime_type=self.mime_type)

    def template_definition(self) -> pb.ResourceTemplateDefinition:
        return pb.ResourceTemplateDefinition(uri_template=self.uri, name=self.name, title=self.title,
                                             description=self.description, mime_type=self.mime_type)


@dataclass
class _Prompt:
    name: str
    title: str
    description: str
    function: Callable[..., Any]
    signature: Signature

    def definition(self) -> pb.PromptDefinition:
        properties = self.signature.schema().get("properties", {})
        return pb.PromptDefinition(name=self.name, title=self.title, description=self.description, arguments=[
            pb.PromptArgument(name=name, description=str(properties.get(name, {}).get("description", "")),
                              required=name in self.signature.required)
            for name in self.signature.names])


@dataclass(frozen=True)
class CompletionRequest:
    """What `completion/complete` asks: values for `argument` of the prompt
    (`ref_type` "ref/prompt", `ref` its name) or of the resource template
    (`ref_type` "ref/resource", `ref` its URI template), starting `value`;
    `arguments` holds the values the user already chose for the others."""

    ref_type: str
    ref: str
    argument: str
    value: str
    arguments: dict[str, str]


class App:
    """An app: its declarations and how to reach the proxy.

    `proxy_url` is the proxy's base URL (`http://` or `https://`);
    `app_token` the proxy's app token (OPENCLAW_PROXY_APP_TOKEN). `bridge`
    is "grpc" (the default) or "websocket" (REST registration and the JSON
    bridge over HTTP/1.1, for networks without HTTP/2). The session
    serves its tools and other declarations once `run()` (blocking) or
    `async with app.serving()` starts it."""

    def __init__(self, proxy_url: str, *, app_token: str = "", device_id: str = "python-app",
                 device_name: str = "", app_version: str = "0", chat_id: str = "",
                 owner_subject: str = "", owner_issuer: str = "", max_concurrent_calls: int = 32,
                 connect_timeout: float = 30.0, max_reconnect_delay: float = 30.0,
                 bridge: Literal["grpc", "websocket"] = "grpc") -> None:
        if not proxy_url.startswith(("http://", "https://")):
            raise ValueError(f"proxy_url must start with http:// or https://, not {proxy_url!r}")
        self.proxy_url = proxy_url.rstrip("/")
        self.app_token = app_token
        self.metadata = pb.SessionMetadata(device_id=device_id, device_name=device_name,
                                           app_version=app_version, chat_id=chat_id)
        self.owner = pb.SessionOwner(subject=owner_subject, issuer=owner_issuer) if owner_subject else None
        self.max_concurrent_calls = max_concurrent_calls
        self.connect_timeout = connect_timeout
        self.max_reconnect_delay = max_reconnect_delay
        self.bridge = bridge
        self.tools: dict[str, _Tool] = {}
        self.resources: dict[str, _Resource] = {}
        self.templates: dict[str, _Resource] = {}
        self.prompts: dict[str, _Prompt] = {}
        self._completion: Callable[..., Any] | None = None
        self._on_session: list[Callable[[SessionInfo], Any]] = []

    # --- declarations -----------------------------------------------------

    @overload
    def tool(self, function: F, /) -> F: ...

    @overload
    def tool(self, function: None = None, /, *, name: str | None = None, description: str | None = None,
             confirm: bool | str = False, timeout_seconds: int = 0,
             requires_client: Sequence[ClientCapability] = ()) -> Callable[[F], F]: ...

    def tool(self, function: F | None = None, /, *, name: str | None = None, description: str | None = None,
             confirm: bool | str = False, timeout_seconds: int = 0,
             requires_client: Sequence[ClientCapability] = ()) -> F | Callable[[F], F]:
        """Declares a tool: `@app.tool` or `@app.tool(name=..., ...)`. Its
        name defaults to the function's, its description to the docstring's
        first paragraph, its input schema comes from the parameters' type
        hints. `confirm=True` (or a message) makes the proxy ask the user
        before every call; `timeout_seconds` gives a slow tool more time;
        `requires_client` names the client capabilities its calls need
        (`"elicitation"`, `"elicitation.url"`, `"sampling"`, `"roots"`), and
        the proxy refuses a 2026-07-28 call from a client without them."""
        unknown = [c for c in requires_client if c not in _CLIENT_CAPABILITIES]
        if unknown:
            raise ValueError(f"requires_client {unknown} not understood: name client capabilities from "
                             f"{sorted(_CLIENT_CAPABILITIES)}")
        def register(function: F) -> F:
            tool_name = _checked_name(name or function.__name__, "tool")
            self.tools[tool_name] = _Tool(
                tool_name, _description(function, description), function,
                Signature(function, f"tool {tool_name!r}"),
                None if confirm is False else ("" if confirm is True else str(confirm)), timeout_seconds,
                tuple(dict.fromkeys(requires_client)))
            return function
        return register if function is None else register(function)

    def remove_tool(self, name: str) -> None:
        """Drops a tool; `await serving.update()` tells the proxy."""
        self.tools.pop(name, None)

    def resource(self, uri: str, *, name: str | None = None, title: str = "", description: str | None = None,
                 mime_type: str = "") -> Callable[[F], F]:
        """Declares a resource at `uri`, or a resource template when `uri`
        holds `{variables}` (RFC 6570 `{name}` and `{+name}`), whose values
        the handler takes as parameters. The handler returns `str` (text),
        `bytes` (a blob), `ResourceContents`, a list of them, or the raw MCP
        result dict; it raises `McpError.resource_not_found(uri)` for what it
        does not hold."""
        def register(function: F) -> F:
            template = UriTemplate(uri) if "{" in uri else None
            entry = _Resource(uri, name or function.__name__, title, _description(function, description),
                              mime_type, function, Signature(function, f"resource {uri!r}"), template)
            if template is not None:
                missing = [n for n in entry.signature.names if n not in template.variables]
                if missing:
                    raise TypeError(f"resource template {uri!r}: parameters {missing} are not template variables")
                self.templates[uri] = entry
            else:
                self.resources[uri] = entry
            return function
        return register

    @overload
    def prompt(self, function: F, /) -> F: ...

    @overload
    def prompt(self, function: None = None, /, *, name: str | None = None, title: str = "",
               description: str | None = None) -> Callable[[F], F]: ...

    def prompt(self, function: F | None = None, /, *, name: str | None = None, title: str = "",
               description: str | None = None) -> F | Callable[[F], F]:
        """Declares a prompt; its parameters are the prompt's arguments
        (required unless they have a default). It returns a `str` (one user
        message), `PromptMessage`s, or the raw MCP result dict."""
        def register(function: F) -> F:
            prompt_name = _checked_name(name or function.__name__, "prompt")
            self.prompts[prompt_name] = _Prompt(prompt_name, title, _description(function, description),
                                                function, Signature(function, f"prompt {prompt_name!r}"))
            return function
        return register if function is None else register(function)

    def completion(self, function: F) -> F:
        """Declares the completion handler: `(request: CompletionRequest[,
        ctx: Context]) -> list[str]` suggests values for a prompt's argument
        or a template's variable (at most 100 are sent)."""
        self._completion = function
        return function

    def on_session(self, function: Callable[[SessionInfo], Awaitable[None] | None]) -> Callable[
            [SessionInfo], Awaitable[None] | None]:
        """Called with each session the app registers: the first, and each
        new one after the proxy forgot the old (it restarted)."""
        self._on_session.append(function)
        return function

    # --- serving --------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Serving]:
        """Registers the session and keeps its bridge attached while the
        block runs; leaving it deletes the session. Raises AppError when the
        proxy refuses the app (bad token, bad declaration)."""
        serving = Serving(self)
        await serving._start()
        try:
            yield serving
        finally:
            await serving.close()

    def run(self) -> None:
        """Serves until Ctrl-C or SIGTERM, then deletes the session."""
        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.add_signal_handler(signum, stop.set)
            async with self.serving() as serving:
                stopped = asyncio.ensure_future(stop.wait())
                closed = asyncio.ensure_future(serving.wait_closed())
                done, pending = await asyncio.wait({stopped, closed}, return_when=asyncio.FIRST_COMPLETED)
                for task in pending:
                    task.cancel()
                for task in done:
                    task.result()
        asyncio.run(main())

    # --- what serving uses ------------------------------------------------------

    def declarations(self) -> tuple[list[pb.ToolDefinition], list[pb.ResourceDefinition],
                                    list[pb.ResourceTemplateDefinition], list[pb.PromptDefinition]]:
        return ([t.definition() for t in self.tools.values()],
                [r.definition() for r in self.resources.values()],
                [r.template_definition() for r in self.templates.values()],
                [p.definition() for p in self.prompts.values()])

    async def report_session(self, session: SessionInfo) -> None:
        for function in self._on_session:
            try:
                outcome = function(session)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:  # the session is registered all the same
                log.exception("an on_session handler failed")

    async def answer_mcp(self, method: str, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        """The result of one MCP request; McpError when it fails."""
        if method == "resources/read":
            return await self._read(str(params.get("uri", "")), ctx)
        if method == "prompts/get":
            name = str(params.get("name", ""))
            prompt = self.prompts.get(name)
            if prompt is None:
                raise McpError.invalid_params(f"this app has no prompt named {name!r}")
            arguments = params.get("arguments") or {}
            value = await call_handler(prompt.function, _bind_mcp(prompt.signature, arguments, ctx))
            return prompt_result(value, None)
        if method == "completion/complete" and self._completion is not None:
            return await self._complete(params, ctx)
        raise McpError(METHOD_NOT_FOUND, f"this app does not serve {method}")

    async def _read(self, uri: str, ctx: Context) -> dict[str, Any]:
        resource, variables = self.resources.get(uri), {}
        if resource is None:
            for template in self.templates.values():
                assert template.template is not None
                found = template.template.match(uri)
                if found is not None:
                    resource, variables = template, found
                    break
        if resource is None:
            raise McpError.resource_not_found(uri)
        value = await call_handler(resource.function, _bind_mcp(resource.signature, variables, ctx))
        return read_result(uri, value, resource.mime_type or None)

    async def _complete(self, params: dict[str, Any], ctx: Context) -> dict[str, Any]:
        assert self._completion is not None
        ref, argument = params.get("ref") or {}, params.get("argument") or {}
        request = CompletionRequest(
            ref_type=str(ref.get("type", "")), ref=str(ref.get("name") or ref.get("uri") or ""),
            argument=str(argument.get("name", "")), value=str(argument.get("value", "")),
            arguments=dict((params.get("context") or {}).get("arguments") or {}))
        takes_context = len(inspect.signature(self._completion).parameters) > 1
        values = await call_handler(self._completion, {
            name: value for name, value in zip(inspect.signature(self._completion).parameters,
                                               (request, ctx) if takes_context else (request,))})
        values = [str(v) for v in values]
        completion: dict[str, Any] = {"values": values[:MAX_COMPLETION_VALUES]}
        if len(values) > MAX_COMPLETION_VALUES:
            completion.update(total=len(values), hasMore=True)
        return {"completion": completion}


def _bind_mcp(signature: Signature, arguments: Any, ctx: Context) -> dict[str, Any]:
    if not isinstance(arguments, dict):
        raise McpError.invalid_params("arguments must be an object")
    try:
        return signature.bind(arguments, ctx)
    except ToolError as error:
        raise McpError.invalid_params(str(error)) from None

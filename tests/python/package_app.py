"""An app written with the openclaw-proxy-app package, for the end-to-end
tests (tests/tests/e2e/python_app.rs): a tool for each thing the package
does, one resource, one template, one prompt and a completion handler.

Prints one JSON line on stdout per event the tests wait for:
{"session": id, "mcp_url": url} for each session it registers, and
{"started": tool} when a call that waits for its cancel starts, and
{"cancelled": tool, "reason": why} when it is cancelled.

usage: python package_app.py --proxy-url URL --app-token TOKEN [--bridge grpc|websocket]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import time
from typing import Literal

from openclaw_proxy_app import App, CompletionRequest, Context, McpError, Serving, SessionInfo

serving: Serving | None = None


def event(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


@dataclasses.dataclass
class Echoed:
    echoed_text: str


@dataclasses.dataclass
class ColorForm:
    color: str


def build(proxy_url: str, app_token: str, bridge: Literal["grpc", "websocket"]) -> App:
    app = App(proxy_url, app_token=app_token, device_id="python-package-e2e", app_version="1.0.0",
              bridge=bridge)

    @app.tool
    def echo_text(text: str) -> Echoed:
        """Echo the text back."""
        return Echoed(text)

    @app.tool(task_support="optional")
    def which_task(ctx: Context) -> str:
        """Says which MCP task it runs as."""
        return ctx.task_id or "plain"

    @app.tool
    async def steps(count: int, ctx: Context) -> str:
        """Report progress for each step, then finish."""
        for step in range(1, count + 1):
            ctx.progress(step, total=count, message=f"step {step}")
            await asyncio.sleep(0)
        return "done"

    @app.tool
    async def wait_for_cancel(ctx: Context) -> str:
        """Waits until the call is cancelled."""
        event(started="wait_for_cancel")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            event(cancelled="wait_for_cancel", reason=ctx.cancel_reason)
            raise
        return "never"

    @app.tool
    def wait_for_cancel_sync(ctx: Context) -> str:
        """Waits until the call is cancelled, in a worker thread."""
        event(started="wait_for_cancel_sync")
        while not ctx.cancelled:
            time.sleep(0.01)
        event(cancelled="wait_for_cancel_sync", reason=ctx.cancel_reason)
        return "cancelled"

    @app.tool
    async def ask_color(ctx: Context) -> str:
        """Asks the user for a color."""
        answer = await ctx.elicit("Which color?", ColorForm)
        return f"{answer.action}: {answer.data.color}" if answer.data else answer.action

    @app.tool
    def log_line(text: str, ctx: Context) -> str:
        """Sends a log record to the caller, from a sync handler."""
        ctx.log("warning", {"said": text}, logger="package-app")
        return "logged"

    @app.tool
    def whoami(ctx: Context) -> dict[str, str]:
        """Says who is calling."""
        return {"caller": ctx.caller.kind, "revision": ctx.client.protocol_version}

    @app.tool
    def fail(reason: str) -> str:
        """Always fails."""
        raise ValueError(reason)

    @app.tool(confirm="Really wipe everything?")
    def wipe() -> str:
        """A tool whose calls the user confirms first."""
        return "wiped"

    @app.tool
    async def add_tool(name: str) -> str:
        """Declares a new tool while serving."""
        def late() -> str:
            return f"{name} answers"
        late.__name__ = name
        app.tool(description="Added while serving.")(late)
        assert serving is not None
        await serving.update()
        return f"added {name}"

    @app.resource("notes:///index", mime_type="text/plain", description="The list of notes.")
    def index() -> str:
        return "welcome, plans"

    @app.resource("notes:///{name}", mime_type="text/markdown")
    def note(name: str) -> str:
        if name not in ("welcome", "plans"):
            raise McpError.resource_not_found(f"notes:///{name}")
        return f"# {name.title()}"

    @app.prompt(description="Summarise one note.")
    def summarise(note: str, style: str = "brief") -> str:
        return f"Summarise the note {note}, {style}."

    @app.completion
    def complete(request: CompletionRequest) -> list[str]:
        return [v for v in ("brief", "bulleted", "long") if v.startswith(request.value)]

    @app.on_session
    def announce(session: SessionInfo) -> None:
        event(session=session.session_id, mcp_url=session.mcp_url)

    return app


async def main() -> None:
    global serving
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy-url", required=True)
    parser.add_argument("--app-token", default="")
    parser.add_argument("--bridge", choices=["grpc", "websocket"], default="grpc")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    async with build(args.proxy_url, args.app_token, args.bridge).serving() as serving:
        await serving.wait_closed()


if __name__ == "__main__":
    asyncio.run(main())

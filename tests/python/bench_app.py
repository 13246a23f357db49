"""The load generator's app written with the openclaw-proxy-app package
(`loadgen calls --bridge grpc --grpc-app python`): one tool, `echo`, that
answers `{"text": t}` with the same object, after `--reports` progress
reports. Prints its session id on stdout, and stops (deleting its session)
when its stdin closes, so it never outlives the load generator.

usage: python bench_app.py --proxy-url URL --app-token TOKEN [--reports N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import threading

from openclaw_proxy_app import App, Context, SessionInfo


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--proxy-url", required=True)
    parser.add_argument("--app-token", default="")
    parser.add_argument("--reports", type=int, default=0)
    args = parser.parse_args()
    reports: int = args.reports
    # The load decides the concurrency: never answer "busy".
    app = App(args.proxy_url, app_token=args.app_token, device_id="loadgen", app_version="1",
              max_concurrent_calls=4096)

    @app.tool(description="Echo.")
    async def echo(text: str, ctx: Context) -> dict[str, str]:
        for step in range(1, reports + 1):
            ctx.progress(step, total=reports)
        return {"text": text}

    @app.on_session
    def announce(session: SessionInfo) -> None:
        print(session.session_id, flush=True)

    loop, stdin_closed = asyncio.get_running_loop(), asyncio.Event()

    def watch_stdin() -> None:
        sys.stdin.read()
        loop.call_soon_threadsafe(stdin_closed.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    async with app.serving() as serving:
        waits = [asyncio.ensure_future(stdin_closed.wait()), asyncio.ensure_future(serving.wait_closed())]
        done, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        for task in done:
            task.result()


if __name__ == "__main__":
    asyncio.run(main())

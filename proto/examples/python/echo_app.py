"""An openclaw-proxy app in Python, written with the openclaw-proxy-app package: two tools,
echo_text and confirm_echo (which asks the user first), one resource, echo://readme, and one
prompt, echo_prompt. Prints each session id on its own stdout line (a new one after the proxy
restarts); logs go to stderr. Run it with ./run.sh --proxy-url http://127.0.0.1:8000 [--app-token T].
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging

import pydantic

from openclaw_proxy_app import App, Context, SessionInfo

README = "This app echoes text back: call echo_text with {\"text\": ...}."


@dataclasses.dataclass
class NoteForm:
    """The form confirm_echo shows the user: one string field."""

    note: str = pydantic.Field(title="A note to add")


def build(proxy_url: str, app_token: str) -> App:
    app = App(proxy_url, app_token=app_token, device_id="python-example", app_version="1.0.0")

    @app.tool
    def echo_text(text: str) -> dict[str, str]:
        """Echo the text back."""
        return {"echoed_text": text}

    @app.tool
    async def confirm_echo(text: str, ctx: Context) -> dict[str, str] | str:
        """Ask the user, then echo the text."""
        answer = await ctx.elicit(f"Echo {json.dumps(text)} back?", NoteForm)
        if answer.action != "accept" or answer.data is None:  # "decline" or "cancel"
            return f"The user chose {answer.action}: nothing was echoed."
        return {"echoed_text": text, "note": answer.data.note}

    @app.resource("echo://readme", name="readme", mime_type="text/plain", description="What this app does.")
    def readme() -> str:
        return README

    @app.prompt(description="Ask the agent to echo a text.")
    def echo_prompt(text: str = pydantic.Field(description="The text to echo.")) -> str:
        return f"Use the echo_text tool to echo this text: {text}"

    @app.on_session
    def announce(session: SessionInfo) -> None:
        print(session.session_id, flush=True)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--proxy-url", required=True)
    parser.add_argument("--app-token", default="")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)  # to stderr
    build(args.proxy_url, args.app_token).run()


if __name__ == "__main__":
    main()

"""The app side of openclaw-proxy: expose Python functions to an AI agent.

Declare tools (and resources, prompts, completions) on an `App` with
decorators, then `app.run()`: the package registers the session with the
proxy, keeps its gRPC bridge attached through network loss and proxy
restarts, runs calls concurrently with progress, logs and cancellation, and
deletes the session on exit::

    from openclaw_proxy_app import App

    app = App("http://127.0.0.1:8000", app_token="app-secret")

    @app.tool
    def echo_text(text: str) -> str:
        \"\"\"Echo the text back.\"\"\"
        return text

    app.on_session(lambda session: print(session.mcp_url))
    app.run()
"""

from .app import App, ClientCapability, CompletionRequest
from .content import (
    AudioContent,
    Content,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceContents,
    ResourceLink,
    TextContent,
)
from .context import Caller, ClientInfo, Context, ElicitResult, LogLevel, Root, SampleResult
from .errors import AppError, AskError, McpError, ToolError, UpdateError
from .serving import Serving, SessionInfo

__version__ = "0.1.0"

__all__ = [
    "App", "AppError", "AskError", "AudioContent", "Caller", "ClientCapability", "ClientInfo",
    "CompletionRequest", "Content", "Context", "ElicitResult", "EmbeddedResource", "ImageContent", "LogLevel", "McpError", "PromptMessage",
    "ResourceContents", "ResourceLink", "Root", "SampleResult", "Serving", "SessionInfo", "TextContent",
    "ToolError", "UpdateError",
]

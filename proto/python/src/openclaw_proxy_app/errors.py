"""The errors an app sees: why serving stopped (`AppError`), a tool's own
failure told to the agent (`ToolError`), a JSON-RPC error for an MCP request
(`McpError`), and a question the MCP client could not answer (`AskError`)."""

from __future__ import annotations

from typing import Any

# JSON-RPC codes MCP uses.
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
# The first revision that answers an unknown resource with -32602 (SEP-2164).
REVISION_WITH_INVALID_PARAMS_FOR_MISSING_RESOURCE = "2026-07-28"


class AppError(Exception):
    """Serving stopped and retrying cannot help: the proxy refused the app
    token or a declaration, or another bridge took the session over. The
    message says which and what to change."""


class ToolError(Exception):
    """Raised by a tool handler to fail the call with this message: the agent
    gets an error result (`isError`) that says it."""


class AskError(Exception):
    """The MCP client could not answer `ctx.elicit`, `ctx.sample` or
    `ctx.roots`: it lacks the capability, went away, did not answer in time,
    or the bridge was lost. `code` is the JSON-RPC code, when there is one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class McpError(Exception):
    """A JSON-RPC error for the MCP client, raised by a resource, prompt or
    completion handler."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def invalid_params(cls, message: str) -> McpError:
        return cls(INVALID_PARAMS, message)

    @classmethod
    def resource_not_found(cls, uri: str) -> McpError:
        """No resource or template serves `uri` (-32002 with `data.uri`; a
        client at 2026-07-28 or later gets -32602, the code that revision
        names for it)."""
        return cls(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", {"uri": uri})


class UpdateError(Exception):
    """The proxy refused new declarations sent by `Serving.update()`; the
    message names the offending field. The session keeps its old lists."""

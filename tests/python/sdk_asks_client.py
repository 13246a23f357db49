"""An agent host built on the official MCP Python SDK's ClientSession: it
answers the server's `elicitation/create` (its "user" fills in the form),
`sampling/createMessage` (its "model" writes a line) and `roots/list` with
the session's callbacks, as a host does. Calls one tool and prints one JSON
line: the result, what the callbacks were asked, and the revision
negotiated; exits non-zero when a request fails.

usage: python sdk_asks_client.py <mcp-url> <token> <tool> <streamable|sse>
  streamable: the streamable HTTP client; sse: the legacy HTTP+SSE client.
"""

import asyncio
import json
import sys

from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamablehttp_client


async def main() -> None:
    url, token, tool, kind = sys.argv[1:]
    headers = {"Authorization": f"Bearer {token}"}
    elicited, sampled, rooted = [], [], []

    async def elicit(context, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content={"color": "teal"})

    async def sample(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(params.model_dump(mode="json", by_alias=True, exclude_none=True))
        asked = " ".join(message.content.text for message in params.messages)
        return types.CreateMessageResult(
            role="assistant",
            model="host-model-1",
            stopReason="endTurn",
            content=types.TextContent(type="text", text=f"The model read: {asked}"),
        )

    async def roots(context) -> types.ListRootsResult:
        rooted.append(True)
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    if kind == "sse":
        connection = sse_client(url, headers=headers)
    else:
        connection = streamablehttp_client(url, headers=headers)
    async with connection as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(
            read,
            write,
            elicitation_callback=elicit,
            sampling_callback=sample,
            list_roots_callback=roots,
        ) as session:
            initialized = await session.initialize()
            result = await session.call_tool(tool, {"topic": "the sea"})
    print(
        json.dumps(
            {
                "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
                "elicited": elicited,
                "sampled": sampled,
                "roots_asked": len(rooted),
                "protocolVersion": initialized.protocolVersion,
            }
        )
    )


asyncio.run(main())

"""An agent host built on the official MCP Python SDK 2 (`mcp.Client`,
pinned in requirements-2026.txt), which speaks 2026-07-28: it discovers the
server (`server/discover`) and answers an `input_required` result's
`elicitation/create` (its "user" fills in the form),
`sampling/createMessage` (its "model" writes a line) and `roots/list` with
the client's callbacks, retrying the call with the answers, as a host does.
Calls one tool and prints one JSON line: the result, what the callbacks were
asked, and the revision negotiated; exits non-zero when a request fails.

usage: python sdk_asks_client_2026.py <mcp-url> <token> <tool> streamable
"""

import asyncio
import json
import sys

import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client


def dump(model) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def main() -> None:
    url, token, tool, _transport = sys.argv[1:]
    elicited, sampled, rooted = [], [], []

    async def elicit(context, params: types.ElicitRequestParams) -> types.ElicitResult:
        elicited.append(dump(params))
        return types.ElicitResult(action="accept", content={"color": "teal"})

    async def sample(context, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(dump(params))
        asked = " ".join(message.content.text for message in params.messages)
        return types.CreateMessageResult(
            role="assistant",
            model="host-model-1",
            stop_reason="endTurn",
            content=types.TextContent(type="text", text=f"The model read: {asked}"),
        )

    async def roots(context) -> types.ListRootsResult:
        rooted.append(True)
        return types.ListRootsResult(roots=[types.Root(uri="file:///work/project", name="project")])

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    async with http, Client(
        streamable_http_client(url, http_client=http),
        elicitation_callback=elicit,
        sampling_callback=sample,
        list_roots_callback=roots,
    ) as client:
        result = await client.call_tool(tool, {"topic": "the sea"})
        version = client.protocol_version
    print(
        json.dumps(
            {
                "result": dump(result),
                "elicited": elicited,
                "sampled": sampled,
                "roots_asked": len(rooted),
                "protocolVersion": version,
            }
        )
    )


asyncio.run(main())

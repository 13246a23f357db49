"""Lists a session's resources, resource templates and prompts, reads one
resource and gets one prompt through the official MCP Python SDK's streamable
HTTP client, as any MCP host would. Prints one JSON line with what it
received; exits non-zero when a request fails.

usage: python sdk_resources_client.py <mcp-url> <token> <resource-uri> <prompt-name> [<argument>=<value>...]
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def main() -> None:
    url, token, uri, prompt, *pairs = sys.argv[1:]
    arguments = dict(pair.split("=", 1) for pair in pairs)
    headers = {"Authorization": f"Bearer {token}"}
    async with streamablehttp_client(url, headers=headers) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            resources = await session.list_resources()
            templates = await session.list_resource_templates()
            prompts = await session.list_prompts()
            contents = await session.read_resource(uri)
            got = await session.get_prompt(prompt, arguments)
    print(
        json.dumps(
            {
                "resources": [str(resource.uri) for resource in resources.resources],
                "templates": [t.uriTemplate for t in templates.resourceTemplates],
                "prompts": [entry.name for entry in prompts.prompts],
                "read": contents.contents[0].model_dump(mode="json"),
                "messages": [m.model_dump(mode="json") for m in got.messages],
            }
        )
    )


asyncio.run(main())

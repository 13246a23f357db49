// Lists a session's resources, resource templates and prompts, reads one
// resource and gets one prompt through the official TypeScript SDK's
// streamable HTTP client, as any MCP host would. Prints one JSON line with
// what it received; exits non-zero when a request fails.
//
// usage: node sdk-resources-client.mjs <mcp-url> <token> <resource-uri> <prompt-name> [<argument>=<value>...]
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, uri, prompt, ...pairs] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "sdk-resources-client", version: "1.0.0" });
await client.connect(transport);

const { resources } = await client.listResources();
const { resourceTemplates } = await client.listResourceTemplates();
const { prompts } = await client.listPrompts();
const read = await client.readResource({ uri });
assert.ok(read.contents.length > 0, "contents");
const args = Object.fromEntries(pairs.map((pair) => pair.split("=")));
const got = await client.getPrompt({ name: prompt, arguments: args });
assert.ok(got.messages.length > 0, "messages");

await client.close();
console.log(
  JSON.stringify({
    resources: resources.map((resource) => resource.uri),
    templates: resourceTemplates.map((template) => template.uriTemplate),
    prompts: prompts.map((entry) => entry.name),
    read: read.contents[0],
    messages: got.messages,
  }),
);

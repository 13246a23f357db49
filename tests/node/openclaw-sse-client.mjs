// Connects to an openclaw-proxy session the way OpenClaw's MCP client does
// for a server entry without `"transport": "streamable-http"`: the
// TypeScript SDK's SSEClientTransport (the legacy HTTP+SSE transport,
// 2024-11-05) with static headers, given both as `requestInit` (the POSTs)
// and through `eventSourceInit` (the GET that opens the stream). Lists
// tools, calls them, and receives progress. Prints one JSON line; exits
// non-zero on any mismatch.
//
// usage: node openclaw-sse-client.mjs <url> <token> [<session-id>]
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

const [url, token, sessionId] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
if (sessionId) {
  headers["MCP-Session-Id"] = sessionId;
}
const transport = new SSEClientTransport(new URL(url), {
  requestInit: { headers },
  eventSourceInit: {
    fetch: (input, init) => {
      const merged = new Headers(init?.headers);
      for (const [name, value] of Object.entries(headers)) {
        merged.set(name, value);
      }
      return fetch(input, { ...init, headers: merged });
    },
  },
});
const client = new Client({ name: "openclaw-like-sse-client", version: "1.0.0" });
await client.connect(transport);

const { tools } = await client.listTools();
const names = tools.map((tool) => tool.name);
for (const expected of ["echo", "test_simple_text", "test_tool_with_progress", "test_error_handling"]) {
  assert.ok(names.includes(expected), `tools/list lacks ${expected}: ${names}`);
}

const echoed = await client.callTool({ name: "echo", arguments: { text: "héllo 🦀" } });
assert.equal(echoed.structuredContent.text, "héllo 🦀");
assert.equal(echoed.content[0].type, "text");

const simple = await client.callTool({ name: "test_simple_text", arguments: {} });
assert.equal(simple.content[0].text, "This is a simple text response for testing.");

const progress = [];
const slow = await client.callTool(
  { name: "test_tool_with_progress", arguments: {} },
  undefined,
  { onprogress: (update) => progress.push(update) },
);
assert.equal(slow.content[0].text, "Progress test completed");
assert.deepEqual(progress.map((update) => update.progress), [0, 50, 100]);

const failed = await client.callTool({ name: "test_error_handling", arguments: {} });
assert.equal(failed.isError, true);
assert.match(failed.content[0].text, /intentionally returns an error/);

await client.close();
console.log(JSON.stringify({ ok: true, tools: names.length, progress: progress.map((u) => u.progress) }));

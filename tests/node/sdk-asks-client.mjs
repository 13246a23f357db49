// An agent host built on the official TypeScript SDK's client: it declares
// the elicitation, sampling and roots capabilities and answers the server's
// `elicitation/create` (its "user" fills in the form),
// `sampling/createMessage` (its "model" writes a line) and `roots/list` with
// handlers, as a host does. Calls one tool and prints one JSON line: the result, what the
// handlers were asked, and the revision negotiated.
//
// usage: node sdk-asks-client.mjs <mcp-url> <token> <tool> <streamable|sse>
//   streamable: StreamableHTTPClientTransport; sse: SSEClientTransport (the
//   legacy HTTP+SSE transport), with the token on the GET and the POSTs.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, token, tool, kind] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${token}` };
const transport =
  kind === "sse"
    ? new SSEClientTransport(new URL(url), {
        requestInit: { headers },
        eventSourceInit: {
          fetch: (input, init) => {
            const merged = new Headers(init?.headers);
            for (const [name, value] of Object.entries(headers)) merged.set(name, value);
            return fetch(input, { ...init, headers: merged });
          },
        },
      })
    : new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });

const client = new Client(
  { name: "sdk-asks-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} }, sampling: {}, roots: {} } },
);
const elicited = [];
const sampled = [];
let rootsAsked = 0;
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicited.push(request.params);
  return { action: "accept", content: { color: "teal" } };
});
client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
  sampled.push(request.params);
  const asked = request.params.messages.map((message) => message.content.text).join(" ");
  return { role: "assistant", model: "host-model-1", stopReason: "endTurn",
    content: { type: "text", text: `The model read: ${asked}` } };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  rootsAsked += 1;
  return { roots: [{ uri: "file:///work/project", name: "project" }] };
});

let protocolVersion = null; // the revision initialize negotiated
const setProtocolVersion = transport.setProtocolVersion.bind(transport);
transport.setProtocolVersion = (version) => {
  protocolVersion = version;
  setProtocolVersion(version);
};
await client.connect(transport);
const result = await client.callTool({ name: tool, arguments: { topic: "the sea" } });
await client.close();
console.log(JSON.stringify({ result, elicited, sampled, roots_asked: rootsAsked, protocolVersion }));

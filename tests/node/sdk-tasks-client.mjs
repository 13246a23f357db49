// An agent host built on the official TypeScript SDK's client and its
// experimental task support: it lists the tools (learning which run as
// tasks), calls a task-required tool through `callToolStream`, which
// creates the task, polls it, and on `input_required` fetches
// `tasks/result`, where the app's elicitation arrives and is answered by
// the host's handler; then lists its tasks, and creates and cancels a
// second task. Prints one JSON line of what it saw.
//
// usage: node sdk-tasks-client.mjs <mcp-url> <token>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client(
  { name: "sdk-tasks-client", version: "1.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
const elicited = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicited.push(request.params);
  return { action: "accept", content: { color: "teal" } };
});
await client.connect(transport);

const listed = {};
for (const tool of (await client.listTools()).tools) {
  listed[tool.name] = tool.execution?.taskSupport ?? null;
}

let created = null;
let result = null;
const statuses = [];
const stream = client.experimental.tasks.callToolStream(
  { name: "write_line", arguments: { topic: "the sea" } },
  CallToolResultSchema,
  { task: { ttl: 60000 } },
);
for await (const message of stream) {
  if (message.type === "taskCreated") created = message.task;
  if (message.type === "taskStatus") statuses.push(message.task.status);
  if (message.type === "result") result = message.result;
  if (message.type === "error") throw message.error;
}

const { tasks } = await client.experimental.tasks.listTasks();

const second = await client.request(
  { method: "tools/call", params: { name: "wait", arguments: {}, task: { ttl: 60000 } } },
  CreateTaskResultSchema,
);
const cancelled = await client.experimental.tasks.cancelTask(second.task.taskId);

await client.close();
console.log(JSON.stringify({ listed, created, statuses, result, elicited, tasks, cancelled }));

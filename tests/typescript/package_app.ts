// An app written with the openclaw-proxy-app package, for the end-to-end
// tests (tests/tests/e2e/typescript_app.rs): a tool for each thing the
// package does, one resource, one template, one prompt and a completion
// handler.
//
// Prints one JSON line on stdout per event the tests wait for:
// {"session": id, "mcp_url": url} for each session it registers, and
// {"cancelled": tool, "reason": why} when a running call is cancelled.
//
// usage: node package_app.ts --proxy-url URL --app-token TOKEN [--bridge grpc|websocket]
//                            [--max-concurrent-calls N]
import { parseArgs } from "node:util";
import { z } from "zod";
import { App, McpError, type Serving, ToolError } from "openclaw-proxy-app";

const event = (fields: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(fields)}\n`);
};

const { values } = parseArgs({ options: {
  "proxy-url": { type: "string" }, "app-token": { type: "string", default: "" }, bridge: { type: "string", default: "grpc" },
  "max-concurrent-calls": { type: "string", default: "32" },
} });
const app = new App(values["proxy-url"] ?? "http://127.0.0.1:8000", {
  appToken: values["app-token"], deviceId: "typescript-package-e2e", appVersion: "1.0.0",
  initialReconnectDelayMs: 20, maxReconnectDelayMs: 500, bridge: values.bridge === "websocket" ? "websocket" : "grpc",
  maxConcurrentCalls: Number(values["max-concurrent-calls"]),
  logger: (level, message) => console.error(`${level}: ${message}`),
});
let serving: Serving | undefined;

app.tool("echo_text", { description: "Echo the text back.", input: z.object({ text: z.string() }) },
  ({ text }) => ({ echoed_text: text }));

app.tool("which_task", { description: "Says which MCP task it runs as.", taskSupport: "optional" },
  (_args, ctx) => ctx.taskId || "plain");

app.tool("steps", { description: "Report progress for each step, then finish.", input: z.object({ count: z.number().int() }) },
  async ({ count }, ctx) => {
    for (let step = 1; step <= count; step++) {
      ctx.progress(step, { total: count, message: `step ${step}` });
      await new Promise((resolve) => setImmediate(resolve));
    }
    return "done";
  });

app.tool("wait_for_cancel", { description: "Waits until the call is cancelled." }, (_args, ctx) =>
  new Promise((_resolve, reject) => {
    ctx.signal.addEventListener("abort", () => {
      event({ cancelled: "wait_for_cancel", reason: String(ctx.signal.reason) });
      reject(ctx.signal.reason);
    });
  }));

app.tool("ask_color", { description: "Asks the user for a color.", requiresClient: ["elicitation"] }, async (_args, ctx) => {
  const answer = await ctx.elicit("Which color?", z.object({ color: z.string() }));
  return answer.content ? `${answer.action}: ${answer.content.color}` : answer.action;
});

app.tool("ask_model", { description: "Asks the client's model for a summary." }, async (_args, ctx) => {
  const reply = await ctx.sample("Summarise the notes.", { maxTokens: 50 });
  return `${reply.model}: ${reply.text}`;
});

app.tool("list_roots", { description: "Lists the client's roots." }, async (_args, ctx) =>
  (await ctx.roots()).map((root) => `${root.name ?? ""}=${root.uri}`).join(", "));

app.tool("log_line", { description: "Sends a log record to the caller.", input: z.object({ text: z.string() }) }, ({ text }, ctx) => {
  ctx.log("warning", { said: text }, "package-app");
  return "logged";
});

app.tool("whoami", { description: "Says who is calling." }, (_args, ctx) =>
  ({ caller: ctx.caller.kind, revision: ctx.client.protocolVersion }));

app.tool("fail", { description: "Always fails.", input: z.object({ reason: z.string() }) }, ({ reason }) => {
  if (reason === "tool") throw new ToolError("the tool refused");
  throw new RangeError(reason);
});

app.tool("wipe", { description: "A tool whose calls the user confirms first.", confirm: "Really wipe everything?" }, () => "wiped");

app.tool("add_tool", { description: "Declares a new tool while serving.", input: z.object({ name: z.string() }) }, async ({ name }) => {
  app.tool(name, { description: "Added while serving." }, () => `${name} answers`);
  await serving?.update();
  return `added ${name}`;
});

app.resource("notes:///index", { mimeType: "text/plain", description: "The list of notes." }, () => "welcome, plans");

app.resourceTemplate("notes:///{name}", { mimeType: "text/markdown" }, ({ name = "" }) => {
  if (name !== "welcome" && name !== "plans") throw McpError.resourceNotFound(`notes:///${name}`);
  return `# ${name[0]?.toUpperCase()}${name.slice(1)}`;
});

app.prompt("summarise", { description: "Summarise one note.", arguments: { note: { required: true }, style: {} } },
  ({ note, style }) => `Summarise the note ${note}, ${style ?? "brief"}.`);

app.completion(({ value }) => ["brief", "bulleted", "long"].filter((v) => v.startsWith(value)));

app.onSession((session) => event({ session: session.sessionId, mcp_url: session.mcpUrl }));

try {
  serving = await app.serve();
  await serving.closed;
} catch (error) {
  console.error(String(error));
  process.exit(1);
}

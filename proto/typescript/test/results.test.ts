// How a handler's value becomes an MCP result, and how calls are routed to
// handlers: arguments checked against the schema, failures told to the agent.
import assert from "node:assert/strict";
import { test } from "node:test";
import { z } from "zod";
import { App, Context, McpError, ToolError, image, message, text, toolContentJson } from "openclaw-proxy-app";

function context(method = "tools/call", protocolVersion = "2025-11-25"): Context {
  const sent: unknown[] = [];
  return new Context({
    requestId: "r1", method, client: { name: "test", version: "0", protocolVersion },
    caller: { kind: "none", issuer: "", subject: "", clientId: "", scopes: [] }, meta: {}, traceParent: "",
    signal: new AbortController().signal,
    link: { send: (m) => sent.push(m), ask: () => Promise.reject(new Error("no client")) },
  });
}

test("a string is one text block, an object structured content, content blocks pass, other values are wrapped", () => {
  assert.equal(toolContentJson("hi"), '"hi"');
  assert.equal(toolContentJson({ echoed_text: "hi" }), '{"echoed_text":"hi"}');
  assert.equal(toolContentJson(text("a")), '[{"type":"text","text":"a"}]');
  assert.deepEqual(JSON.parse(toolContentJson([text("a"), image(new Uint8Array([1, 2]), "image/png")])),
    [{ type: "text", text: "a" }, { type: "image", data: "AQI=", mimeType: "image/png" }]);
  assert.equal(toolContentJson(3), '{"result":3}');
  assert.equal(toolContentJson(["a", "b"]), '{"result":["a","b"]}');
  assert.equal(toolContentJson(undefined), "");
  assert.equal(toolContentJson(new Map()), '{}');
});

test("sync and async handlers both answer; arguments are validated and typed by zod", async () => {
  const app = new App("http://127.0.0.1:8000")
    .tool("add", { input: z.object({ a: z.number(), b: z.number() }) }, ({ a, b }) => ({ sum: a + b }))
    .tool("later", { input: z.object({ text: z.string() }) }, async ({ text }) => text.toUpperCase());
  assert.deepEqual(await app.callTool("add", { a: 1, b: 2 }, context()), { ok: true, content_json: '{"sum":3}' });
  assert.deepEqual(await app.callTool("later", { text: "hi" }, context()), { ok: true, content_json: '"HI"' });
  const refused = await app.callTool("add", { a: "one", b: 2 }, context());
  assert.equal(refused.ok, false);
  assert.match(!refused.ok ? refused.error : "", /^the arguments do not fit the schema: a: /);
});

test("a ToolError is told to the agent as it is; another error with its type; an unknown tool by name", async () => {
  const app = new App("http://127.0.0.1:8000")
    .tool("refuse", {}, () => { throw new ToolError("there is no note plans"); })
    .tool("crash", {}, () => { throw new RangeError("boom"); });
  assert.deepEqual(await app.callTool("refuse", {}, context()), { ok: false, error: "there is no note plans" });
  assert.deepEqual(await app.callTool("crash", {}, context()), { ok: false, error: "RangeError: boom" });
  assert.deepEqual(await app.callTool("nope", {}, context()), { ok: false, error: 'this app has no tool named "nope"' });
});

test("resources, templates, prompts and completions answer their MCP requests", async () => {
  const app = new App("http://127.0.0.1:8000")
    .resource("notes:///index", { mimeType: "text/plain" }, () => "welcome, plans")
    .resourceTemplate("notes:///{name}", { mimeType: "text/markdown" }, ({ name }) => {
      if (name !== "plans") throw McpError.resourceNotFound(`notes:///${name}`);
      return `# ${name}`;
    })
    .resource("blob:///one", {}, () => new Uint8Array([255]))
    .prompt("summarise", { arguments: { note: { required: true }, style: {} } },
      ({ note, style }) => [message("user", `Summarise ${note}, ${style ?? "brief"}.`)])
    .completion(({ value }) => ["brief", "bulleted", "long"].filter((v) => v.startsWith(value)));
  const ctx = context("resources/read");
  assert.deepEqual(await app.answerMcp("resources/read", { uri: "notes:///index" }, ctx),
    { contents: [{ uri: "notes:///index", mimeType: "text/plain", text: "welcome, plans" }] });
  assert.deepEqual(await app.answerMcp("resources/read", { uri: "notes:///plans" }, ctx),
    { contents: [{ uri: "notes:///plans", mimeType: "text/markdown", text: "# plans" }] });
  assert.deepEqual(await app.answerMcp("resources/read", { uri: "blob:///one" }, ctx),
    { contents: [{ uri: "blob:///one", blob: "/w==" }] });
  await assert.rejects(app.answerMcp("resources/read", { uri: "notes:///nope" }, ctx),
    (error: McpError) => error.code === -32002 && (error.data as { uri: string }).uri === "notes:///nope");
  await assert.rejects(app.answerMcp("resources/read", { uri: "other:///x" }, ctx), (error: McpError) => error.code === -32002);
  assert.deepEqual(await app.answerMcp("prompts/get", { name: "summarise", arguments: { note: "plans" } }, ctx),
    { messages: [{ role: "user", content: { type: "text", text: "Summarise plans, brief." } }] });
  await assert.rejects(app.answerMcp("prompts/get", { name: "summarise", arguments: {} }, ctx),
    (error: McpError) => error.code === -32602 && /note/.test(error.message));
  await assert.rejects(app.answerMcp("prompts/get", { name: "nope" }, ctx), (error: McpError) => error.code === -32602);
  assert.deepEqual(await app.answerMcp("completion/complete",
    { ref: { type: "ref/prompt", name: "summarise" }, argument: { name: "style", value: "b" } }, ctx),
    { completion: { values: ["brief", "bulleted"] } });
  await assert.rejects(app.answerMcp("tools/list", {}, ctx), (error: McpError) => error.code === -32601);
});

test("more than 100 completion values are cut to 100, saying how many there are", async () => {
  const app = new App("http://127.0.0.1:8000").completion(() => Array.from({ length: 150 }, (_, i) => `v${i}`));
  const answer = await app.answerMcp("completion/complete", { ref: { type: "ref/prompt", name: "p" }, argument: { name: "a", value: "" } }, context()) as
    { completion: { values: string[]; total: number; hasMore: boolean } };
  assert.equal(answer.completion.values.length, 100);
  assert.equal(answer.completion.total, 150);
  assert.equal(answer.completion.hasMore, true);
});

test("ctx.progress and ctx.log send their messages for the call", () => {
  const sent: unknown[] = [];
  const ctx = new Context({
    requestId: "r7", method: "tools/call", client: { name: "", version: "", protocolVersion: "" },
    caller: { kind: "none", issuer: "", subject: "", clientId: "", scopes: [] }, meta: {}, traceParent: "",
    signal: new AbortController().signal, link: { send: (m) => sent.push(m), ask: () => Promise.resolve({}) },
  });
  ctx.progress(1, { total: 3, message: "step 1" });
  ctx.log("warning", { said: "hi" }, "app");
  assert.deepEqual(sent, [
    { progress: { request_id: "r7", progress: 1, total: 3, message: "step 1" } },
    { log: { request_id: "r7", level: "warning", logger: "app", data_json: '{"said":"hi"}' } },
  ]);
});

test("ctx.elicit validates and types an accepted answer with its zod schema", async () => {
  const asked: unknown[] = [];
  const ctx = new Context({
    requestId: "r1", method: "tools/call", client: { name: "", version: "", protocolVersion: "" },
    caller: { kind: "none", issuer: "", subject: "", clientId: "", scopes: [] }, meta: {}, traceParent: "",
    signal: new AbortController().signal,
    link: { send: () => undefined, ask: (_id, method, params) => { asked.push([method, params]); return Promise.resolve({ action: "accept", content: { color: "teal" } }); } },
  });
  const answer = await ctx.elicit("Which color?", z.object({ color: z.string() }));
  assert.equal(answer.action, "accept");
  assert.equal(answer.content?.color, "teal");
  const [[method, params]] = asked as [[string, { mode: string; requestedSchema: { required: string[] } }]];
  assert.equal(method, "elicitation/create");
  assert.equal(params.mode, "form");
  assert.deepEqual(params.requestedSchema.required, ["color"]);
  await assert.rejects(ctx.elicit("Which number?", z.object({ n: z.number() })), /does not fit the form/);
});

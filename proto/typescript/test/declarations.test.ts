// Declarations as the proxy receives them: names checked when declared,
// schemas from zod or JSON Schema, the confirmation flag and client
// requirements on the tool definition.
import assert from "node:assert/strict";
import { test } from "node:test";
import { z } from "zod";
import { App, Backoff, UriTemplate, version } from "openclaw-proxy-app";
import { readFileSync } from "node:fs";

const app = () => new App("http://127.0.0.1:8000");

function definitions(built: App) {
  return (built as unknown as { declarations(): { tools: Array<Record<string, any>>; prompts: Array<Record<string, any>>; resource_templates: Array<Record<string, any>> } }).declarations();
}

test("a zod input becomes the tool's JSON Schema, with descriptions and required fields", () => {
  const built = app().tool("search", {
    description: "Search the notes.",
    input: z.object({ query: z.string().describe("What to look for."), limit: z.number().int().optional() }),
  }, ({ query, limit }) => `${query} ${limit ?? 10}`);
  const [tool] = definitions(built).tools;
  assert.equal(tool?.["name"], "search");
  assert.equal(tool?.["description"], "Search the notes.");
  const schema = JSON.parse(tool?.["input_schema_json"]);
  assert.equal(schema.type, "object");
  assert.deepEqual(schema.required, ["query"]);
  assert.equal(schema.properties.query.description, "What to look for.");
  assert.equal(schema.$schema, undefined);
});

test("a JSON Schema input is declared as given; no input is any object", () => {
  const schema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };
  const built = app().tool("echo", { input: schema }, (args) => args["text"]).tool("nothing", {}, () => "ok");
  const [echo, nothing] = definitions(built).tools;
  assert.deepEqual(JSON.parse(echo?.["input_schema_json"]), schema);
  assert.deepEqual(JSON.parse(nothing?.["input_schema_json"]), { type: "object" });
});

test("a schema that is not an object is refused when declared, saying so", () => {
  assert.throws(() => app().tool("bad", { input: z.string() as never }, () => ""), /must describe an object/);
});

test("confirm and requiresClient reach the tool definition", () => {
  const built = app()
    .tool("wipe", { confirm: "Really wipe everything?" }, () => "wiped")
    .tool("ask", { confirm: true, requiresClient: ["elicitation"], timeoutSeconds: 120 }, () => "asked");
  const [wipe, ask] = definitions(built).tools;
  assert.deepEqual(wipe?.["confirm"], { message: "Really wipe everything?" });
  assert.equal(wipe?.["requires"], undefined);
  assert.deepEqual(ask?.["confirm"], { message: "" });
  assert.deepEqual(ask?.["requires"], { client_capabilities: ["elicitation"] });
  assert.equal(ask?.["timeout_seconds"], 120);
});

test("taskSupport reaches the tool definition, and an unknown value is refused", () => {
  const built = app()
    .tool("export", { taskSupport: "optional" }, () => "exported")
    .tool("report", { taskSupport: "required" }, () => "reported")
    .tool("quick", {}, () => "done");
  const [exported, report, quick] = definitions(built).tools;
  assert.deepEqual(exported?.["execution"], { task_support: "TASK_SUPPORT_OPTIONAL" });
  assert.deepEqual(report?.["execution"], { task_support: "TASK_SUPPORT_REQUIRED" });
  assert.equal(quick?.["execution"], undefined);
  assert.throws(() => app().tool("odd", { taskSupport: "sometimes" as never }, () => ""), /taskSupport "sometimes" is not understood/);
});

test("names the proxy would refuse are refused when declared, naming the rule", () => {
  assert.throws(() => app().tool("has space", {}, () => ""), /A-Z a-z 0-9 _ - \./);
  assert.throws(() => app().prompt("", {}, () => ""), /prompt name/);
  assert.throws(() => new App("127.0.0.1:8000"), /is not a URL; give the proxy.s base URL/);
  assert.throws(() => new App("ftp://127.0.0.1:8000"), /http:\/\/ or https:\/\//);
});

test("prompt arguments and templates are declared", () => {
  const built = app()
    .prompt("summarise", { description: "Summarise one note.", arguments: { note: { required: true }, style: {} } }, () => "")
    .resourceTemplate("notes:///{name}", { mimeType: "text/markdown" }, () => "");
  const declared = definitions(built);
  assert.deepEqual(declared.prompts[0]?.["arguments"].map((a: any) => [a.name, a.required]), [["note", true], ["style", false]]);
  assert.equal(declared.resource_templates[0]?.["uri_template"], "notes:///{name}");
  assert.equal(declared.resource_templates[0]?.["mime_type"], "text/markdown");
});

test("a removed tool is no longer declared", () => {
  const built = app().tool("a", {}, () => "").tool("b", {}, () => "");
  assert.equal(built.removeTool("a"), true);
  assert.deepEqual(definitions(built).tools.map((t) => t["name"]), ["b"]);
});

test("URI templates take one segment for {name} and a path for {+name}, percent-decoded", () => {
  assert.deepEqual(new UriTemplate("notes:///{name}").match("notes:///my%20plans"), { name: "my plans" });
  assert.equal(new UriTemplate("notes:///{name}").match("notes:///a/b"), undefined);
  assert.deepEqual(new UriTemplate("files:///{+path}").match("files:///a/b.txt"), { path: "a/b.txt" });
  assert.throws(() => new UriTemplate("notes:///{name"), /not closed/);
});

test("the reconnection delay doubles up to its ceiling, jittered between half and one and a half times the step", () => {
  const backoff = new Backoff(250, 1000);
  assert.deepEqual([0, 0, 0, 0].map(() => backoff.next(() => 0.5)), [250, 500, 1000, 1000]);
  backoff.reset();
  assert.equal(backoff.next(() => 0), 125);
  assert.equal(backoff.next(() => 0.9999), 500 * 1.4999);
});

test("the package's version is the one in its package.json", () => {
  const manifest = JSON.parse(readFileSync(new URL(import.meta.resolve("openclaw-proxy-app/package.json")), "utf8"));
  assert.equal(version, manifest.version);
});

test("serving a proxy nobody listens at retries until its signal aborts, then rejects saying so", async () => {
  // Port 1 on the loopback: refused at once, every time.
  const warnings: string[] = [];
  const unreachable = new App("http://127.0.0.1:1", {
    initialReconnectDelayMs: 5, maxReconnectDelayMs: 20, requestTimeoutMs: 2_000,
    logger: (level, text) => { if (level === "warn") warnings.push(text); },
  });
  const controller = new AbortController();
  const serving = unreachable.serve({ signal: controller.signal });
  while (warnings.length < 2) await new Promise((resolve) => setTimeout(resolve, 10));
  controller.abort();
  await assert.rejects(serving, /serving was closed before the bridge attached/);
  assert.match(warnings[0] ?? "", /could not reach the proxy \(.*\); retrying/);
});

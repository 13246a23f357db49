// An openclaw-proxy app in TypeScript: two tools, echo_text and confirm_echo (which asks the
// user first), one resource, echo://readme, and one prompt, echo_prompt, served over the
// gRPC bridge.
//
// Registers a session, attaches its bridge, answers calls, MCP requests and pings, and
// reconnects with backoff and jitter; when the proxy no longer knows the session
// (it restarted) it registers a new one. Prints each session id on its own
// stdout line. Node 22.18+ runs it as is: node echo_app.ts --proxy-url URL [--app-token T]
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "proto");
const definition = protoLoader.loadSync("openclaw/proxy/v1/proxy.proto", {
  includeDirs: [root], keepCase: true, longs: String, defaults: true, oneofs: true,
});
const v1 = (grpc.loadPackageDefinition(definition) as any).openclaw.proxy.v1;

const { values } = parseArgs({
  options: { "proxy-url": { type: "string" }, "app-token": { type: "string", default: "" } },
});
const url = values["proxy-url"] ?? "http://127.0.0.1:8000";
const target = url.replace(/^https?:\/\//, "").replace(/\/$/, "");
const credentials = url.startsWith("https://") ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
const options = { "grpc.keepalive_time_ms": 20000, "grpc.keepalive_timeout_ms": 10000, "grpc.max_reconnect_backoff_ms": 5000 };
const sessions = new v1.SessionService(target, credentials, options);
const bridge = new v1.BridgeService(target, credentials, options);
function bearer(token: string | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

const schema = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };
const tools = [{ name: "echo_text", description: "Echo the text back.", input_schema_json: JSON.stringify(schema) },
  { name: "confirm_echo", description: "Ask the user, then echo the text.", input_schema_json: JSON.stringify(schema) }];
const resources = [{ uri: "echo://readme", name: "readme", description: "What this app does.", mime_type: "text/plain" }];
const prompts = [{ name: "echo_prompt", description: "Ask the agent to echo a text.",
  arguments: [{ name: "text", description: "The text to echo.", required: true }] }];
const README = 'This app echoes text back: call echo_text with {"text": ...}.';
const fatal = [grpc.status.UNAUTHENTICATED, grpc.status.INVALID_ARGUMENT, grpc.status.ABORTED];

// The form confirm_echo shows the user: one string field.
const noteForm = { type: "object", properties: { note: { type: "string", title: "A note to add" } }, required: ["note"] };

// Asks the call's MCP client (elicitation/create, sampling/createMessage, roots/list); resolves with its result.
type Ask = (method: string, params: object) => Promise<any>;

async function runTool(name: string, args: any, ask: Ask): Promise<unknown> {
  if (name === "echo_text") return { echoed_text: args.text };
  if (name === "confirm_echo") { // asks the user, through the MCP client, before echoing
    const reply = await ask("elicitation/create",
      { mode: "form", message: `Echo ${JSON.stringify(args.text)} back?`, requestedSchema: noteForm });
    if (reply.action !== "accept") return `The user chose ${reply.action}: nothing was echoed.`; // decline, cancel
    return { echoed_text: args.text, note: reply.content.note };
  }
  throw new Error(`this app has no tool named ${name}`);
}

// An MCP request that fails with a JSON-RPC error.
const failure = (code: number, message: string, data?: unknown) => Object.assign(new Error(message), { code, data });

// The MCP result of resources/read or prompts/get; throws a JSON-RPC error otherwise.
async function serveMcp(method: string, paramsJson: string, revision: string): Promise<unknown> {
  const params = JSON.parse(paramsJson || "{}");
  if (method === "resources/read") {
    if (params.uri !== "echo://readme") // 2026-07-28 names -32602 for it (SEP-2164)
      throw failure(revision >= "2026-07-28" ? -32602 : -32002, `Resource not found: ${params.uri}`, { uri: params.uri });
    return { contents: [{ uri: "echo://readme", mimeType: "text/plain", text: README }] };
  }
  if (method === "prompts/get") {
    if (params.name !== "echo_prompt") throw failure(-32602, `this app has no prompt named ${params.name}`);
    const text = `Use the echo_text tool to echo this text: ${params.arguments?.text ?? ""}`;
    return { messages: [{ role: "user", content: { type: "text", text } }] };
  }
  throw failure(-32601, `this app does not serve ${method}`);
}

// Resolves with the session id and the session's own token, which opens its bridge.
function createSession(): Promise<{ session_id: string; session_token: string }> {
  const request = { metadata: { device_id: "typescript-example", app_version: "1.0.0" }, tools, resources, prompts };
  return new Promise((resolve, reject) =>
    sessions.CreateSession(request, bearer(values["app-token"]), { deadline: Date.now() + 30_000 },
      (error: grpc.ServiceError | null, response: any) => (error ? reject(error) : resolve(response))));
}

// Serves one bridge until it ends; resolves with the status code it ended with.
function serveBridge(sessionId: string, token: string, onAttached: () => void): Promise<grpc.status> {
  // The app's asks waiting for their ClientResponse, by "call/id"; a cancel or the bridge's end rejects them.
  const waiting = new Map<string, { callId: string; settle: (response: any) => void }>();
  const endAsks = (callId?: string) => waiting.forEach((ask, key) => {
    if (callId === undefined || ask.callId === callId) { waiting.delete(key); ask.settle(null); }
  });
  let askIds = 0;
  return new Promise((resolve) => {
    // mcp-session-id lets a load balancer send the bridge where the session's MCP calls go.
    const metadata = bearer(token);
    metadata.set("mcp-session-id", sessionId);
    const stream = bridge.Attach(metadata);
    // How one call asks: a ClientRequest, resolved with the client's result.
    const askFor = (callId: string): Ask => (method, params) => new Promise((resolve, reject) => {
      const id = String(++askIds);
      waiting.set(`${callId}/${id}`, { callId, settle: (response) => {
        if (response?.outcome === "result_json") resolve(JSON.parse(response.result_json));
        else reject(new Error(response ? `the MCP client could not answer: ${response.error.message}` : "the call ended"));
      } });
      stream.write({ client_request: { request_id: callId, id, method, params_json: JSON.stringify(params) } });
    });
    stream.on("error", (error: grpc.ServiceError) => { endAsks(); resolve(error.code); });
    stream.on("status", (status: grpc.StatusObject) => { endAsks(); resolve(status.code); });
    stream.on("end", () => stream.end());
    stream.on("data", (message: any) => {
      if (message.kind === "attached") onAttached();
      else if (message.kind === "ping") stream.write({ pong: { nonce: message.ping.nonce } });
      else if (message.kind === "error") console.error(`proxy notice: ${message.error.message}`);
      else if (message.kind === "cancel") endAsks(message.cancel.request_id);
      else if (message.kind === "client_response") { // the MCP client answered an ask
        const key = `${message.client_response.request_id}/${message.client_response.id}`;
        waiting.get(key)?.settle(message.client_response);
        waiting.delete(key);
      } else if (message.kind === "invoke") {
        const call = message.invoke; // each call runs on its own; a failure becomes an isError result
        runTool(call.tool_name, JSON.parse(call.arguments_json || "{}"), askFor(call.request_id)).then(
          (content) => stream.write({ result: { request_id: call.request_id, ok: true, content_json: JSON.stringify(content) } }),
          (error) => stream.write({ result: { request_id: call.request_id, ok: false, error: String(error?.message ?? error) } }));
      } else if (message.kind === "mcp_request") {
        const request = message.mcp_request; // answered like a call: on its own, a failure as a JSON-RPC error
        serveMcp(request.method, request.params_json, request.client?.protocol_version ?? "").then(
          (result) => stream.write({ mcp_result: { request_id: request.request_id, result_json: JSON.stringify(result) } }),
          (error) => stream.write({ mcp_result: { request_id: request.request_id, error: { code: error?.code ?? -32603,
            message: String(error?.message ?? error), data_json: error?.data === undefined ? "" : JSON.stringify(error.data) } } }));
      }
    });
    stream.write({ hello: { session_id: sessionId } });
  });
}

let sessionId: string | null = null;
let sessionToken = "";
let delay = 250;
for (;;) {
  try {
    if (sessionId === null) {
      ({ session_id: sessionId, session_token: sessionToken } = await createSession());
      console.log(sessionId);
    }
    const code = await serveBridge(sessionId!, sessionToken || values["app-token"]!, () => { delay = 250; });
    if (code === grpc.status.NOT_FOUND) sessionId = null; // the proxy forgot the session: register anew
    else if (fatal.includes(code)) throw Object.assign(new Error("the bridge was refused"), { code });
    console.error(sessionId ? `bridge lost (${grpc.status[code]}); reconnecting` : "session gone; registering a new one");
  } catch (error: any) {
    if (fatal.includes(error.code)) { console.error(`stopped: ${error.message}`); process.exit(1); }
    console.error(`could not reach the proxy (${error.message}); retrying`);
  }
  await new Promise((wake) => setTimeout(wake, delay * (0.5 + Math.random()))); // backoff with jitter
  delay = Math.min(delay * 2, 30_000);
}

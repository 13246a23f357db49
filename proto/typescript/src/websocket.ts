/**
 * REST registration and the JSON WebSocket bridge (docs/websocket-bridge.md),
 * for networks and proxies in between that do not pass HTTP/2. Frames are
 * translated to and from the contract's messages, so serving does not know
 * which bridge it holds. `https://` proxy URLs give `wss://` bridges.
 */
import WebSocket from "ws";
import { AppError } from "./errors.js";
import type { AppMessage } from "./generated/openclaw/proxy/v1/AppMessage.js";
import type { CallerIdentity__Output } from "./generated/openclaw/proxy/v1/CallerIdentity.js";
import type { CallerInfo__Output } from "./generated/openclaw/proxy/v1/CallerInfo.js";
import type { CreateSessionRequest } from "./generated/openclaw/proxy/v1/CreateSessionRequest.js";
import type { CreateSessionResponse__Output } from "./generated/openclaw/proxy/v1/CreateSessionResponse.js";
import type { PromptDefinition } from "./generated/openclaw/proxy/v1/PromptDefinition.js";
import type { ProxyMessage__Output } from "./generated/openclaw/proxy/v1/ProxyMessage.js";
import type { ResourceDefinition } from "./generated/openclaw/proxy/v1/ResourceDefinition.js";
import type { ResourceTemplateDefinition } from "./generated/openclaw/proxy/v1/ResourceTemplateDefinition.js";
import type { ToolDefinition } from "./generated/openclaw/proxy/v1/ToolDefinition.js";
import { type Attached, type BridgeEnd, TAKEN_OVER, TOKEN_REFUSED, type Transport, Unreachable } from "./transport.js";

type Json = Record<string, unknown>;

/** Close codes (docs/websocket-bridge.md). */
const GONE = 4404;
const BAD_TOKEN = 4401;
const REPLACED = 4409;

function parse(text: string | undefined): unknown {
  return text ? JSON.parse(text) : undefined;
}

function described(fields: Json): Json {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== "" && value !== undefined && value !== false));
}

/** The declarations as the REST body and the `update_tools` frame spell them. */
export function declarationsJson(d: {
  tools?: ToolDefinition[] | undefined; resources?: ResourceDefinition[] | undefined;
  resource_templates?: ResourceTemplateDefinition[] | undefined; prompts?: PromptDefinition[] | undefined;
}): Json {
  return {
    tools: (d.tools ?? []).map((t) => ({
      name: t.name, description: t.description ?? "", input_schema: parse(t.input_schema_json) ?? { type: "object" },
      ...(t.timeout_seconds ? { timeout_seconds: t.timeout_seconds } : {}),
      ...(t.confirm ? { confirm: t.confirm.message ? { message: t.confirm.message } : true } : {}),
      ...(t.requires?.client_capabilities?.length ? { requires: { client_capabilities: t.requires.client_capabilities } } : {}),
    })),
    resources: (d.resources ?? []).map((r) => described({
      uri: r.uri, name: r.name, title: r.title, description: r.description, mimeType: r.mime_type,
    })),
    resource_templates: (d.resource_templates ?? []).map((r) => described({
      uriTemplate: r.uri_template, name: r.name, title: r.title, description: r.description, mimeType: r.mime_type,
    })),
    prompts: (d.prompts ?? []).map((p) => described({
      name: p.name, title: p.title, description: p.description,
      arguments: (p.arguments ?? []).map((a) => described({ name: a.name, title: a.title, description: a.description, required: a.required })),
    })),
  };
}

/** The WebSocket frame of an app message (undefined for `hello`, which has none). */
export function appFrame(message: AppMessage): Json | undefined {
  if (message.result) {
    const r = message.result;
    return r.ok
      ? { type: "invoke_result", request_id: r.request_id, ok: true, content: parse(r.content_json) ?? null }
      : { type: "invoke_result", request_id: r.request_id, ok: false, error: r.error ?? "" };
  }
  if (message.progress) {
    const p = message.progress;
    return { type: "progress", request_id: p.request_id, progress: p.progress, ...(p.total == null ? {} : { total: p.total }), ...(p.message ? { message: p.message } : {}) };
  }
  if (message.log) {
    const l = message.log;
    return { type: "log", request_id: l.request_id, level: l.level, ...(l.logger ? { logger: l.logger } : {}), data: parse(l.data_json) ?? null };
  }
  if (message.mcp_result) {
    const m = message.mcp_result;
    if (m.error) {
      const data = parse(m.error.data_json);
      return { type: "mcp_result", request_id: m.request_id, error: { code: m.error.code, message: m.error.message, ...(data === undefined ? {} : { data }) } };
    }
    return { type: "mcp_result", request_id: m.request_id, result: parse(m.result_json) ?? {} };
  }
  if (message.client_request) {
    const c = message.client_request;
    return { type: "client_request", request_id: c.request_id, id: c.id, method: c.method, params: parse(c.params_json) ?? {} };
  }
  if (message.resource_updated) return { type: "resource_updated", uri: message.resource_updated.uri };
  if (message.update_tools) {
    const u = message.update_tools;
    return { type: "update_tools", ...declarationsJson({
      tools: u.tools, resources: u.resources?.resources, resource_templates: u.resource_templates?.resource_templates, prompts: u.prompts?.prompts,
    }) };
  }
  if (message.pong) return { type: "pong", nonce: Number(message.pong.nonce) };
  return undefined;
}

const EMPTY: ProxyMessage__Output = {
  attached: null, invoke: null, ping: null, error: null, cancel: null, tools_updated: null, mcp_request: null, client_response: null,
};

const text = (value: unknown): string => (typeof value === "string" ? value : value === undefined || value === null ? "" : String(value));
const object = (value: unknown): Json => (typeof value === "object" && value !== null && !Array.isArray(value) ? value as Json : {});

function callerInfo(frame: Json): CallerInfo__Output {
  const c = object(frame["client"]);
  return { name: text(c["name"]), version: text(c["version"]), protocol_version: text(c["protocolVersion"]) };
}

function callerIdentity(frame: Json): CallerIdentity__Output {
  const c = object(frame["caller"]);
  return {
    kind: text(c["kind"]), issuer: text(c["issuer"]), subject: text(c["subject"]), client_id: text(c["client_id"]),
    scopes: Array.isArray(c["scopes"]) ? c["scopes"].map(text) : [],
  };
}

const requestId = (frame: Json): string => text(frame["request_id"] ?? frame["requestId"]);

/** The contract's message for a proxy frame (undefined for a frame this package does not use). */
export function proxyMessage(frame: Json): ProxyMessage__Output | undefined {
  switch (frame["type"]) {
    case "invoke_tool":
      return { ...EMPTY, kind: "invoke", invoke: {
        session_id: text(frame["mcpSessionId"]), request_id: requestId(frame), tool_name: text(frame["tool_name"] ?? frame["toolName"]),
        arguments_json: JSON.stringify(frame["arguments"] ?? {}), meta_json: frame["_meta"] === undefined ? "" : JSON.stringify(frame["_meta"]),
        client: callerInfo(frame), trace_parent: text(frame["traceparent"]), caller: callerIdentity(frame),
        task_id: text(frame["task_id"]),
      } };
    case "mcp_request":
      return { ...EMPTY, kind: "mcp_request", mcp_request: {
        session_id: text(frame["mcpSessionId"]), request_id: requestId(frame), method: text(frame["method"]),
        params_json: JSON.stringify(frame["params"] ?? {}), client: callerInfo(frame), trace_parent: text(frame["traceparent"]),
        caller: callerIdentity(frame),
      } };
    case "cancel_tool":
      return { ...EMPTY, kind: "cancel", cancel: { request_id: requestId(frame), reason: text(frame["reason"]) } };
    case "ping":
      return { ...EMPTY, kind: "ping", ping: { nonce: text(frame["nonce"] ?? 0) } };
    case "error":
      return { ...EMPTY, kind: "error", error: { message: text(frame["message"]), request_id: requestId(frame) } };
    case "tools_updated":
      return { ...EMPTY, kind: "tools_updated", tools_updated: {
        tools: Number(frame["tools"] ?? 0), resources: Number(frame["resources"] ?? 0),
        resource_templates: Number(frame["resource_templates"] ?? 0), prompts: Number(frame["prompts"] ?? 0),
      } };
    case "client_response": {
      const error = frame["error"];
      if (typeof error === "object" && error !== null) {
        const e = error as Json;
        return { ...EMPTY, kind: "client_response", client_response: {
          request_id: requestId(frame), id: text(frame["id"]), outcome: "error",
          error: { code: Number(e["code"] ?? 0), message: text(e["message"]), data_json: e["data"] === undefined ? "" : JSON.stringify(e["data"]) },
        } };
      }
      return { ...EMPTY, kind: "client_response", client_response: {
        request_id: requestId(frame), id: text(frame["id"]), outcome: "result_json", result_json: JSON.stringify(frame["result"] ?? {}),
      } };
    }
    default:
      return undefined;
  }
}

/** REST registration and the WebSocket bridge. */
export class WebSocketTransport implements Transport {
  readonly #base: string;
  readonly #wsBase: string;

  constructor(proxyUrl: string) {
    this.#base = proxyUrl;
    this.#wsBase = proxyUrl.replace(/^http/, "ws");
  }

  async create(request: CreateSessionRequest, appToken: string, timeoutMs: number): Promise<CreateSessionResponse__Output> {
    const body = {
      device_id: request.metadata?.device_id ?? "", device_name: request.metadata?.device_name ?? "",
      app_version: request.metadata?.app_version ?? "", ...(request.metadata?.chat_id ? { chat_id: request.metadata.chat_id } : {}),
      ...declarationsJson(request), ...(request.owner ? { owner: request.owner } : {}),
    };
    let response: Response;
    try {
      response = await fetch(`${this.#base}/v1/chat/sessions`, {
        method: "POST", body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs),
        headers: { "content-type": "application/json", ...(appToken ? { authorization: `Bearer ${appToken}` } : {}) },
      });
    } catch (error) {
      throw new Unreachable(`cannot register: ${error instanceof Error ? error.message : String(error)}`);
    }
    const detail = await response.text();
    if (response.status === 401 || response.status === 403) throw new AppError(`${TOKEN_REFUSED} (HTTP ${response.status}: ${detail.slice(0, 500)})`);
    if (response.status >= 400 && response.status < 500 && response.status !== 429) {
      throw new AppError(`the proxy refused the declarations (HTTP ${response.status}: ${detail.slice(0, 500)})`);
    }
    if (!response.ok) throw new Unreachable(`cannot register: HTTP ${response.status}`);
    const created = object(JSON.parse(detail));
    return { session_id: text(created["mcpSessionId"]), session_token: text(created["session_token"]), mcp_token: text(created["mcp_token"]), name: text(created["name"]) };
  }

  attach(sessionId: string, token: string, dispatch: (message: ProxyMessage__Output) => void): Attached {
    const socket = new WebSocket(`${this.#wsBase}/v1/chat/sessions/${encodeURIComponent(sessionId)}/bridge`, {
      headers: token ? { authorization: `Bearer ${token}` } : {}, perMessageDeflate: false,
    });
    const ended = new Promise<BridgeEnd>((resolve) => {
      let done = false;
      const end = (value: BridgeEnd): void => {
        if (!done) {
          done = true;
          resolve(value);
        }
      };
      socket.on("unexpected-response", (_request, response) => {
        const status = response.statusCode ?? 0;
        if (status === 404) end({ kind: "gone" });
        else if (status === 401 || status === 403) end({ kind: "fatal", error: new AppError(`${TOKEN_REFUSED} (HTTP ${status})`) });
        else end({ kind: "lost", why: `HTTP ${status}` });
        socket.terminate();
      });
      // The upgrade is the answer to the session being named.
      socket.on("open", () => dispatch({ ...EMPTY, kind: "attached", attached: { session_id: sessionId } }));
      socket.on("message", (data, isBinary) => {
        if (isBinary) return;
        let frame: unknown;
        try {
          frame = JSON.parse(data.toString());
        } catch {
          return;
        }
        const message = proxyMessage(object(frame));
        if (message !== undefined) dispatch(message);
      });
      socket.on("error", (error) => end({ kind: "lost", why: error.message }));
      socket.on("close", (code) => {
        if (code === GONE) end({ kind: "gone" });
        else if (code === BAD_TOKEN) end({ kind: "fatal", error: new AppError(`${TOKEN_REFUSED} (close code ${code})`) });
        else if (code === REPLACED) end({ kind: "fatal", error: new AppError(`${TAKEN_OVER} (close code ${code})`) });
        else end({ kind: "lost", why: `the bridge closed (code ${code})` });
      });
    });
    return {
      write: (message) => {
        const frame = appFrame(message);
        if (frame !== undefined && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(frame));
      },
      cancel: () => socket.close(1000),
      ended,
    };
  }

  async delete(sessionId: string, token: string): Promise<void> {
    const response = await fetch(`${this.#base}/v1/chat/sessions/${encodeURIComponent(sessionId)}`, {
      method: "DELETE", signal: AbortSignal.timeout(5_000), headers: token ? { authorization: `Bearer ${token}` } : {},
    });
    await response.body?.cancel();
    if (!response.ok && response.status !== 404) throw new Error(`DELETE answered HTTP ${response.status}`);
  }

  close(): void {}
}

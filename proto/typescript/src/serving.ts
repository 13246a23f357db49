/**
 * Holding a session's bridge: create the session, attach, answer what the
 * proxy sends, and after any loss attach again with a growing, jittered
 * delay; when the proxy no longer knows the session (it restarted, the
 * session expired) create a new one and report it. Calls run concurrently,
 * each with its own AbortController, so a slow handler never holds up the
 * stream and a cancel reaches exactly the call it names.
 */
import type { App } from "./app.js";
import { describe } from "./app.js";
import { type Caller, type ClientInfo, Context, type Link } from "./context.js";
import {
  AppError, AskError, INTERNAL_ERROR, INVALID_PARAMS, McpError, RESOURCE_NOT_FOUND,
  REVISION_WITH_INVALID_PARAMS_FOR_MISSING_RESOURCE, UpdateError,
} from "./errors.js";
import { type Attached, type BridgeEnd, GrpcTransport, type Transport } from "./transport.js";
import { WebSocketTransport } from "./websocket.js";
import type { AppMessage } from "./generated/openclaw/proxy/v1/AppMessage.js";
import type { CallerIdentity__Output } from "./generated/openclaw/proxy/v1/CallerIdentity.js";
import type { CallerInfo__Output } from "./generated/openclaw/proxy/v1/CallerInfo.js";
import type { ClientResponse__Output } from "./generated/openclaw/proxy/v1/ClientResponse.js";
import type { ProxyMessage__Output } from "./generated/openclaw/proxy/v1/ProxyMessage.js";

/** A registered session: give `mcpUrl` and `mcpToken` to the MCP client (OpenClaw). `sessionToken` is the app side's own credential. */
export interface SessionInfo {
  readonly sessionId: string;
  readonly mcpUrl: string;
  readonly mcpToken: string;
  readonly sessionToken: string;
}

/** Exponential delays with jitter: from `initial` doubling up to `ceiling`, each drawn from half to one and a half times the step. */
export class Backoff {
  readonly #initial: number;
  readonly #ceiling: number;
  #step: number;

  constructor(initialMs: number, ceilingMs: number) {
    this.#initial = initialMs;
    this.#ceiling = ceilingMs;
    this.#step = initialMs;
  }

  reset(): void {
    this.#step = this.#initial;
  }

  next(random: () => number = Math.random): number {
    const delay = Math.min(this.#step, this.#ceiling) * (0.5 + random());
    this.#step = Math.min(this.#step * 2, this.#ceiling);
    return delay;
  }
}

/** One attached stream: the calls it delivered and the questions its calls asked the MCP client. */
class Bridge implements Link {
  readonly calls = new Map<string, AbortController>();
  readonly asks = new Map<string, { resolve: (response: ClientResponse__Output) => void; reject: (error: Error) => void }>();
  #ids = 0;
  #open = true;
  readonly #stream: Attached;

  constructor(stream: Attached) {
    this.#stream = stream;
  }

  send(message: AppMessage): void {
    if (this.#open) this.#stream.write(message);
  }

  async ask(requestId: string, method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (!this.#open) throw new AskError("the bridge was lost before the MCP client could be asked");
    const id = String(++this.#ids);
    const key = `${requestId}\n${id}`;
    const response = await new Promise<ClientResponse__Output>((resolve, reject) => {
      this.asks.set(key, { resolve, reject });
      this.send({ client_request: { request_id: requestId, id, method, params_json: JSON.stringify(params) } });
    }).finally(() => this.asks.delete(key));
    if (response.outcome === "error") {
      throw new AskError(`the MCP client could not answer ${method}: ${response.error?.message ?? "no reason given"}`, response.error?.code);
    }
    const result: unknown = JSON.parse(response.result_json || "{}");
    if (typeof result !== "object" || result === null || Array.isArray(result)) {
      throw new AskError(`the MCP client answered ${method} with something other than an object`);
    }
    return result as Record<string, unknown>;
  }

  answer(response: ClientResponse__Output): void {
    this.asks.get(`${response.request_id}\n${response.id}`)?.resolve(response);
  }

  /** The stream is gone: the proxy has failed its calls already. */
  close(reason: string): void {
    this.#open = false;
    for (const ask of this.asks.values()) ask.reject(new AskError(`the MCP client's answer cannot arrive: ${reason}`));
    for (const call of this.calls.values()) call.abort(reason);
  }
}

function client(info: CallerInfo__Output | null): ClientInfo {
  return { name: info?.name ?? "", version: info?.version ?? "", protocolVersion: info?.protocol_version ?? "" };
}

function caller(identity: CallerIdentity__Output | null): Caller {
  return {
    kind: identity?.kind || "none", issuer: identity?.issuer ?? "", subject: identity?.subject ?? "",
    clientId: identity?.client_id ?? "", scopes: [...(identity?.scopes ?? [])],
  };
}

function jsonObject(text: string): Record<string, unknown> {
  const value: unknown = text ? JSON.parse(text) : {};
  return typeof value === "object" && value !== null && !Array.isArray(value) ? value as Record<string, unknown> : {};
}

/**
 * A session being served: `session` is the current one, `update()` sends
 * changed declarations, `resourceUpdated()` tells subscribers a resource
 * changed, `closed` settles when serving stopped.
 */
export class Serving {
  readonly #app: App;
  readonly #transport: Transport;
  readonly #backoff: Backoff;
  #session: SessionInfo | undefined;
  #bridge: Bridge | undefined;
  #stream: Attached | undefined;
  #changed = false;
  #stopped = false;
  #closing: Promise<void> = Promise.resolve();
  #wake: (() => void) | undefined;
  #updated: { resolve: () => void; reject: (error: Error) => void } | undefined;
  #firstAttached!: { resolve: () => void; reject: (error: Error) => void };
  #settleClosed!: { resolve: () => void; reject: (error: Error) => void };
  /** Settles when serving stopped: resolves after `close()`, rejects with the AppError that stopped it. */
  readonly closed: Promise<void>;
  readonly #running: Promise<void>;
  // Calls run up to maxConcurrentCalls at once, as many more wait, and
  // beyond that are answered "busy" at once.
  readonly #limit: number;
  #admitted = 0;
  #busySlots = 0;
  readonly #waiting: Array<() => void> = [];

  private constructor(app: App, first: { resolve: () => void; reject: (error: Error) => void }) {
    this.#app = app;
    this.#firstAttached = first;
    this.#transport = app.options.bridge === "websocket"
      ? new WebSocketTransport(app.proxyUrl) : new GrpcTransport(app.proxyUrl);
    this.#limit = Math.max(1, app.options.maxConcurrentCalls ?? 32);
    this.#backoff = new Backoff(app.options.initialReconnectDelayMs ?? 250, app.options.maxReconnectDelayMs ?? 30_000);
    this.closed = new Promise<void>((resolve, reject) => { this.#settleClosed = { resolve, reject }; });
    this.closed.catch(() => undefined); // awaited by whoever wants it
    this.#running = this.#run();
  }

  /** @internal Starts serving `app`; resolves once the bridge is attached. */
  static async start(app: App, signal?: AbortSignal): Promise<Serving> {
    let first!: { resolve: () => void; reject: (error: Error) => void };
    const attached = new Promise<void>((resolve, reject) => { first = { resolve, reject }; });
    const serving = new Serving(app, first);
    const stop = (): void => { void serving.close(); };
    signal?.addEventListener("abort", stop, { once: true });
    if (signal?.aborted) stop();
    try {
      await attached;
    } catch (error) {
      await serving.close();
      throw error;
    } finally {
      signal?.removeEventListener("abort", stop);
    }
    return serving;
  }

  /** The session being served (a new one after the proxy forgot the old). */
  get session(): SessionInfo {
    if (this.#session === undefined) throw new AppError("no session: the app is registering one");
    return this.#session;
  }

  /** Tells the clients subscribed to `uri` that it changed. */
  resourceUpdated(uri: string): void {
    this.#bridge?.send({ resource_updated: { uri } });
  }

  /**
   * Sends the app's current tools, resources, templates and prompts; the
   * proxy replaces the session's lists. While the bridge is down they go at
   * the next attach. Rejects with UpdateError when the proxy refuses them.
   */
  async update(): Promise<void> {
    this.#changed = true;
    const bridge = this.#bridge;
    if (bridge === undefined) return;
    const acknowledged = new Promise<void>((resolve, reject) => { this.#updated = { resolve, reject }; });
    bridge.send(this.#updateMessage());
    const timeout = this.#app.options.requestTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.#app.log("warn", "the proxy did not acknowledge the update; it is sent again at the next attach");
        resolve();
      }, timeout);
    });
    try {
      await Promise.race([acknowledged, late]);
      this.#changed = false;
    } finally {
      clearTimeout(timer);
      this.#updated = undefined;
    }
  }

  /** Stops serving: aborts running calls and deletes the session. */
  async close(): Promise<void> {
    if (this.#stopped) return this.#closing;
    this.#stopped = true;
    this.#closing = this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#wake?.();
    this.#stream?.cancel();
    await this.#running;
    const session = this.#session;
    if (session !== undefined) {
      try {
        await this.#transport.delete(session.sessionId, session.sessionToken || (this.#app.options.appToken ?? ""));
      } catch (error) { // the proxy expires it in time
        this.#app.log("warn", `could not delete session ${session.sessionId}: ${describe(error)}`);
      }
    }
    this.#transport.close();
  }

  // --- the loop -------------------------------------------------------------

  #updateMessage(): AppMessage {
    const d = this.#app.declarations();
    return { update_tools: {
      tools: d.tools, resources: { resources: d.resources },
      resource_templates: { resource_templates: d.resource_templates }, prompts: { prompts: d.prompts },
    } };
  }

  async #run(): Promise<void> {
    let failure: AppError | undefined;
    try {
      while (!this.#stopped) {
        try {
          if (this.#session === undefined) {
            this.#session = await this.#create();
            await this.#app.reportSession(this.#session);
          }
          if (this.#stopped) break; // closed while registering
          const end = await this.#attach(this.#session);
          if (this.#stopped) break;
          this.#endedWith(end);
        } catch (error) {
          if (error instanceof AppError) throw error;
          this.#app.log("warn", `could not reach the proxy (${describe(error)}); retrying`);
        }
        await this.#sleep(this.#backoff.next());
      }
    } catch (error) {
      failure = error instanceof AppError ? error : new AppError(`serving failed: ${describe(error)}`);
    }
    if (failure !== undefined) {
      this.#firstAttached.reject(failure);
      this.#settleClosed.reject(failure);
    } else {
      this.#firstAttached.reject(new AppError("serving was closed before the bridge attached"));
      this.#settleClosed.resolve();
    }
  }

  /** What the end of a bridge means: attach again, register anew, or stop. */
  #endedWith(end: BridgeEnd): void {
    if (end.kind === "gone") {
      this.#app.log("info", "the proxy no longer knows the session; registering a new one");
      this.#session = undefined;
    } else if (end.kind === "fatal") {
      throw end.error;
    } else {
      this.#app.log("warn", `bridge lost (${end.why}); reconnecting`);
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake = () => { clearTimeout(timer); resolve(); };
    });
  }

  async #create(): Promise<SessionInfo> {
    const options = this.#app.options;
    const d = this.#app.declarations();
    const request = {
      metadata: {
        device_id: options.deviceId ?? "typescript-app", device_name: options.deviceName ?? "",
        app_version: options.appVersion ?? "0", chat_id: options.chatId ?? "",
      },
      ...d, ...(options.owner ? { owner: options.owner } : {}),
    };
    const created = await this.#transport.create(request, options.appToken ?? "", options.requestTimeoutMs ?? 30_000);
    this.#changed = false;
    return {
      sessionId: created.session_id, mcpUrl: `${this.#app.proxyUrl}/v1/mcp/${created.session_id}`,
      mcpToken: created.mcp_token, sessionToken: created.session_token,
    };
  }

  /** Serves one bridge until it ends; resolves with how it ended. */
  async #attach(session: SessionInfo): Promise<BridgeEnd> {
    // The session's own token opens its bridge.
    let bridge: Bridge | undefined;
    const stream = this.#transport.attach(session.sessionId, session.sessionToken || (this.#app.options.appToken ?? ""),
      (message) => { if (bridge !== undefined) this.#dispatch(bridge, message); });
    bridge = new Bridge(stream);
    this.#stream = stream;
    const end = await stream.ended;
    if (this.#bridge === bridge) this.#bridge = undefined;
    bridge.close(this.#stopped ? "the app is shutting down" : "the bridge was lost");
    this.#updated?.reject(new UpdateError("the bridge was lost before the proxy acknowledged the update; it is sent again at the next attach"));
    return end;
  }

  #dispatch(bridge: Bridge, message: ProxyMessage__Output): void {
    switch (message.kind) {
      case "attached":
        this.#bridge = bridge;
        this.#backoff.reset();
        if (this.#changed) bridge.send(this.#updateMessage()); // a change made while the bridge was down
        this.#firstAttached.resolve();
        break;
      case "ping":
        bridge.send({ pong: { nonce: message.ping?.nonce ?? "0" } });
        break;
      case "invoke": {
        const invoke = message.invoke!;
        const ctx = this.#context(bridge, invoke.request_id, "tools/call", invoke.client, invoke.caller, jsonObject(invoke.meta_json), invoke.trace_parent, invoke.task_id);
        this.#spawn(bridge, ctx, (busy) => ({ result: { request_id: ctx.requestId, ok: false, error: busy } }), async () => {
          let args: unknown;
          try {
            args = invoke.arguments_json ? JSON.parse(invoke.arguments_json) : {};
          } catch {
            return { result: { request_id: ctx.requestId, ok: false, error: "the arguments are not JSON" } };
          }
          const outcome = await this.#app.callTool(invoke.tool_name, args, ctx);
          return { result: { request_id: ctx.requestId, ...outcome } };
        });
        break;
      }
      case "mcp_request": {
        const request = message.mcp_request!;
        const params = jsonObject(request.params_json);
        const meta = params["_meta"];
        const ctx = this.#context(bridge, request.request_id, request.method, request.client, request.caller,
          typeof meta === "object" && meta !== null ? meta as Record<string, unknown> : {}, request.trace_parent);
        this.#spawn(bridge, ctx, (busy) => ({ mcp_result: { request_id: ctx.requestId, error: { code: INTERNAL_ERROR, message: busy, data_json: "" } } }), async () => {
          try {
            const result = await this.#app.answerMcp(request.method, params, ctx);
            return { mcp_result: { request_id: ctx.requestId, result_json: JSON.stringify(result) } };
          } catch (error) {
            let code = error instanceof McpError ? error.code : INTERNAL_ERROR;
            if (code === RESOURCE_NOT_FOUND && ctx.client.protocolVersion >= REVISION_WITH_INVALID_PARAMS_FOR_MISSING_RESOURCE) {
              code = INVALID_PARAMS;
            }
            const data = error instanceof McpError && error.data !== undefined ? JSON.stringify(error.data) : "";
            const text = error instanceof McpError ? error.message : describe(error);
            return { mcp_result: { request_id: ctx.requestId, error: { code, message: text, data_json: data } } };
          }
        });
        break;
      }
      case "cancel":
        bridge.calls.get(message.cancel?.request_id ?? "")?.abort(message.cancel?.reason || "the proxy cancelled the call");
        break;
      case "client_response":
        if (message.client_response) bridge.answer(message.client_response);
        break;
      case "tools_updated":
        this.#updated?.resolve();
        break;
      case "error": {
        const notice = message.error;
        if (this.#updated !== undefined && !notice?.request_id) this.#updated.reject(new UpdateError(notice?.message ?? "the proxy refused the update"));
        else this.#app.log("warn", `the proxy could not use a message: ${notice?.message ?? ""}`);
        break;
      }
      default:
        break;
    }
  }

  #context(bridge: Bridge, requestId: string, method: string, info: CallerInfo__Output | null,
    identity: CallerIdentity__Output | null, meta: Record<string, unknown>, traceParent: string, taskId = ""): Context {
    const controller = new AbortController();
    bridge.calls.set(requestId, controller);
    return new Context({
      requestId, method, client: client(info), caller: caller(identity), meta, traceParent,
      signal: controller.signal, link: bridge, taskId,
    });
  }

  /**
   * Runs one call on its own once a slot is free; its answer is sent unless
   * the call was cancelled meanwhile (the proxy has answered it then). Past
   * the running and waiting calls the app holds, it is answered busy at once.
   */
  #spawn(bridge: Bridge, ctx: Context, busy: (message: string) => AppMessage, work: () => Promise<AppMessage>): void {
    if (this.#admitted >= 2 * this.#limit) {
      bridge.calls.delete(ctx.requestId);
      bridge.send(busy(`The app is busy: it is already running ${this.#limit} calls and has as many waiting. Try again shortly.`));
      return;
    }
    this.#admitted++;
    const run = async (): Promise<AppMessage> => {
      if (this.#busySlots >= this.#limit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
      this.#busySlots++;
      try {
        if (ctx.signal.aborted) return {}; // cancelled while it waited: never sent
        return await work();
      } finally {
        this.#busySlots--;
        this.#waiting.shift()?.();
      }
    };
    run().then((answer) => {
      if (!ctx.signal.aborted) bridge.send(answer);
    }, (error: unknown) => {
      this.#app.log("warn", `a call failed inside the package: ${describe(error)}`);
    }).finally(() => {
      this.#admitted--;
      bridge.calls.delete(ctx.requestId);
    });
  }
}

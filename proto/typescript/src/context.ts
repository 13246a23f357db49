/**
 * What a handler knows about the call it serves, and what it can do during
 * it: report progress, log to the caller, ask the MCP client (the user, its
 * model, its roots), and notice through `ctx.signal` that the call was
 * cancelled.
 */
import type { AppMessage } from "./generated/openclaw/proxy/v1/AppMessage.js";
import { AskError } from "./errors.js";
import { type Infer, type Schema, isStandardSchema, jsonSchemaOf } from "./schema.js";

export type LogLevel = "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency";

/** The MCP client behind a call, as far as the proxy knows. */
export interface ClientInfo {
  readonly name: string;
  readonly version: string;
  readonly protocolVersion: string;
}

/**
 * Which credential opened the MCP request, as the proxy verified it: `kind`
 * is "session_token", "global_token", "oauth" or "none"; the other fields
 * are set for "oauth".
 */
export interface Caller {
  readonly kind: string;
  readonly issuer: string;
  readonly subject: string;
  readonly clientId: string;
  readonly scopes: readonly string[];
}

/** The user's answer to a form: `action` is "accept", "decline" or "cancel"; `content` is set when accepted. */
export interface ElicitResult<T> {
  readonly action: "accept" | "decline" | "cancel";
  readonly content: T | undefined;
}

/** What the client's model wrote (`sampling/createMessage`'s result). */
export interface SampleResult {
  readonly text: string;
  readonly model: string;
  readonly raw: Record<string, unknown>;
}

export interface Root {
  readonly uri: string;
  readonly name?: string;
}

/** The bridge a call arrived on. */
export interface Link {
  send(message: AppMessage): void;
  ask(requestId: string, method: string, params: Record<string, unknown>): Promise<Record<string, unknown>>;
}

/** One call: a tool call, or an MCP request such as `resources/read`. Every handler gets it as its last argument. */
export class Context {
  readonly requestId: string;
  /** `tools/call`, `resources/read`, `prompts/get`, `completion/complete`. */
  readonly method: string;
  readonly client: ClientInfo;
  readonly caller: Caller;
  /** The request's `_meta`. */
  readonly meta: Record<string, unknown>;
  /** The W3C traceparent of the request, when it had one. */
  readonly traceParent: string;
  /**
   * Aborted when the proxy cancels the call (its client cancelled it, it timed
   * out) or the bridge is lost; `signal.reason` says why. Pass it to `fetch`
   * and other APIs that take one, or check `signal.aborted`.
   */
  readonly signal: AbortSignal;
  /** The MCP task this call runs as, when the client made it one (the tool declared `taskSupport`); "" for a plain call. */
  readonly taskId: string;
  readonly #link: Link;

  constructor(fields: {
    requestId: string; method: string; client: ClientInfo; caller: Caller; meta: Record<string, unknown>;
    traceParent: string; signal: AbortSignal; link: Link; taskId?: string;
  }) {
    this.requestId = fields.requestId;
    this.method = fields.method;
    this.client = fields.client;
    this.caller = fields.caller;
    this.meta = fields.meta;
    this.traceParent = fields.traceParent;
    this.signal = fields.signal;
    this.taskId = fields.taskId ?? "";
    this.#link = fields.link;
  }

  /** Reports progress; the MCP client gets it when it asked for progress. */
  progress(progress: number, options: { total?: number; message?: string } = {}): void {
    this.#link.send({ progress: {
      request_id: this.requestId, progress, message: options.message ?? "",
      ...(options.total === undefined ? {} : { total: options.total }),
    } });
  }

  /** Sends a log record to this call's MCP client (it gets it when it asked for that level). `data` is any JSON value. */
  log(level: LogLevel, data: unknown, logger = ""): void {
    this.#link.send({ log: { request_id: this.requestId, level, logger, data_json: JSON.stringify(data ?? null) } });
  }

  /**
   * Asks the user to fill in a form (`elicitation/create`, form mode).
   * `schema` is a zod object of flat fields (the answer is validated and
   * typed by it) or a JSON Schema object. Throws AskError when the client
   * cannot ask.
   */
  async elicit<S extends Schema>(message: string, schema: S): Promise<ElicitResult<Infer<S>>> {
    const requestedSchema = jsonSchemaOf(schema, "ctx.elicit");
    const answer = await this.#ask("elicitation/create", { mode: "form", message, requestedSchema });
    const action = answer["action"] === "accept" || answer["action"] === "decline" ? answer["action"] : "cancel";
    let content = answer["content"];
    if (action === "accept" && isStandardSchema(schema)) {
      const checked = await schema["~standard"].validate(content);
      if (checked.issues !== undefined) {
        throw new AskError(`the user's answer does not fit the form: ${checked.issues.map((i) => i.message).join("; ")}`);
      }
      content = checked.value;
    }
    return { action, content: action === "accept" ? (content as Infer<S>) : undefined };
  }

  /** Asks the user to visit `url` (`elicitation/create`, URL mode). */
  async elicitUrl(message: string, url: string, elicitationId: string): Promise<ElicitResult<undefined>> {
    const answer = await this.#ask("elicitation/create", { mode: "url", message, url, elicitationId });
    const action = answer["action"] === "accept" || answer["action"] === "decline" ? answer["action"] : "cancel";
    return { action, content: undefined };
  }

  /**
   * Asks the client's model (`sampling/createMessage`). `prompt` is one user
   * message, or MCP `SamplingMessage`s; other MCP params go in `params`
   * (`temperature`, `modelPreferences`, ...).
   */
  async sample(prompt: string | Array<Record<string, unknown>>, options: { maxTokens?: number; systemPrompt?: string; params?: Record<string, unknown> } = {}): Promise<SampleResult> {
    const messages = typeof prompt === "string" ? [{ role: "user", content: { type: "text", text: prompt } }] : prompt;
    const raw = await this.#ask("sampling/createMessage", {
      ...options.params, messages, maxTokens: options.maxTokens ?? 1000,
      ...(options.systemPrompt === undefined ? {} : { systemPrompt: options.systemPrompt }),
    });
    const content = raw["content"];
    const blocks: unknown[] = Array.isArray(content) ? content : [content];
    const text = blocks.map((b) => (typeof b === "object" && b !== null && (b as { type?: unknown }).type === "text"
      ? String((b as { text?: unknown }).text ?? "") : "")).join("");
    return { text, model: String(raw["model"] ?? ""), raw };
  }

  /** The client's roots (`roots/list`). */
  async roots(): Promise<Root[]> {
    const answer = await this.#ask("roots/list", {});
    const roots = Array.isArray(answer["roots"]) ? answer["roots"] : [];
    return roots.filter((r): r is { uri: string; name?: unknown } => typeof r === "object" && r !== null && typeof r.uri === "string")
      .map((r) => (typeof r.name === "string" ? { uri: r.uri, name: r.name } : { uri: r.uri }));
  }

  #ask(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.signal.aborted) return Promise.reject(new AskError(`the call has ended: ${String(this.signal.reason)}`));
    return this.#link.ask(this.requestId, method, params);
  }
}

/**
 * `App`: what an app declares (tools, resources, resource templates,
 * prompts, a completion handler) and how each request the bridge delivers is
 * routed to its handler. Holding the bridge is `serving.ts`.
 */
import { type PromptValue, type ResourceValue, promptResult, readResult, toolContentJson } from "./content.js";
import type { Context } from "./context.js";
import { McpError, METHOD_NOT_FOUND, ToolError } from "./errors.js";
import type { PromptDefinition } from "./generated/openclaw/proxy/v1/PromptDefinition.js";
import type { ResourceDefinition } from "./generated/openclaw/proxy/v1/ResourceDefinition.js";
import type { ResourceTemplateDefinition } from "./generated/openclaw/proxy/v1/ResourceTemplateDefinition.js";
import type { ToolDefinition } from "./generated/openclaw/proxy/v1/ToolDefinition.js";
import { type Infer, type Schema, jsonSchemaOf, validate } from "./schema.js";
import { Serving, type SessionInfo } from "./serving.js";
import { UriTemplate } from "./uri-template.js";

/** The most values one completion answer carries, as MCP allows. */
export const MAX_COMPLETION_VALUES = 100;

const NAME = /^[A-Za-z0-9_.-]{1,128}$/;

function checkedName(name: string, what: string): string {
  if (!NAME.test(name)) throw new TypeError(`${what} name ${JSON.stringify(name)} is not valid: use 1 to 128 of A-Z a-z 0-9 _ - .`);
  return name;
}

export interface AppOptions {
  /** The proxy's app token (OPENCLAW_PROXY_APP_TOKEN); empty when the proxy requires none. */
  appToken?: string | undefined;
  deviceId?: string;
  deviceName?: string;
  appVersion?: string;
  chatId?: string;
  /** The user the session belongs to, when the proxy checks OAuth callers against it. */
  owner?: { subject: string; issuer: string };
  /** The first reconnection delay (jittered, doubling up to the ceiling); 250 ms by default. */
  initialReconnectDelayMs?: number;
  /** The ceiling of the reconnection delay; 30 s by default. */
  maxReconnectDelayMs?: number;
  /** How many calls run at once (32 by default); as many more wait, and past those a call is answered that the app is busy. */
  maxConcurrentCalls?: number;
  /** How long registering and updates may take; 30 s by default. */
  requestTimeoutMs?: number;
  /**
   * "grpc" (the default): gRPC registration and bridge. "websocket": REST
   * registration and the JSON WebSocket bridge over HTTP/1.1, for networks
   * and proxies in between that do not pass HTTP/2.
   */
  bridge?: "grpc" | "websocket";
  /** Where the package says what it does (a lost bridge, a new session); warnings go to stderr by default. */
  logger?: (level: "info" | "warn", message: string) => void;
}

export interface ToolOptions<S extends Schema | undefined> {
  /** What the tool does, shown to the agent. */
  description?: string;
  /** The arguments: a zod object (validated and typed before the handler runs) or a JSON Schema object. */
  input?: S;
  /** How long the proxy lets a call run before it cancels it. */
  timeoutSeconds?: number;
  /** Makes the proxy ask the user before every call (`true`, or the question to ask); declined calls never reach the app. */
  confirm?: boolean | string;
  /** MCP client capabilities a call needs (e.g. `["elicitation"]`); the proxy refuses calls from clients without them. */
  requiresClient?: string[];
  /**
   * Whether MCP clients may call the tool as a task they poll ("optional" or
   * "required"; "forbidden", the default, for plain calls only), for a slow
   * tool. The call runs as usual; `ctx.taskId` names its task.
   */
  taskSupport?: "forbidden" | "optional" | "required";
}

export type ToolHandler<S extends Schema | undefined> = (args: Infer<S>, ctx: Context) => unknown;

export interface ResourceOptions {
  name?: string;
  title?: string;
  description?: string;
  mimeType?: string;
}

export interface PromptArgumentOptions {
  title?: string;
  description?: string;
  required?: boolean;
}

export interface PromptOptions {
  title?: string;
  description?: string;
  arguments?: Record<string, PromptArgumentOptions>;
}

/**
 * What `completion/complete` asks: values for `argument` of the prompt
 * (`refType` "ref/prompt", `ref` its name) or of the resource template
 * (`refType` "ref/resource", `ref` its URI template), starting with `value`;
 * `arguments` holds the values already chosen for the others.
 */
export interface CompletionRequest {
  readonly refType: string;
  readonly ref: string;
  readonly argument: string;
  readonly value: string;
  readonly arguments: Record<string, string>;
}

interface Tool {
  definition: ToolDefinition;
  input: Schema | undefined;
  handler: (args: any, ctx: Context) => unknown;
}

interface Resource {
  definition: ResourceDefinition;
  handler: (uri: string, ctx: Context) => ResourceValue | Promise<ResourceValue>;
}

interface Template {
  definition: ResourceTemplateDefinition;
  template: UriTemplate;
  handler: (variables: Record<string, string>, ctx: Context, uri: string) => ResourceValue | Promise<ResourceValue>;
}

interface Prompt {
  definition: PromptDefinition;
  handler: (args: Record<string, string>, ctx: Context) => PromptValue | Promise<PromptValue>;
}

/** The outcome of one tool call, as the bridge sends it. */
export type ToolOutcome = { ok: true; content_json: string } | { ok: false; error: string };

/**
 * An app: its declarations and how to reach the proxy. Declare tools and the
 * rest, then `await app.run()` (serves until Ctrl-C or SIGTERM) or
 * `const serving = await app.serve()`.
 */
export class App {
  readonly proxyUrl: string;
  readonly options: Readonly<AppOptions>;
  readonly #tools = new Map<string, Tool>();
  readonly #resources = new Map<string, Resource>();
  readonly #templates = new Map<string, Template>();
  readonly #prompts = new Map<string, Prompt>();
  #completion: ((request: CompletionRequest, ctx: Context) => string[] | Promise<string[]>) | undefined;
  readonly #onSession: Array<(session: SessionInfo) => unknown> = [];

  /** `proxyUrl` is the proxy's base URL, `http://` or `https://`. */
  constructor(proxyUrl: string, options: AppOptions = {}) {
    let url: URL;
    try {
      url = new URL(proxyUrl);
    } catch {
      throw new TypeError(`proxyUrl ${JSON.stringify(proxyUrl)} is not a URL; give the proxy's base URL, like http://127.0.0.1:8000`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new TypeError(`proxyUrl must start with http:// or https:// (got ${JSON.stringify(proxyUrl)})`);
    }
    this.proxyUrl = proxyUrl.replace(/\/+$/, "");
    this.options = { ...options };
  }

  /** Declares a tool (or replaces the one with this name). */
  tool<S extends Schema | undefined = undefined>(name: string, options: ToolOptions<S>, handler: ToolHandler<S>): this {
    checkedName(name, "tool");
    const definition: ToolDefinition = {
      name, description: options.description ?? "",
      input_schema_json: JSON.stringify(jsonSchemaOf(options.input, `tool ${name}`)),
      timeout_seconds: options.timeoutSeconds ?? 0,
    };
    if (options.confirm) definition.confirm = { message: typeof options.confirm === "string" ? options.confirm : "" };
    if (options.requiresClient?.length) definition.requires = { client_capabilities: [...options.requiresClient] };
    const tasks = options.taskSupport ?? "forbidden";
    if (!["forbidden", "optional", "required"].includes(tasks)) {
      throw new TypeError(`tool ${name}: taskSupport ${JSON.stringify(tasks)} is not understood; use "forbidden", "optional" or "required"`);
    }
    if (tasks !== "forbidden") definition.execution = { task_support: tasks === "required" ? "TASK_SUPPORT_REQUIRED" : "TASK_SUPPORT_OPTIONAL" };
    this.#tools.set(name, { definition, input: options.input, handler: handler as Tool["handler"] });
    return this;
  }

  /** Removes a tool; `serving.update()` tells the proxy. */
  removeTool(name: string): boolean {
    return this.#tools.delete(name);
  }

  /** Declares a resource with a fixed URI; its handler returns text, bytes, or `{uri, text | blob}`s. */
  resource(uri: string, options: ResourceOptions, handler: Resource["handler"]): this {
    this.#resources.set(uri, { definition: {
      uri, name: options.name ?? uri, title: options.title ?? "", description: options.description ?? "", mime_type: options.mimeType ?? "",
    }, handler });
    return this;
  }

  /** Declares a resource template (`notes:///{name}`); its handler gets the variables. */
  resourceTemplate(uriTemplate: string, options: ResourceOptions, handler: Template["handler"]): this {
    this.#templates.set(uriTemplate, {
      definition: {
        uri_template: uriTemplate, name: options.name ?? uriTemplate, title: options.title ?? "",
        description: options.description ?? "", mime_type: options.mimeType ?? "",
      },
      template: new UriTemplate(uriTemplate), handler,
    });
    return this;
  }

  removeResource(uri: string): boolean {
    return this.#resources.delete(uri) || this.#templates.delete(uri);
  }

  /** Declares a prompt; its handler gets the arguments and returns text or messages. */
  prompt(name: string, options: PromptOptions, handler: Prompt["handler"]): this {
    checkedName(name, "prompt");
    const args = Object.entries(options.arguments ?? {}).map(([argument, o]) => ({
      name: argument, title: o.title ?? "", description: o.description ?? "", required: o.required ?? false,
    }));
    this.#prompts.set(name, { definition: {
      name, title: options.title ?? "", description: options.description ?? "", arguments: args,
    }, handler });
    return this;
  }

  removePrompt(name: string): boolean {
    return this.#prompts.delete(name);
  }

  /** Answers `completion/complete` for prompt arguments and template variables. */
  completion(handler: (request: CompletionRequest, ctx: Context) => string[] | Promise<string[]>): this {
    this.#completion = handler;
    return this;
  }

  /** Called with each session the app registers (a new one after the proxy forgot the old). */
  onSession(handler: (session: SessionInfo) => unknown): this {
    this.#onSession.push(handler);
    return this;
  }

  /**
   * Registers the session and keeps its bridge attached; resolves once the
   * bridge is attached (retrying while the proxy cannot be reached). Rejects
   * with AppError when the proxy refuses the app (bad token, bad
   * declaration), or when `signal` aborts first.
   */
  serve(options: { signal?: AbortSignal } = {}): Promise<Serving> {
    return Serving.start(this, options.signal);
  }

  /** Serves until Ctrl-C or SIGTERM (then deletes the session) or until serving fails with an AppError. */
  async run(): Promise<void> {
    const serving = await this.serve();
    const stop = new Promise<void>((resolve) => {
      process.once("SIGINT", resolve);
      process.once("SIGTERM", resolve);
    });
    try {
      await Promise.race([stop, serving.closed]);
    } finally {
      await serving.close();
    }
  }

  // --- what serving uses --------------------------------------------------

  /** @internal */
  declarations(): { tools: ToolDefinition[]; resources: ResourceDefinition[]; resource_templates: ResourceTemplateDefinition[]; prompts: PromptDefinition[] } {
    return {
      tools: [...this.#tools.values()].map((t) => t.definition),
      resources: [...this.#resources.values()].map((r) => r.definition),
      resource_templates: [...this.#templates.values()].map((t) => t.definition),
      prompts: [...this.#prompts.values()].map((p) => p.definition),
    };
  }

  /** @internal */
  async reportSession(session: SessionInfo): Promise<void> {
    for (const handler of this.#onSession) {
      try {
        await handler(session);
      } catch (error) { // the session is registered all the same
        this.log("warn", `an onSession handler failed: ${describe(error)}`);
      }
    }
  }

  /** @internal */
  log(level: "info" | "warn", message: string): void {
    if (this.options.logger) this.options.logger(level, message);
    else if (level === "warn") console.error(`openclaw-proxy-app: ${message}`);
  }

  /** Runs one tool call: its arguments checked, its handler's value or failure as the bridge sends it. */
  async callTool(name: string, args: unknown, ctx: Context): Promise<ToolOutcome> {
    const tool = this.#tools.get(name);
    if (tool === undefined) return { ok: false, error: `this app has no tool named ${JSON.stringify(name)}` };
    const checked = await validate(tool.input, args);
    if (!checked.ok) return { ok: false, error: checked.error };
    try {
      return { ok: true, content_json: toolContentJson(await tool.handler(checked.value, ctx)) };
    } catch (error) {
      if (error instanceof ToolError) return { ok: false, error: error.message };
      return { ok: false, error: describe(error) };
    }
  }

  /** The result of one MCP request; throws McpError when it fails. */
  async answerMcp(method: string, params: Record<string, unknown>, ctx: Context): Promise<unknown> {
    if (method === "resources/read") return this.#read(String(params["uri"] ?? ""), ctx);
    if (method === "prompts/get") {
      const name = String(params["name"] ?? "");
      const prompt = this.#prompts.get(name);
      if (prompt === undefined) throw McpError.invalidParams(`this app has no prompt named ${JSON.stringify(name)}`);
      const given = params["arguments"];
      const args: Record<string, string> = {};
      if (typeof given === "object" && given !== null) {
        for (const [key, value] of Object.entries(given)) args[key] = String(value);
      }
      const missing = (prompt.definition.arguments ?? []).filter((a) => a.required && args[a.name ?? ""] === undefined);
      if (missing.length > 0) {
        throw McpError.invalidParams(`prompt ${name} needs the argument ${missing.map((a) => a.name).join(", ")}`);
      }
      return promptResult(await prompt.handler(args, ctx), undefined);
    }
    if (method === "completion/complete" && this.#completion !== undefined) return this.#complete(params, ctx);
    throw new McpError(METHOD_NOT_FOUND, `this app does not serve ${method}`);
  }

  async #read(uri: string, ctx: Context): Promise<unknown> {
    const resource = this.#resources.get(uri);
    if (resource !== undefined) return readResult(uri, await resource.handler(uri, ctx), resource.definition.mime_type || undefined);
    for (const template of this.#templates.values()) {
      const variables = template.template.match(uri);
      if (variables !== undefined) {
        return readResult(uri, await template.handler(variables, ctx, uri), template.definition.mime_type || undefined);
      }
    }
    throw McpError.resourceNotFound(uri);
  }

  async #complete(params: Record<string, unknown>, ctx: Context): Promise<unknown> {
    const object = (value: unknown): Record<string, unknown> =>
      (typeof value === "object" && value !== null ? value as Record<string, unknown> : {});
    const ref = object(params["ref"]);
    const argument = object(params["argument"]);
    const chosen = object(object(params["context"])["arguments"]);
    const request: CompletionRequest = {
      refType: String(ref["type"] ?? ""), ref: String(ref["name"] ?? ref["uri"] ?? ""),
      argument: String(argument["name"] ?? ""), value: String(argument["value"] ?? ""),
      arguments: Object.fromEntries(Object.entries(chosen).map(([k, v]) => [k, String(v)])),
    };
    const values = (await this.#completion!(request, ctx)).map(String);
    const completion: Record<string, unknown> = { values: values.slice(0, MAX_COMPLETION_VALUES) };
    if (values.length > MAX_COMPLETION_VALUES) Object.assign(completion, { total: values.length, hasMore: true });
    return { completion };
  }
}

/** An error as one sentence: its class and message. */
export function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

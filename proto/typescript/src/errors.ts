/**
 * The errors an app sees: why serving stopped ({@link AppError}), a tool's
 * own failure told to the agent ({@link ToolError}), a JSON-RPC error for an
 * MCP request ({@link McpError}), a question the MCP client could not answer
 * ({@link AskError}) and declarations the proxy refused ({@link UpdateError}).
 */

/** JSON-RPC codes MCP uses. */
export const INVALID_PARAMS = -32602;
export const METHOD_NOT_FOUND = -32601;
export const INTERNAL_ERROR = -32603;
export const RESOURCE_NOT_FOUND = -32002;
/** The first MCP revision that answers an unknown resource with -32602 (SEP-2164). */
export const REVISION_WITH_INVALID_PARAMS_FOR_MISSING_RESOURCE = "2026-07-28";

/**
 * Serving stopped and retrying cannot help: the proxy refused the app token
 * or a declaration, or another bridge took the session over. The message says
 * which and what to change; `grpcCode` is the status the proxy answered with.
 */
export class AppError extends Error {
  override name = "AppError";
  readonly grpcCode: number | undefined;
  constructor(message: string, grpcCode?: number) {
    super(message);
    this.grpcCode = grpcCode;
  }
}

/** Thrown by a tool handler to fail the call with this message: the agent gets an error result (`isError`) that says it. */
export class ToolError extends Error {
  override name = "ToolError";
}

/**
 * `ctx.elicit`, `ctx.sample` or `ctx.roots` got no answer: the MCP client
 * lacks the capability, went away or was too slow, or the bridge was lost.
 * `code` is the JSON-RPC code, when there is one.
 */
export class AskError extends Error {
  override name = "AskError";
  readonly code: number | undefined;
  constructor(message: string, code?: number) {
    super(message);
    this.code = code;
  }
}

/** A JSON-RPC error for the MCP client, thrown by a resource, prompt or completion handler. */
export class McpError extends Error {
  override name = "McpError";
  readonly code: number;
  readonly data: unknown;
  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.code = code;
    this.data = data;
  }

  static invalidParams(message: string): McpError {
    return new McpError(INVALID_PARAMS, message);
  }

  /** No resource or template serves `uri`: -32002 with `data.uri` (a client at 2026-07-28 or later gets -32602, the code that revision names). */
  static resourceNotFound(uri: string): McpError {
    return new McpError(RESOURCE_NOT_FOUND, `Resource not found: ${uri}`, { uri });
  }
}

/** The proxy refused the declarations `serving.update()` sent; the message names the field. The session keeps its old lists. */
export class UpdateError extends Error {
  override name = "UpdateError";
}

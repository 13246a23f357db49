/**
 * The app side of openclaw-proxy: expose TypeScript functions to an AI agent.
 *
 * Declare tools (and resources, prompts, completions) on an {@link App}, then
 * `await app.run()`: the package registers the session with the proxy, keeps
 * its bridge (gRPC, or WebSocket without HTTP/2) attached through network loss and proxy restarts, runs calls
 * concurrently with progress, logs and cancellation, and deletes the session
 * on exit.
 */
export { App, type AppOptions, type CompletionRequest, type PromptArgumentOptions, type PromptOptions,
  type ResourceOptions, type ToolHandler, type ToolOptions, type ToolOutcome } from "./app.js";
export { audio, type AudioContent, type Content, embedded, type EmbeddedResource, image, type ImageContent, message,
  type PromptMessage, type PromptValue, type ResourceContents, resourceLink, type ResourceLinkContent,
  type ResourceValue, text, type TextContent, toolContentJson } from "./content.js";
export { type Caller, type ClientInfo, Context, type ElicitResult, type LogLevel, type Root, type SampleResult } from "./context.js";
export { AppError, AskError, McpError, ToolError, UpdateError } from "./errors.js";
export { type Infer, type JsonSchema, type Schema, type StandardSchemaV1 } from "./schema.js";
export { Backoff, Serving, type SessionInfo } from "./serving.js";
export { UriTemplate } from "./uri-template.js";
export { version } from "./version.js";

/**
 * MCP content, and how a handler's return value becomes an MCP result.
 *
 * A tool may return a string (one text block), an object (structured
 * content, with its JSON as text), content blocks made with {@link text},
 * {@link image}, {@link audio}, {@link resourceLink} or {@link embedded} (one,
 * or an array of them, passed as they are), any other JSON value (wrapped as
 * `{"result": value}`) or nothing.
 */

const CONTENT = Symbol("openclaw-proxy-app content block");

export type TextContent = { type: "text"; text: string };
export type ImageContent = { type: "image"; data: string; mimeType: string };
export type AudioContent = { type: "audio"; data: string; mimeType: string };
export type ResourceLinkContent = { type: "resource_link"; uri: string; name: string; description?: string; mimeType?: string };
export type ResourceContents = { uri: string; mimeType?: string; text?: string; blob?: string };
export type EmbeddedResource = { type: "resource"; resource: ResourceContents };
/** One MCP content block. */
export type Content = TextContent | ImageContent | AudioContent | ResourceLinkContent | EmbeddedResource;

/** A prompt message: who says it, and what. */
export type PromptMessage = { role: "user" | "assistant"; content: Content };

function block<T extends Content>(value: T): T {
  Object.defineProperty(value, CONTENT, { value: true, enumerable: false });
  return value;
}

function base64(data: Uint8Array | string): string {
  return typeof data === "string" ? data : Buffer.from(data).toString("base64");
}

export const text = (value: string): TextContent => block({ type: "text", text: value });
/** An image; `data` is its bytes (or base64 text). */
export const image = (data: Uint8Array | string, mimeType: string): ImageContent =>
  block({ type: "image", data: base64(data), mimeType });
export const audio = (data: Uint8Array | string, mimeType: string): AudioContent =>
  block({ type: "audio", data: base64(data), mimeType });
export const resourceLink = (uri: string, name: string, extra: { description?: string; mimeType?: string } = {}): ResourceLinkContent =>
  block({ type: "resource_link", uri, name, ...extra });
export const embedded = (resource: ResourceContents): EmbeddedResource => block({ type: "resource", resource });

/** A message of a prompt; a string is a text block. */
export function message(role: "user" | "assistant", content: Content | string): PromptMessage {
  return { role, content: typeof content === "string" ? { type: "text", text: content } : content };
}

function isBlock(value: unknown): value is Content {
  return typeof value === "object" && value !== null && CONTENT in value;
}

/** A tool's return value as ToolResult.content_json (see proxy.proto). */
export function toolContentJson(value: unknown): string {
  if (value === undefined || value === null) return "";
  if (isBlock(value)) return JSON.stringify([value]);
  if (Array.isArray(value) && value.length > 0 && value.every(isBlock)) return JSON.stringify(value);
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "object" && !Array.isArray(value)) {
    const plain: unknown = JSON.parse(JSON.stringify(value));
    if (typeof plain === "object" && plain !== null && !Array.isArray(plain)) return JSON.stringify(plain);
  }
  return JSON.stringify({ result: value });
}

/** What a resource handler may return. */
export type ResourceValue =
  | string
  | Uint8Array
  | ResourceContents
  | Array<string | Uint8Array | ResourceContents>
  | { contents: ResourceContents[] };

/** A resource handler's return value as a `resources/read` result. */
export function readResult(uri: string, value: ResourceValue, mimeType: string | undefined): { contents: ResourceContents[] } {
  if (typeof value === "object" && value !== null && !(value instanceof Uint8Array) && !Array.isArray(value) && "contents" in value) {
    return value;
  }
  const items = Array.isArray(value) ? value : [value];
  const contents = items.map((item): ResourceContents => {
    const typed = mimeType ? { mimeType } : {};
    if (typeof item === "string") return { uri, ...typed, text: item };
    if (item instanceof Uint8Array) return { uri, ...typed, blob: base64(item) };
    if (typeof item === "object" && item !== null && typeof item.uri === "string") return item;
    throw new TypeError(`a resource handler returned ${typeof item}; return a string, bytes or {uri, text | blob}`);
  });
  return { contents };
}

/** What a prompt handler may return. */
export type PromptValue = string | PromptMessage | Array<string | PromptMessage> | { messages: PromptMessage[]; description?: string };

/** A prompt handler's return value as a `prompts/get` result. */
export function promptResult(value: PromptValue, description: string | undefined): { messages: PromptMessage[]; description?: string } {
  if (typeof value === "object" && !Array.isArray(value) && "messages" in value) return value;
  const items = Array.isArray(value) ? value : [value];
  const messages = items.map((item) => (typeof item === "string" ? message("user", item) : item));
  return description ? { messages, description } : { messages };
}

// An openclaw-proxy app in TypeScript, written with the openclaw-proxy-app
// package (proto/typescript): two tools, echo_text and confirm_echo (which
// asks the user first), one resource, echo://readme, and one prompt,
// echo_prompt. The package registers the session, holds the gRPC bridge,
// reconnects and registers anew after a proxy restart.
//
// Prints each session id on its own stdout line.
// Node 22.18+ runs it as is: node echo_app.ts --proxy-url URL [--app-token T]
import { parseArgs } from "node:util";
import { z } from "zod";
import { App } from "openclaw-proxy-app";

const { values } = parseArgs({ options: { "proxy-url": { type: "string" }, "app-token": { type: "string", default: "" } } });
const app = new App(values["proxy-url"] ?? "http://127.0.0.1:8000",
  { appToken: values["app-token"], deviceId: "typescript-example", appVersion: "1.0.0" });
const text = z.object({ text: z.string() });
const README = 'This app echoes text back: call echo_text with {"text": ...}.';

app.tool("echo_text", { description: "Echo the text back.", input: text }, ({ text }) => ({ echoed_text: text }));

app.tool("confirm_echo", { description: "Ask the user, then echo the text.", input: text }, async ({ text }, ctx) => {
  const reply = await ctx.elicit(`Echo ${JSON.stringify(text)} back?`,
    z.object({ note: z.string().describe("A note to add") }));
  if (reply.action !== "accept" || reply.content === undefined) return `The user chose ${reply.action}: nothing was echoed.`;
  return { echoed_text: text, note: reply.content.note };
});

app.resource("echo://readme", { name: "readme", description: "What this app does.", mimeType: "text/plain" }, () => README);

app.prompt("echo_prompt", { description: "Ask the agent to echo a text.",
  arguments: { text: { description: "The text to echo.", required: true } } },
  ({ text }) => `Use the echo_text tool to echo this text: ${text}`);

app.onSession((session) => console.log(session.sessionId));
await app.run();

// OpenClaw's own MCP client code, the bundle-MCP runtime its agents get
// their MCP tools from, run against one configured server: prints the agent
// tools it made and what its resource and prompt tools answer, as one JSON
// line. Arguments: the server's URL, its bearer token, a workspace dir, a
// resource URI to read and a prompt to get; then, optionally, a tool to
// call (its name on the server) and its arguments as JSON, whose result is
// reported whole (`called`).
import path from "node:path";
import { pathToFileURL } from "node:url";

const [url, token, workspaceDir, uri, prompt, toolToCall, toolArguments] =
  process.argv.slice(2);
const entry = path.join(
  import.meta.dirname,
  "node_modules/openclaw/dist/agents/agent-bundle-mcp-materialize.js",
);
const { createBundleMcpToolRuntime } = await import(pathToFileURL(entry).href);
const cfg = {
  mcp: {
    servers: {
      notes: {
        url,
        transport: "streamable-http",
        headers: { Authorization: `Bearer ${token}` },
      },
    },
  },
};
const runtime = await createBundleMcpToolRuntime({ workspaceDir, cfg });
const tool = (suffix) => runtime.tools.find((t) => t.name.endsWith(`__${suffix}`));
const run = async (suffix, input) => {
  const found = tool(suffix);
  if (!found) return null;
  const result = await found.execute(`call-${suffix}`, input, undefined);
  return result.content.map((block) => block.text ?? block);
};
const out = {
  tools: runtime.tools.map((t) => t.name).sort(),
  resources: await run("resources_list", {}),
  read: await run("resources_read", { uri }),
  prompts: await run("prompts_list", {}),
  prompt: await run("prompts_get", { name: prompt }),
};
if (toolToCall) {
  const found = tool(toolToCall);
  out.called = found
    ? await found.execute(`call-${toolToCall}`, JSON.parse(toolArguments ?? "{}"), undefined)
    : null;
}
console.log(JSON.stringify(out));
await runtime.dispose();
process.exit(0);

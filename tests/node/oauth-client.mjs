// Signs in and calls a tool the way an MCP host does with OAuth: the
// official TypeScript SDK's StreamableHTTPClientTransport with an
// OAuthClientProvider. The SDK reads the proxy's 401 (WWW-Authenticate
// resource_metadata), fetches the protected-resource metadata (RFC 9728) and
// the authorization server's, registers a client dynamically, starts the
// authorization code flow with PKCE and a resource indicator, and exchanges
// the code for a token. This script plays the browser: it follows the
// redirects (with the server's cookies) until the code comes back.
//
// Prints one JSON line: the tools listed and the `whoami` tool's answer.
//
// usage: node oauth-client.mjs <mcp-url>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url] = process.argv.slice(2);
// Never contacted: the code is read from the redirect to it.
const redirectUrl = "http://127.0.0.1:9/callback";
const cookies = new Map();
let clientInformation;
let tokens;
let verifier;
let code;

const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: "oauth-flow-test",
      redirect_uris: [redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      application_type: "native",
    };
  },
  clientInformation: () => clientInformation,
  saveClientInformation: (information) => {
    clientInformation = information;
  },
  tokens: () => tokens,
  saveTokens: (saved) => {
    tokens = saved;
  },
  saveCodeVerifier: (saved) => {
    verifier = saved;
  },
  codeVerifier: () => verifier,
  redirectToAuthorization: async (authorizationUrl) => {
    code = await followToCode(authorizationUrl);
  },
};

async function followToCode(start) {
  let next = new URL(start);
  for (let hop = 0; hop < 12; hop += 1) {
    if (next.href.startsWith(redirectUrl)) {
      const found = next.searchParams.get("code");
      if (!found) throw new Error(`redirected without a code: ${next}`);
      return found;
    }
    const cookie = [...cookies].map(([name, value]) => `${name}=${value}`).join("; ");
    const response = await fetch(next, { redirect: "manual", headers: { cookie } });
    for (const line of response.headers.getSetCookie()) {
      const pair = line.split(";")[0];
      const at = pair.indexOf("=");
      cookies.set(pair.slice(0, at), pair.slice(at + 1));
    }
    const location = response.headers.get("location");
    if (!location) throw new Error(`${response.status} at ${next}: ${await response.text()}`);
    next = new URL(location, next);
  }
  throw new Error("too many redirects on the way to the code");
}

const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await new Client({ name: "oauth-flow-test", version: "1.0.0" }).connect(first);
  throw new Error("connected without signing in");
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
}
await first.finishAuth(code);

const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
const client = new Client({ name: "oauth-flow-test", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const answer = await client.callTool({ name: "whoami", arguments: {} });
console.log(
  JSON.stringify({
    registered: Boolean(clientInformation?.client_id),
    client_id: clientInformation?.client_id,
    token_type: tokens?.token_type,
    tools: tools.map((tool) => tool.name),
    whoami: answer.structuredContent,
  }),
);
await client.close();

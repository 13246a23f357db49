// A real OAuth 2.1 authorization server for the tests: the npm
// `oidc-provider` (pinned in package.json) on a loopback port, with dynamic
// client registration, PKCE, resource indicators (RFC 8707) and JWT access
// tokens signed RS256 with a key made here. Its one user, `alice`, signs in
// and consents without a page: each interaction is finished as soon as it
// starts, so a client that follows redirects gets its code.
//
// Prints one JSON line {"issuer": "http://127.0.0.1:PORT"} once it listens,
// then serves until stdin closes.
//
// usage: node oidc-issuer.mjs
import { generateKeyPairSync } from "node:crypto";
import { createServer } from "node:http";
import Provider from "oidc-provider";

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const jwk = { ...privateKey.export({ format: "jwk" }), kid: "issuer-key-1", use: "sig", alg: "RS256" };

const server = createServer();
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  jwks: { keys: [jwk] },
  scopes: ["openid", "offline_access", "mcp"],
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => ({
        scope: "mcp",
        audience: resource,
        accessTokenTTL: 3600,
        accessTokenFormat: "jwt",
        jwt: { sign: { alg: "RS256" } },
      }),
    },
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  pkce: { required: () => true },
});
provider.proxy = false;

const callback = provider.callback();
server.on("request", async (req, res) => {
  if (req.url.startsWith("/interaction/")) {
    try {
      await finishInteraction(req, res);
    } catch (error) {
      res.statusCode = 500;
      res.end(String(error));
    }
    return;
  }
  callback(req, res);
});

// alice signs in, then consents to everything asked for.
async function finishInteraction(req, res) {
  const { prompt, params, session } = await provider.interactionDetails(req, res);
  if (prompt.name === "login") {
    await provider.interactionFinished(req, res, { login: { accountId: "alice" } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const { missingOIDCScope, missingResourceScopes } = prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(" "));
  for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(" "));
  }
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

console.log(JSON.stringify({ issuer }));
process.stdin.resume();
process.stdin.on("end", () => server.close(() => process.exit(0)));

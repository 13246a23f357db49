/**
 * The proxy's gRPC services, from the contract generated into the package at
 * build time (a JSON descriptor and its types): nothing reads or compiles a
 * .proto file when an app starts.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { descriptor } from "./generated/descriptor.js";
import type { ProtoGrpcType } from "./generated/proxy.js";
import type { BridgeServiceClient } from "./generated/openclaw/proxy/v1/BridgeService.js";
import type { SessionServiceClient } from "./generated/openclaw/proxy/v1/SessionService.js";

const definition = protoLoader.fromJSON(descriptor as Parameters<typeof protoLoader.fromJSON>[0], {
  keepCase: true, longs: String, defaults: true, oneofs: true,
});
const v1 = (grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType).openclaw.proxy.v1;

export interface Stubs {
  sessions: SessionServiceClient;
  bridge: BridgeServiceClient;
  close(): void;
}

/** Clients of both services on one channel to `proxyUrl` (`http://` plain, `https://` TLS). */
export function connect(proxyUrl: string): Stubs {
  const url = new URL(proxyUrl);
  const port = url.port || (url.protocol === "https:" ? "443" : "80");
  const target = `${url.hostname.includes(":") ? `[${url.hostname.replace(/^\[|\]$/g, "")}]` : url.hostname}:${port}`;
  const credentials = url.protocol === "https:" ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
  const options = {
    "grpc.keepalive_time_ms": 20_000, "grpc.keepalive_timeout_ms": 10_000,
    "grpc.max_reconnect_backoff_ms": 5_000,
  };
  const sessions = new v1.SessionService(target, credentials, options);
  const bridge = new v1.BridgeService(target, credentials, { ...options, channelOverride: sessions.getChannel() });
  return { sessions, bridge, close: () => sessions.close() };
}

/** Metadata carrying `token` as a bearer credential (nothing when empty). */
export function bearer(token: string): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

export { grpc };

/**
 * The two ways to reach the proxy, behind one interface: gRPC
 * (`CreateSession` and the `Attach` stream) and, for networks without HTTP/2,
 * REST registration and the JSON WebSocket bridge (`websocket.ts`). Both
 * deliver the bridge as the contract's messages, so serving is written once;
 * each says how its bridge ended in the same three words: attach again,
 * register anew, or stop.
 */
import { AppError } from "./errors.js";
import type { AppMessage } from "./generated/openclaw/proxy/v1/AppMessage.js";
import type { CreateSessionRequest } from "./generated/openclaw/proxy/v1/CreateSessionRequest.js";
import type { CreateSessionResponse__Output } from "./generated/openclaw/proxy/v1/CreateSessionResponse.js";
import type { ProxyMessage__Output } from "./generated/openclaw/proxy/v1/ProxyMessage.js";
import { bearer, connect, grpc, type Stubs } from "./grpc.js";

/** How a bridge ended. */
export type BridgeEnd =
  | { kind: "lost"; why: string } // attach again
  | { kind: "gone" } // the proxy forgot the session: register anew
  | { kind: "fatal"; error: AppError }; // retrying cannot help

export interface Attached {
  write(message: AppMessage): void;
  /** Ends the bridge from the app's side. */
  cancel(): void;
  readonly ended: Promise<BridgeEnd>;
}

/** Thrown by `create` when the proxy could not be reached; retried. */
export class Unreachable extends Error {
  override name = "Unreachable";
}

export interface Transport {
  create(request: CreateSessionRequest, appToken: string, timeoutMs: number): Promise<CreateSessionResponse__Output>;
  attach(sessionId: string, token: string, dispatch: (message: ProxyMessage__Output) => void): Attached;
  delete(sessionId: string, token: string): Promise<void>;
  close(): void;
}

export const TOKEN_REFUSED = "the proxy refused the token; check appToken (the proxy's OPENCLAW_PROXY_APP_TOKEN)";
export const TAKEN_OVER = "another bridge took over the session (is the app running twice?)";

/** gRPC: `SessionService` and `BridgeService.Attach`. */
export class GrpcTransport implements Transport {
  readonly #stubs: Stubs;

  constructor(proxyUrl: string) {
    this.#stubs = connect(proxyUrl);
  }

  create(request: CreateSessionRequest, appToken: string, timeoutMs: number): Promise<CreateSessionResponse__Output> {
    return new Promise((resolve, reject) =>
      this.#stubs.sessions.CreateSession(request, bearer(appToken), { deadline: Date.now() + timeoutMs }, (error, response) => {
        if (error) {
          if (error.code === grpc.status.UNAUTHENTICATED || error.code === grpc.status.PERMISSION_DENIED) {
            reject(new AppError(`${TOKEN_REFUSED} (${error.details})`, error.code));
          } else if (error.code === grpc.status.INVALID_ARGUMENT) {
            reject(new AppError(`the proxy refused the declarations: ${error.details}`, error.code));
          } else reject(new Unreachable(`CreateSession failed: ${grpc.status[error.code] ?? error.code}: ${error.details}`));
        } else if (response === undefined) reject(new Unreachable("CreateSession answered nothing"));
        else resolve(response);
      }));
  }

  attach(sessionId: string, token: string, dispatch: (message: ProxyMessage__Output) => void): Attached {
    // mcp-session-id lets a load balancer send the bridge where the
    // session's MCP calls go.
    const metadata = bearer(token);
    metadata.set("mcp-session-id", sessionId);
    const stream = this.#stubs.bridge.Attach(metadata);
    const ended = new Promise<BridgeEnd>((resolve) => {
      let done = false;
      const end = (code: number, details: string): void => {
        if (done) return;
        done = true;
        resolve(classify(code, details));
      };
      stream.on("data", dispatch);
      stream.on("error", (error: grpc.ServiceError) => end(error.code, error.details));
      stream.on("status", (status: grpc.StatusObject) => end(status.code, status.details));
      stream.on("end", () => stream.end());
    });
    stream.write({ hello: { session_id: sessionId } });
    return { write: (message) => { stream.write(message); }, cancel: () => stream.cancel(), ended };
  }

  delete(sessionId: string, token: string): Promise<void> {
    return new Promise((resolve, reject) =>
      this.#stubs.sessions.DeleteSession({ session_id: sessionId }, bearer(token), { deadline: Date.now() + 5_000 },
        (error) => (error ? reject(error) : resolve())));
  }

  close(): void {
    this.#stubs.close();
  }
}

function classify(code: number, details: string): BridgeEnd {
  switch (code) {
    case grpc.status.NOT_FOUND:
      return { kind: "gone" };
    case grpc.status.ABORTED:
      return { kind: "fatal", error: new AppError(TAKEN_OVER, code) };
    case grpc.status.UNAUTHENTICATED:
    case grpc.status.PERMISSION_DENIED:
      return { kind: "fatal", error: new AppError(`${TOKEN_REFUSED} (${details})`, code) };
    case grpc.status.INVALID_ARGUMENT:
      return { kind: "fatal", error: new AppError(`the proxy refused the bridge: ${details}`, code) };
    default:
      return { kind: "lost", why: `${grpc.status[code] ?? code}: ${details}` };
  }
}

"""An openclaw-proxy app in Python: one tool, echo_text, served over the gRPC bridge.

Registers a session, attaches its bridge, answers calls (on a thread pool) and
pings, and reconnects with backoff and jitter; when the proxy no longer knows the
session (it restarted) it registers a new one. Prints each session id on its own
stdout line. Run it with ./run.sh --proxy-url http://127.0.0.1:8000 [--app-token T].
"""

import argparse, contextlib, json, os, queue, random, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_tools import protoc

PROTO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def load_stubs():
    """Compiles proxy.proto into a temporary directory and imports it from there."""
    well_known = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="openclaw-proxy-stubs-") as out:
        if protoc.main(["protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", f"--python_out={out}",
                        f"--grpc_python_out={out}", "openclaw/proxy/v1/proxy.proto"]) != 0:
            sys.exit("could not compile proxy.proto")
        sys.path.insert(0, out)
        from openclaw.proxy.v1 import proxy_pb2, proxy_pb2_grpc
        sys.path.remove(out)
    return proxy_pb2, proxy_pb2_grpc


def run_tool(name, arguments):
    if name == "echo_text":
        return {"echoed_text": arguments["text"]}
    raise LookupError(f"this app has no tool named {name!r}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-url", required=True)
    parser.add_argument("--app-token", default="")
    args = parser.parse_args()
    pb, rpc = load_stubs()
    target = args.proxy_url.split("://", 1)[-1].rstrip("/")
    options = [("grpc.keepalive_time_ms", 20000), ("grpc.keepalive_timeout_ms", 10000),
               ("grpc.max_reconnect_backoff_ms", 5000)]
    channel = (grpc.secure_channel(target, grpc.ssl_channel_credentials(), options)
               if args.proxy_url.startswith("https://") else grpc.insecure_channel(target, options))
    def bearer(token):
        return [("authorization", f"Bearer {token}")] if token else []
    sessions, bridge = rpc.SessionServiceStub(channel), rpc.BridgeServiceStub(channel)
    pool = ThreadPoolExecutor(max_workers=8)  # calls run concurrently, up to 8 at once
    tools = [pb.ToolDefinition(name="echo_text", description="Echo the text back.",
                               input_schema_json=json.dumps(SCHEMA))]

    def answer(outbox, call):
        try:
            content = run_tool(call.tool_name, json.loads(call.arguments_json or "{}"))
            result = pb.ToolResult(request_id=call.request_id, ok=True, content_json=json.dumps(content))
        except Exception as error:  # a failing tool becomes an isError result, never a crash
            result = pb.ToolResult(request_id=call.request_id, ok=False, error=f"{type(error).__name__}: {error}")
        outbox.put(pb.AppMessage(result=result))

    session_id, session_token, delay = None, "", 0.25
    while True:
        try:
            if session_id is None:
                request = pb.CreateSessionRequest(
                    metadata=pb.SessionMetadata(device_id="python-example", app_version="1.0.0"), tools=tools)
                created = sessions.CreateSession(request, metadata=bearer(args.app_token), timeout=30)
                session_id, session_token = created.session_id, created.session_token
                print(session_id, flush=True)
            outbox = queue.Queue()
            outbox.put(pb.AppMessage(hello=pb.Hello(session_id=session_id)))
            # The session's own token opens its bridge (the app token only where the proxy allows it).
            stream = bridge.Attach(iter(outbox.get, None), metadata=bearer(session_token or args.app_token))
            try:
                for message in stream:
                    kind = message.WhichOneof("kind")
                    if kind == "attached":
                        delay = 0.25  # a working bridge resets the backoff
                    elif kind == "ping":
                        outbox.put(pb.AppMessage(pong=pb.Pong(nonce=message.ping.nonce)))
                    elif kind == "invoke":
                        pool.submit(answer, outbox, message.invoke)
                    elif kind == "error":
                        print(f"proxy notice: {message.error.message}", file=sys.stderr)
            finally:
                outbox.put(None)  # ends the request stream
        except grpc.RpcError as error:
            code = error.code()
            if code == grpc.StatusCode.NOT_FOUND:  # the proxy forgot the session: register anew
                session_id = None
                print("the proxy no longer knows the session; registering a new one", file=sys.stderr)
            elif code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INVALID_ARGUMENT,
                          grpc.StatusCode.ABORTED):  # retrying cannot help
                sys.exit(f"stopped: {code.name}: {error.details()}")
            else:
                print(f"bridge lost ({code.name}: {error.details()}); reconnecting", file=sys.stderr)
        time.sleep(delay * random.uniform(0.5, 1.5))  # exponential backoff with jitter
        delay = min(delay * 2, 30)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()

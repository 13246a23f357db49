"""An openclaw-proxy app in Python: two tools, echo_text and confirm_echo (which asks the
user first), one resource, echo://readme, and one prompt, echo_prompt, served over the
gRPC bridge.

Registers a session, attaches its bridge, answers calls and MCP requests (on a thread
pool) and pings, and reconnects with backoff and jitter; when the proxy no longer knows
the session (it restarted) it registers a new one. Prints each session id on its own
stdout line. Run it with ./run.sh --proxy-url http://127.0.0.1:8000 [--app-token T].
"""

import argparse, contextlib, itertools, json, os, queue, random, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_tools import protoc

PROTO_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
README = "This app echoes text back: call echo_text with {\"text\": ...}."
# The form confirm_echo shows the user: one string field.
NOTE_FORM = {"type": "object", "properties": {"note": {"type": "string", "title": "A note to add"}},
             "required": ["note"]}


class RequestError(Exception):
    """An MCP request that fails with a JSON-RPC error (code, message, data)."""
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.data = code, data


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


class Asks:
    """The app's requests to the MCP client of a call, each waiting for its ClientResponse."""

    def __init__(self, pb):
        self.pb, self.lock, self.waiting, self.ids = pb, threading.Lock(), {}, itertools.count(1)

    def ask(self, outbox, request_id, method, params):
        """Asks the client of the call request_id (elicitation/create, sampling/createMessage,
        roots/list) and waits for its result, a dict; raises if it could not answer."""
        key, answer = (request_id, str(next(self.ids))), queue.Queue(maxsize=1)
        with self.lock:
            self.waiting[key] = answer
        outbox.put(self.pb.AppMessage(client_request=self.pb.ClientRequest(
            request_id=request_id, id=key[1], method=method, params_json=json.dumps(params))))
        response = answer.get()  # the proxy bounds the wait; a cancel or a lost bridge ends it
        if response is None:
            raise RuntimeError("the call ended before the MCP client answered")
        if response.WhichOneof("outcome") == "error":
            raise RuntimeError(f"the MCP client could not answer: {response.error.message}")
        return json.loads(response.result_json)

    def answer(self, response):
        with self.lock:
            waiting = self.waiting.pop((response.request_id, response.id), None)
        if waiting:
            waiting.put(response)

    def end(self, request_id=None):
        """Ends the waits of one call (it was cancelled), or of all (the bridge is gone)."""
        with self.lock:
            for key in [key for key in self.waiting if request_id in (None, key[0])]:
                self.waiting.pop(key).put(None)


def run_tool(name, arguments, ask):
    if name == "echo_text":
        return {"echoed_text": arguments["text"]}
    if name == "confirm_echo":  # asks the user, through the MCP client, before echoing
        reply = ask("elicitation/create", {"mode": "form", "requestedSchema": NOTE_FORM,
                                           "message": f"Echo {json.dumps(arguments['text'])} back?"})
        if reply["action"] != "accept":  # "decline" or "cancel"
            return f"The user chose {reply['action']}: nothing was echoed."
        return {"echoed_text": arguments["text"], "note": reply["content"]["note"]}
    raise LookupError(f"this app has no tool named {name!r}")


def serve_mcp(method, params, revision):
    """The MCP result of resources/read or prompts/get; a RequestError otherwise."""
    if method == "resources/read":
        if params.get("uri") != "echo://readme":  # 2026-07-28 names -32602 for it (SEP-2164)
            code = -32602 if revision >= "2026-07-28" else -32002
            raise RequestError(code, f"Resource not found: {params.get('uri')}", {"uri": params.get("uri")})
        return {"contents": [{"uri": "echo://readme", "mimeType": "text/plain", "text": README}]}
    if method == "prompts/get":
        if params.get("name") != "echo_prompt":
            raise RequestError(-32602, f"this app has no prompt named {params.get('name')!r}")
        text = (params.get("arguments") or {}).get("text", "")
        return {"messages": [{"role": "user", "content": {
            "type": "text", "text": f"Use the echo_text tool to echo this text: {text}"}}]}
    raise RequestError(-32601, f"this app does not serve {method}")


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
    asks = Asks(pb)
    tools = [pb.ToolDefinition(name="echo_text", description="Echo the text back.",
                               input_schema_json=json.dumps(SCHEMA)),
             pb.ToolDefinition(name="confirm_echo", description="Ask the user, then echo the text.",
                               input_schema_json=json.dumps(SCHEMA))]
    resources = [pb.ResourceDefinition(uri="echo://readme", name="readme", mime_type="text/plain",
                                       description="What this app does.")]
    prompts = [pb.PromptDefinition(name="echo_prompt", description="Ask the agent to echo a text.",
                                   arguments=[pb.PromptArgument(name="text", required=True,
                                                                description="The text to echo.")])]

    def answer(outbox, call):
        def ask(method, params):  # asks this call's MCP client
            return asks.ask(outbox, call.request_id, method, params)
        try:
            content = run_tool(call.tool_name, json.loads(call.arguments_json or "{}"), ask)
            result = pb.ToolResult(request_id=call.request_id, ok=True, content_json=json.dumps(content))
        except Exception as error:  # a failing tool becomes an isError result, never a crash
            result = pb.ToolResult(request_id=call.request_id, ok=False, error=f"{type(error).__name__}: {error}")
        outbox.put(pb.AppMessage(result=result))

    def answer_mcp(outbox, request):
        try:
            params = json.loads(request.params_json or "{}")
            result = serve_mcp(request.method, params, request.client.protocol_version)
            answer = pb.McpResult(request_id=request.request_id, result_json=json.dumps(result))
        except Exception as error:  # a JSON-RPC error for the client, never a crash
            code, data = getattr(error, "code", -32603), getattr(error, "data", None)
            answer = pb.McpResult(request_id=request.request_id, error=pb.McpError(
                code=code, message=str(error), data_json="" if data is None else json.dumps(data)))
        outbox.put(pb.AppMessage(mcp_result=answer))

    session_id, session_token, delay = None, "", 0.25
    while True:
        try:
            if session_id is None:
                request = pb.CreateSessionRequest(
                    metadata=pb.SessionMetadata(device_id="python-example", app_version="1.0.0"),
                    tools=tools, resources=resources, prompts=prompts)
                created = sessions.CreateSession(request, metadata=bearer(args.app_token), timeout=30)
                session_id, session_token = created.session_id, created.session_token
                print(session_id, flush=True)
            outbox = queue.Queue()
            outbox.put(pb.AppMessage(hello=pb.Hello(session_id=session_id)))
            # The session's own token opens its bridge (the app token only where the proxy allows it);
            # mcp-session-id lets a load balancer send the bridge where the session's MCP calls go.
            metadata = bearer(session_token or args.app_token) + [("mcp-session-id", session_id)]
            stream = bridge.Attach(iter(outbox.get, None), metadata=metadata)
            try:
                for message in stream:
                    kind = message.WhichOneof("kind")
                    if kind == "attached":
                        delay = 0.25  # a working bridge resets the backoff
                    elif kind == "ping":
                        outbox.put(pb.AppMessage(pong=pb.Pong(nonce=message.ping.nonce)))
                    elif kind == "invoke":
                        pool.submit(answer, outbox, message.invoke)
                    elif kind == "mcp_request":
                        pool.submit(answer_mcp, outbox, message.mcp_request)
                    elif kind == "client_response":  # the MCP client answered one of our asks
                        asks.answer(message.client_response)
                    elif kind == "cancel":
                        asks.end(message.cancel.request_id)
                    elif kind == "error":
                        print(f"proxy notice: {message.error.message}", file=sys.stderr)
            finally:
                outbox.put(None)  # ends the request stream
                asks.end()
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

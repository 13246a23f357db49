// The load generator's app written with the openclaw-proxy-app package
// (`loadgen calls --bridge grpc --grpc-app typescript`): one tool, `echo`,
// that answers `{"text": t}` with the same object, after `--reports` progress
// reports. Prints its session id on stdout, and stops (deleting its session)
// when its stdin closes, so it never outlives the load generator.
//
// usage: node bench_app.ts --proxy-url URL --app-token TOKEN [--reports N]
import { parseArgs } from "node:util";
import { z } from "zod";
import { App } from "openclaw-proxy-app";

const { values } = parseArgs({ options: {
  "proxy-url": { type: "string" }, "app-token": { type: "string", default: "" }, reports: { type: "string", default: "0" },
} });
const reports = Number(values.reports);
// The load decides the concurrency: never answer "busy".
const app = new App(values["proxy-url"] ?? "http://127.0.0.1:8000", {
  appToken: values["app-token"], deviceId: "loadgen", appVersion: "1", maxConcurrentCalls: 4096,
});

app.tool("echo", { description: "Echo.", input: z.object({ text: z.string() }) }, ({ text }, ctx) => {
  for (let step = 1; step <= reports; step++) {
    ctx.progress(step, { total: reports });
  }
  return { text };
});

app.onSession((session) => process.stdout.write(`${session.sessionId}\n`));

try {
  const serving = await app.serve();
  process.stdin.resume();
  process.stdin.on("end", () => void serving.close());
  await serving.closed;
  process.exit(0);
} catch (error) {
  console.error(String(error));
  process.exit(1);
}

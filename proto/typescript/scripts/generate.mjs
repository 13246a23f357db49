// Generates the package's view of the proxy's contract from proxy.proto, so
// that an installed app never reads or compiles a .proto file:
//   src/generated/descriptor.ts  the contract as a JSON descriptor, which
//                                @grpc/proto-loader turns into stubs at start;
//   src/generated/openclaw/...   the message and service types, for tsc.
// Run by `npm run build` (and so by `npm pack`); the output is not committed.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.join(here, "..");
const includeDir = path.join(root, "..", "proto");
const file = "openclaw/proxy/v1/proxy.proto";
if (!existsSync(path.join(includeDir, file))) {
  throw new Error(`${file} not found under ${includeDir}: build the package from the repository`);
}
const out = path.join(root, "src", "generated");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const parsed = new protobuf.Root();
parsed.resolvePath = (_origin, target) => path.join(includeDir, target);
parsed.loadSync(file, { keepCase: true });
const descriptor = JSON.stringify(parsed.toJSON({ keepComments: false }));
writeFileSync(path.join(out, "descriptor.ts"),
  "// Generated from proxy.proto by scripts/generate.mjs; do not edit.\n" +
  `export const descriptor: Record<string, unknown> = ${descriptor};\n`);

execFileSync(process.execPath, [
  path.join(root, "node_modules", "@grpc", "proto-loader", "build", "bin", "proto-loader-gen-types.js"),
  "--keepCase", "--longs=String", "--defaults", "--oneofs", "--grpcLib=@grpc/grpc-js",
  "--importFileExtension=.js", "-I", includeDir, "-O", out, file,
], { stdio: "inherit" });
// The generated files name the .proto they came from; keep build paths out of them.
for (const entry of readdirSync(out, { recursive: true, withFileTypes: true })) {
  if (!entry.isFile()) continue;
  const target = path.join(entry.parentPath, entry.name);
  writeFileSync(target, readFileSync(target, "utf8").replaceAll(includeDir, "proto"));
}

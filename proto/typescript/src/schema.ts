/**
 * Argument schemas: a Standard Schema with a JSON Schema view (zod 4.2 or
 * newer, and other libraries implementing both standards) or a plain JSON
 * Schema object. The JSON Schema is what the proxy lists; a Standard Schema
 * also validates and types the arguments before the handler sees them.
 */

/** The Standard Schema interface (standardschema.dev), as far as this package uses it. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly "~standard": {
    readonly version: 1;
    readonly vendor: string;
    readonly validate: (value: unknown) => StandardResult<Output> | Promise<StandardResult<Output>>;
    readonly types?: { readonly input: Input; readonly output: Output } | undefined;
    /** Standard JSON Schema (zod 4.2+). */
    readonly jsonSchema?: {
      readonly input: (options: { readonly target: string }) => Record<string, unknown>;
    };
  };
}

export type StandardResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined }> };

/** A JSON Schema object, as JSON. */
export type JsonSchema = { readonly [key: string]: unknown };

/** What a tool's `input` (or an elicitation's form) may be. */
export type Schema = StandardSchemaV1<any, any> | JsonSchema;

/** The arguments a handler gets for `S`: the schema's output type, or a JSON object. */
export type Infer<S> = S extends StandardSchemaV1<any, infer O> ? O : Record<string, unknown>;

export function isStandardSchema(schema: unknown): schema is StandardSchemaV1<unknown, unknown> {
  return typeof schema === "object" && schema !== null && "~standard" in schema;
}

/** The JSON Schema of `schema`, without the `$schema` key the proxy does not need. */
export function jsonSchemaOf(schema: Schema | undefined, what: string): Record<string, unknown> {
  if (schema === undefined) return { type: "object" };
  let json: Record<string, unknown>;
  if (isStandardSchema(schema)) {
    const view = schema["~standard"].jsonSchema;
    if (view === undefined) {
      throw new TypeError(`${what}: this ${schema["~standard"].vendor} schema cannot give a JSON Schema; ` +
        "use zod 4.2 or newer (or another library implementing Standard JSON Schema), or pass a JSON Schema object");
    }
    json = { ...view.input({ target: "draft-2020-12" }) };
  } else {
    json = { ...schema };
  }
  delete json["$schema"];
  if (json["type"] !== undefined && json["type"] !== "object") {
    throw new TypeError(`${what}: the schema must describe an object (its "type" is ${JSON.stringify(json["type"])})`);
  }
  return json;
}

/** `value` checked against `schema`: its typed output, or a sentence naming what does not fit. */
export async function validate(schema: Schema | undefined, value: unknown): Promise<{ ok: true; value: unknown } | { ok: false; error: string }> {
  if (!isStandardSchema(schema)) return { ok: true, value };
  const result = await schema["~standard"].validate(value);
  if (result.issues === undefined) return { ok: true, value: result.value };
  const problems = result.issues.map((issue) => {
    const path = (issue.path ?? []).map((p) => String(typeof p === "object" ? p.key : p)).join(".");
    return path ? `${path}: ${issue.message}` : issue.message;
  });
  return { ok: false, error: `the arguments do not fit the schema: ${problems.join("; ")}` };
}

/**
 * Matching a URI against a resource template (RFC 6570 level 1 and 2 as MCP
 * uses them): `{name}` takes one path segment, `{+name}` any text; the values
 * are percent-decoded.
 */
export class UriTemplate {
  readonly template: string;
  readonly names: string[] = [];
  readonly #pattern: RegExp;

  constructor(template: string) {
    this.template = template;
    let source = "^";
    let rest = template;
    for (;;) {
      const open = rest.indexOf("{");
      if (open < 0) break;
      const close = rest.indexOf("}", open);
      if (close < 0) throw new TypeError(`resource template ${template}: a "{" is not closed`);
      source += escape(rest.slice(0, open));
      let name = rest.slice(open + 1, close);
      const reserved = name.startsWith("+");
      if (reserved) name = name.slice(1);
      if (!/^[A-Za-z0-9_]+$/.test(name)) throw new TypeError(`resource template ${template}: {${name}} is not a variable name`);
      this.names.push(name);
      source += reserved ? "(.*)" : "([^/?#]*)";
      rest = rest.slice(close + 1);
    }
    this.#pattern = new RegExp(source + escape(rest) + "$");
  }

  /** The variables when `uri` fits, else undefined. */
  match(uri: string): Record<string, string> | undefined {
    const found = this.#pattern.exec(uri);
    if (found === null) return undefined;
    const variables: Record<string, string> = {};
    this.names.forEach((name, index) => {
      const raw = found[index + 1] ?? "";
      try {
        variables[name] = decodeURIComponent(raw);
      } catch {
        variables[name] = raw;
      }
    });
    return variables;
  }
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

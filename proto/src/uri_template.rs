//! Whether a URI is one a resource template (RFC 6570, as MCP's
//! `uriTemplate` uses it) can expand to, so that a read of a URI no
//! declaration names is refused before it reaches the app.
//!
//! A template is literal text and expressions (`{var}`, `{+var}`,
//! `{#var}`, `{.var}`, `{/var}`, `{;var}`, `{?var}`, `{&var}`, each with any
//! number of variables, prefix modifiers `:N` and explode `*`): levels 1 to
//! 4. Literal text must appear as written. An expression stands for what
//! its expansion may hold, empty included (a variable may be undefined):
//!
//! | expression | expands to |
//! |---|---|
//! | `{var}` | one path segment's characters (RFC 3986 `pchar`): no `/`, `?` or `#` |
//! | `{+var}`, `{#var}` | any URI characters, `/`, `?` and `#` included (`{#var}` after a `#`) |
//! | `{.var}` | `.` then a segment's characters |
//! | `{/var}` | `/` then path characters (segments with their `/`) |
//! | `{;var}` | `;` then a segment's characters (`;name=value` pairs) |
//! | `{?var}`, `{&var}` | `?` or `&` then query characters (no `#`) |
//!
//! Characters outside ASCII count as a segment's characters (IRIs), since
//! clients write them unencoded. Which value a variable took is the app's
//! to work out; this only says whether any could have produced the URI. A
//! template whose braces do not pair is matched as literal text.
//!
//! Matching is a pass over the URI per part of the template, tracking the
//! positions the template so far can have reached: linear in the URI's
//! length per part, whatever the template, so no template or URI makes it
//! slow.

/// Whether `uri` is an expansion of `template`.
pub fn matches(template: &str, uri: &str) -> bool {
    let bytes = uri.as_bytes();
    let mut reached = vec![false; bytes.len() + 1];
    reached[0] = true;
    for part in parts(template) {
        reached = match part {
            Part::Literal(text) => literal(&reached, bytes, text.as_bytes()),
            Part::Expression(operator) => expression(&reached, bytes, operator),
        };
        if !reached.contains(&true) {
            return false;
        }
    }
    reached[bytes.len()]
}

/// A piece of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part<'a> {
    Literal(&'a str),
    Expression(Operator),
}

/// An expression's operator (RFC 6570 §2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    /// `{var}`.
    Simple,
    /// `{+var}`.
    Reserved,
    /// `{#var}`.
    Fragment,
    /// `{.var}`.
    Label,
    /// `{/var}`.
    Path,
    /// `{;var}`.
    Parameter,
    /// `{?var}`.
    Query,
    /// `{&var}`.
    Continuation,
}

impl Operator {
    fn of(expression: &str) -> Self {
        match expression.as_bytes().first() {
            Some(b'+') => Self::Reserved,
            Some(b'#') => Self::Fragment,
            Some(b'.') => Self::Label,
            Some(b'/') => Self::Path,
            Some(b';') => Self::Parameter,
            Some(b'?') => Self::Query,
            Some(b'&') => Self::Continuation,
            _ => Self::Simple,
        }
    }

    /// The character a non-empty expansion starts with.
    fn first(self) -> Option<u8> {
        match self {
            Self::Simple | Self::Reserved => None,
            Self::Fragment => Some(b'#'),
            Self::Label => Some(b'.'),
            Self::Path => Some(b'/'),
            Self::Parameter => Some(b';'),
            Self::Query => Some(b'?'),
            Self::Continuation => Some(b'&'),
        }
    }

    /// Whether `byte` may appear in an expansion (after its first
    /// character).
    fn allows(self, byte: u8) -> bool {
        match self {
            Self::Simple | Self::Label | Self::Parameter => is_pchar(byte),
            Self::Path => is_pchar(byte) || byte == b'/',
            Self::Query | Self::Continuation => is_pchar(byte) || matches!(byte, b'/' | b'?'),
            Self::Reserved | Self::Fragment => {
                is_pchar(byte) || matches!(byte, b'/' | b'?' | b'#' | b'[' | b']')
            }
        }
    }
}

/// RFC 3986 `pchar` (unreserved, `%`, sub-delims, `:` and `@`), and any
/// byte of a character outside ASCII.
fn is_pchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:@".contains(&byte) || !byte.is_ascii()
}

/// The template's literal text and expressions; braces that do not pair
/// are literal text.
fn parts(template: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        let Some(open) = rest.find('{') else {
            parts.push(Part::Literal(rest));
            break;
        };
        let Some(close) = rest[open..].find('}').map(|at| open + at) else {
            parts.push(Part::Literal(rest));
            break;
        };
        let inner = &rest[open + 1..close];
        if inner.contains('{') {
            // `{a{b}`: the first brace is text.
            let text_end = open + 1 + inner.rfind('{').unwrap_or(0);
            parts.push(Part::Literal(&rest[..text_end]));
            rest = &rest[text_end..];
            continue;
        }
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        parts.push(Part::Expression(Operator::of(inner)));
        rest = &rest[close + 1..];
    }
    parts
}

/// The positions reached after `text`, from those `reached` before it.
fn literal(reached: &[bool], uri: &[u8], text: &[u8]) -> Vec<bool> {
    let mut next = vec![false; reached.len()];
    for (at, _) in reached.iter().enumerate().filter(|(_, reached)| **reached) {
        if uri[at..].starts_with(text) {
            next[at + text.len()] = true;
        }
    }
    next
}

/// The positions reached after an expression of `operator`, from those
/// `reached` before it: each reached position (an empty expansion), and
/// every end of a run of the characters it allows (after its first
/// character, for the operators that have one) that starts at one.
fn expression(reached: &[bool], uri: &[u8], operator: Operator) -> Vec<bool> {
    let mut next = reached.to_vec();
    // Whether an expansion begun at a reached position can still go on.
    let mut open = false;
    for (at, byte) in uri.iter().enumerate() {
        let starts = match operator.first() {
            None => reached[at],
            Some(first) => reached[at] && *byte == first,
        };
        let continues = match operator.first() {
            None => (open || reached[at]) && operator.allows(*byte),
            Some(_) => open && operator.allows(*byte),
        };
        open = continues || (operator.first().is_some() && starts);
        if open {
            next[at + 1] = true;
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_text_must_appear_as_written() {
        assert!(matches("notes:///7", "notes:///7"));
        assert!(!matches("notes:///7", "notes:///8"));
        assert!(!matches("notes:///7", "notes:///7x"));
        assert!(!matches("notes:///7", "notes:///"));
    }

    #[test]
    fn a_simple_variable_is_one_segment() {
        let template = "notes:///{id}";
        assert!(matches(template, "notes:///7"));
        assert!(matches(template, "notes:///a-b_c.d~e%20f"));
        assert!(matches(template, "notes:///"), "an undefined id");
        assert!(matches(template, "notes:///été"));
        assert!(!matches(template, "other:///x"));
        assert!(!matches(template, "notes:///a/b"));
        assert!(!matches(template, "notes:///a?b"));
        assert!(!matches(template, "notes:///a#b"));
        assert!(matches(
            "users://{org}/{id}/profile",
            "users://acme/42/profile"
        ));
        assert!(!matches(
            "users://{org}/{id}/profile",
            "users://acme/42/settings"
        ));
        assert!(matches("map:{x,y}", "map:1024,768"));
    }

    #[test]
    fn reserved_and_fragment_expansions_hold_any_uri_characters() {
        assert!(matches("file:///{+path}", "file:///docs/a/b.txt"));
        assert!(matches("file:///{+path}", "file:///a?x=1#top"));
        assert!(!matches("file:///{+path}", "files:///a"));
        assert!(matches("doc://x{#section}", "doc://x#intro/part"));
        assert!(matches("doc://x{#section}", "doc://x"));
        assert!(!matches("doc://x{#section}", "doc://x/intro"));
    }

    #[test]
    fn label_path_and_parameter_expansions() {
        assert!(matches("dns://{host}{.domain*}", "dns://www.example.com"));
        assert!(matches("repo://x{/path*}", "repo://x/src/lib.rs"));
        assert!(matches("repo://x{/path*}", "repo://x"));
        assert!(!matches("repo://x{/path*}", "repo://xy"));
        assert!(matches("m://a{;x,y}", "m://a;x=1;y=2"));
        assert!(!matches("m://a{;x,y}", "m://a/b"));
    }

    #[test]
    fn query_forms() {
        let template = "search://items{?q,limit}";
        assert!(matches(template, "search://items?q=cat&limit=5"));
        assert!(matches(template, "search://items"));
        assert!(!matches(template, "search://items?q=cat#frag"));
        assert!(!matches(template, "search://items/q"));
        let continued = "search://items?fixed=1{&q}";
        assert!(matches(continued, "search://items?fixed=1&q=x"));
        assert!(!matches(continued, "search://items?fixed=2&q=x"));
    }

    #[test]
    fn adjacent_expressions_and_prefixes() {
        assert!(matches("x://{a}{b}", "x://ab"));
        assert!(matches("x://{a:3}/{+rest}", "x://abc/d/e"));
        assert!(matches("x://{a}.{b}", "x://one.two"));
        assert!(!matches("x://{a}.{b}", "x://one/two"));
    }

    #[test]
    fn unpaired_braces_are_literal_text() {
        assert!(matches("x://{a", "x://{a"));
        assert!(!matches("x://{a", "x://b"));
        assert!(matches("x://a}", "x://a}"));
        assert!(matches("x://{a{b}", "x://{a7"));
    }

    #[test]
    fn long_uris_match_in_linear_passes() {
        let template = "x://{a}{b}{c}{d}{e}{f}{g}{h}/end";
        let uri = format!("x://{}", "a".repeat(2048));
        assert!(!matches(template, &uri));
        assert!(matches(template, &format!("{uri}/end")));
    }
}

//! URI templates (RFC 6570) as resource templates use them, matched the
//! other way round: given a URI a client asked to read, which template does
//! it fit, and what are its variables?
//!
//! Only the forms resource templates use in practice are accepted: literal
//! text with `{name}` (level 1, simple expansion: a value never holds `/`,
//! `?` or `#`) and `{+name}` (reserved expansion, for paths: a value may hold
//! `/`). Two expressions must be separated by literal text, so a URI splits
//! one way only; anything else is refused when the app is built, naming the
//! template, rather than matched wrongly at run time.

use std::collections::BTreeMap;

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Variable { name: String, reserved: bool },
}

impl UriTemplate {
    /// Parses `template`; the error says what is wrong, for the app's author.
    pub(crate) fn parse(template: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                None => {
                    parts.push(Part::Literal(rest.to_owned()));
                    break;
                }
                Some(at) if rest[at..].starts_with('}') => {
                    return Err(format!(
                        "a \"}}\" at byte {} closes no expression",
                        template.len() - rest.len() + at
                    ));
                }
                Some(at) => {
                    if at > 0 {
                        parts.push(Part::Literal(rest[..at].to_owned()));
                    }
                    let after = &rest[at + 1..];
                    let Some(end) = after.find('}') else {
                        return Err("an expression opened with \"{\" is never closed".to_owned());
                    };
                    let expression = &after[..end];
                    if matches!(parts.last(), Some(Part::Variable { .. })) {
                        return Err(format!(
                            "the expression {{{expression}}} follows another one directly; separate them with literal text so that a URI splits one way only"
                        ));
                    }
                    let variable = variable(expression)?;
                    if let Part::Variable { name, .. } = &variable
                        && parts.iter().any(|part| matches!(part, Part::Variable { name: seen, .. } if seen == name))
                    {
                        return Err(format!("the variable {name:?} appears twice"));
                    }
                    parts.push(variable);
                    rest = &after[end + 1..];
                }
            }
        }
        Ok(Self { parts })
    }

    /// The names of the template's variables, in order.
    pub(crate) fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|part| match part {
            Part::Variable { name, .. } => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The variables of `uri` when it fits the template (each value
    /// percent-decoded), or `None`.
    pub(crate) fn matches(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        let mut found = Vec::new();
        if !match_parts(&self.parts, uri, &mut found) {
            return None;
        }
        found
            .into_iter()
            .map(|(name, raw)| Some((name.to_owned(), percent_decode(raw)?)))
            .collect()
    }
}

/// One expression's inside: `name` or `+name`.
fn variable(expression: &str) -> Result<Part, String> {
    let (reserved, name) = match expression.strip_prefix('+') {
        Some(name) => (true, name),
        None => (false, expression),
    };
    if let Some(operator) = name.chars().next().filter(|c| "#./;?&=,!@|".contains(*c)) {
        return Err(format!(
            "the expression {{{expression}}} uses the operator {operator:?}; only {{name}} and {{+name}} are supported"
        ));
    }
    if name.contains(',') || name.contains(':') || name.contains('*') {
        return Err(format!(
            "the expression {{{expression}}} has a list or a modifier; only one plain variable per expression is supported"
        ));
    }
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '%');
    if !valid {
        return Err(format!(
            "the expression {{{expression}}} does not name a variable (letters, digits, \"_\" and \".\")"
        ));
    }
    Ok(Part::Variable {
        name: name.to_owned(),
        reserved,
    })
}

/// Matches `uri` against `parts` whole, collecting raw variable values. A
/// variable takes the shortest value after which the rest still matches.
fn match_parts<'t, 'u>(
    parts: &'t [Part],
    uri: &'u str,
    found: &mut Vec<(&'t str, &'u str)>,
) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return uri.is_empty();
    };
    match first {
        Part::Literal(literal) => uri
            .strip_prefix(literal.as_str())
            .is_some_and(|after| match_parts(rest, after, found)),
        Part::Variable { name, reserved } => {
            let fits =
                |value: &str| !value.is_empty() && (*reserved || !value.contains(['/', '?', '#']));
            // Parsing guarantees that a variable is last or followed by
            // literal text.
            let Some(Part::Literal(next)) = rest.first() else {
                if fits(uri) {
                    found.push((name, uri));
                    return true;
                }
                return false;
            };
            // Every place the literal starts, overlapping ones included.
            let mut from = 0;
            while let Some(offset) = uri[from..].find(next.as_str()) {
                let at = from + offset;
                from = at + uri[at..].chars().next().map_or(1, char::len_utf8);
                let value = &uri[..at];
                if value.is_empty() {
                    continue;
                }
                if !fits(value) {
                    // A longer value holds the same forbidden character.
                    return false;
                }
                found.push((name, value));
                if match_parts(rest, &uri[at..], found) {
                    return true;
                }
                found.pop();
            }
            false
        }
    }
}

/// `%XX` sequences decoded; `None` when the result is not UTF-8. A `%` not
/// followed by two hex digits stays as it is.
fn percent_decode(raw: &str) -> Option<String> {
    if !raw.contains('%') {
        return Some(raw.to_owned());
    }
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let hex = |offset: usize| {
            bytes
                .get(index + offset)
                .and_then(|b| (*b as char).to_digit(16))
        };
        match (bytes[index], hex(1), hex(2)) {
            (b'%', Some(high), Some(low)) => {
                decoded.push(u8::try_from(high * 16 + low).ok()?);
                index += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8(decoded).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
        let template = UriTemplate::parse(template).expect("a valid template");
        template
            .matches(uri)
            .map(|found| found.into_iter().collect())
    }

    fn pair(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn a_simple_variable_takes_one_segment() {
        assert_eq!(
            vars("test://template/{id}/data", "test://template/123/data"),
            Some(vec![pair("id", "123")])
        );
        assert_eq!(
            vars("test://template/{id}/data", "test://template/1/2/data"),
            None
        );
        assert_eq!(
            vars("test://template/{id}/data", "test://template//data"),
            None
        );
        assert_eq!(
            vars("test://template/{id}/data", "test://template/123/data/more"),
            None
        );
        assert_eq!(
            vars("test://template/{id}/data", "other://template/123/data"),
            None
        );
    }

    #[test]
    fn several_variables_split_at_their_literals() {
        assert_eq!(
            vars("notes://{folder}/{id}.md", "notes://work/plan.v2.md"),
            Some(vec![pair("folder", "work"), pair("id", "plan.v2")])
        );
        assert_eq!(
            vars("users/{user}?tab={tab}", "users/ada?tab=repos"),
            Some(vec![pair("tab", "repos"), pair("user", "ada")])
        );
    }

    #[test]
    fn a_trailing_variable_takes_the_rest_but_no_slash() {
        assert_eq!(
            vars("notes:///{id}", "notes:///42"),
            Some(vec![pair("id", "42")])
        );
        assert_eq!(vars("notes:///{id}", "notes:///4/2"), None);
        assert_eq!(vars("notes:///{id}", "notes:///"), None);
    }

    #[test]
    fn a_reserved_variable_spans_slashes() {
        assert_eq!(
            vars("file:///{+path}", "file:///home/ada/notes.txt"),
            Some(vec![pair("path", "home/ada/notes.txt")])
        );
        assert_eq!(
            vars("repo://{+path}/README", "repo://a/b/README"),
            Some(vec![pair("path", "a/b")])
        );
    }

    #[test]
    fn values_are_percent_decoded() {
        assert_eq!(
            vars("search://{query}", "search://caf%C3%A9%20au%20lait"),
            Some(vec![pair("query", "café au lait")])
        );
        assert_eq!(
            vars("search://{query}", "search://100%"),
            Some(vec![pair("query", "100%")])
        );
        assert_eq!(vars("search://{query}", "search://%FF"), None, "not UTF-8");
    }

    #[test]
    fn a_split_point_inside_a_repeated_literal_is_found() {
        assert_eq!(vars("x://{v}aa", "x://baaa"), Some(vec![pair("v", "ba")]));
    }

    #[test]
    fn a_template_without_variables_matches_itself_only() {
        assert_eq!(vars("test://static", "test://static"), Some(vec![]));
        assert_eq!(vars("test://static", "test://static2"), None);
    }

    #[test]
    fn unsupported_or_broken_templates_are_refused_with_the_reason() {
        let refused = |template: &str| UriTemplate::parse(template).expect_err(template);
        assert!(refused("a://{id").contains("never closed"));
        assert!(refused("a://id}").contains("closes no expression"));
        assert!(refused("a://{}").contains("does not name a variable"));
        assert!(refused("a://{#frag}").contains("operator"));
        assert!(refused("a://{?q}").contains("operator"));
        assert!(refused("a://{a,b}").contains("list or a modifier"));
        assert!(refused("a://{id:3}").contains("list or a modifier"));
        assert!(refused("a://{a}{b}").contains("separate them"));
        assert!(refused("a://{id}/{id}").contains("twice"));
    }

    #[test]
    fn variables_are_listed_in_order() {
        let template = UriTemplate::parse("x://{b}/{a}").expect("valid");
        assert_eq!(template.variables().collect::<Vec<_>>(), ["b", "a"]);
    }
}

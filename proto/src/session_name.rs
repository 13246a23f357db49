//! A session's name: what its tools and prompts are prefixed with in its
//! owner's one-URL view (`{name}__{tool}`), the same rule for every surface
//! that accepts one (gRPC, REST, the app packages).
//!
//! A name is a valid tool name of its own (so that the prefixed names stay
//! valid MCP tool names), kept short (so that a prefixed name fits MCP's
//! 128 characters for the tools most apps declare) and free of `__` (so
//! that `{name}__{tool}` splits at its first `__`, whatever the tool is
//! called). An app that names none gets one made from what it already
//! sends: its device's name, else the device id, else `app`.

/// The longest name.
pub const MAX_NAME_LEN: usize = 32;

/// What separates a session's name from its tool's or prompt's name in the
/// view.
pub const SEPARATOR: &str = "__";

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("name {}: a session name has 1 to {MAX_NAME_LEN} characters", crate::escape::quoted(.0))]
    Length(String),
    #[error(
        "name {}: a session name is made of A-Z, a-z, 0-9, `_` and `-`, starts with a letter or digit and holds no `__` (it prefixes tool names as `{{name}}__{{tool}}`)",
        crate::escape::quoted(.0)
    )]
    Characters(String),
}

/// Checks a name an app gave.
pub fn validate(name: &str) -> Result<(), NameError> {
    if !(1..=MAX_NAME_LEN).contains(&name.len()) {
        return Err(NameError::Length(name.to_owned()));
    }
    let allowed = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    let starts_well = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric());
    if !allowed || !starts_well || name.contains(SEPARATOR) {
        return Err(NameError::Characters(name.to_owned()));
    }
    Ok(())
}

/// The name of a session whose app gave none: the first of `candidates`
/// (the device's name, then its id) that leaves something once made valid:
/// letters and digits kept, every other run of characters one `_`, cut to
/// [`MAX_NAME_LEN`]; `app` when none does.
pub fn default_name<'a>(candidates: impl IntoIterator<Item = &'a str>) -> String {
    candidates
        .into_iter()
        .map(sanitized)
        .find(|name| !name.is_empty())
        .unwrap_or_else(|| "app".to_owned())
}

fn sanitized(text: &str) -> String {
    let mut name = String::with_capacity(text.len().min(MAX_NAME_LEN));
    let mut gap = false;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '-' {
            if gap && !name.is_empty() {
                name.push('_');
            }
            gap = false;
            name.push(c);
        } else {
            gap = true;
        }
        if name.len() >= MAX_NAME_LEN {
            break;
        }
    }
    name.truncate(MAX_NAME_LEN);
    let trimmed = name.trim_start_matches('-').trim_end_matches('_');
    trimmed.to_owned()
}

/// `name` if `taken` says it is free, else the first free `{name}_2`,
/// `{name}_3`, ... (the base cut so that the suffix fits).
pub fn first_free(name: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(name) {
        return name.to_owned();
    }
    (2_u32..)
        .map(|n| {
            let suffix = format!("_{n}");
            let mut base = name.to_owned();
            base.truncate(MAX_NAME_LEN - suffix.len());
            let base = base.trim_end_matches('_');
            format!("{base}{suffix}")
        })
        .find(|candidate| !taken(candidate))
        .unwrap_or_else(|| name.to_owned())
}

/// `{name}__{item}`: a tool's or prompt's name in the view.
pub fn prefixed(name: &str, item: &str) -> String {
    let mut prefixed = String::with_capacity(name.len() + SEPARATOR.len() + item.len());
    prefixed.push_str(name);
    prefixed.push_str(SEPARATOR);
    prefixed.push_str(item);
    prefixed
}

/// The session name and the item's own name of a prefixed name.
pub fn split(prefixed: &str) -> Option<(&str, &str)> {
    prefixed
        .split_once(SEPARATOR)
        .filter(|(name, item)| !name.is_empty() && !item.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_short_tool_names_without_the_separator() {
        for good in ["notes", "Notes-2", "a", "phone_app", &"x".repeat(32)] {
            assert_eq!(validate(good), Ok(()), "{good}");
        }
        assert!(matches!(validate(""), Err(NameError::Length(_))));
        assert!(matches!(
            validate(&"x".repeat(33)),
            Err(NameError::Length(_))
        ));
        for bad in [
            "no__te",
            "_notes",
            "-notes",
            "my notes",
            "notes.app",
            "café",
        ] {
            assert!(
                matches!(validate(bad), Err(NameError::Characters(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_default_is_made_from_the_first_usable_candidate() {
        assert_eq!(
            default_name(["Anna's MacBook Pro", "d-1"]),
            "Anna_s_MacBook_Pro"
        );
        assert_eq!(default_name(["  ", "Pixel 7"]), "Pixel_7");
        assert_eq!(default_name(["___", "--"]), "app");
        assert_eq!(default_name(["été"]), "t");
        let long = default_name(["a very long device name that goes on and on"]);
        assert!(long.len() <= MAX_NAME_LEN);
        for made in [
            default_name(["Anna's MacBook Pro"]),
            default_name(["x__y"]),
            long,
            default_name(["-a-"]),
        ] {
            assert_eq!(validate(&made), Ok(()), "{made}");
        }
    }

    #[test]
    fn a_taken_name_gets_the_first_free_suffix() {
        let taken = ["notes", "notes_2"];
        assert_eq!(first_free("notes", |n| taken.contains(&n)), "notes_3");
        assert_eq!(first_free("mail", |n| taken.contains(&n)), "mail");
        let long = "y".repeat(32);
        let free = first_free(&long, |n| n == long);
        assert_eq!(free.len(), 32);
        assert!(free.ends_with("_2"));
        assert_eq!(validate(&free), Ok(()));
    }

    #[test]
    fn a_prefixed_name_splits_at_its_first_separator() {
        let name = prefixed("notes", "find__all");
        assert_eq!(name, "notes__find__all");
        assert_eq!(split(&name), Some(("notes", "find__all")));
        assert_eq!(split("plain"), None);
        assert_eq!(split("__x"), None);
        assert_eq!(split("x__"), None);
    }
}

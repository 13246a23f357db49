//! Fields with two spellings: the documented snake_case one and the original
//! implementation's camelCase one (`device_id` / `deviceId`,
//! `request_id` / `requestId`, ...).
//!
//! Apps written against either server, and apps that send both spellings so
//! one build works against both, must all be understood. Each spelling is
//! therefore deserialized into a field of its own (serde's `alias` would
//! refuse an object carrying both), and [`pick`] merges the pair: one
//! spelling, or both with the same value, is accepted; two different values
//! are refused with a message naming both keys.

/// The field's value, from whichever of its two spellings carries it.
///
/// Fails when both spellings are present with different values; the message
/// names both keys.
pub fn pick<T: PartialEq>(
    snake_key: &str,
    snake: Option<T>,
    camel_key: &str,
    camel: Option<T>,
) -> Result<Option<T>, String> {
    match (snake, camel) {
        (Some(snake), Some(camel)) if snake != camel => Err(format!(
            "\"{snake_key}\" and \"{camel_key}\" are two spellings of one field but carry different values: send one, or the same value in both"
        )),
        (Some(value), _) | (None, Some(value)) => Ok(Some(value)),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::pick;

    #[test]
    fn one_spelling_or_agreeing_both_are_accepted() {
        assert_eq!(pick("a_b", Some(1), "aB", None), Ok(Some(1)));
        assert_eq!(pick("a_b", None, "aB", Some(2)), Ok(Some(2)));
        assert_eq!(pick("a_b", Some(3), "aB", Some(3)), Ok(Some(3)));
        assert_eq!(pick::<u8>("a_b", None, "aB", None), Ok(None));
    }

    #[test]
    fn conflicting_spellings_name_both_keys() {
        let error = pick("a_b", Some(1), "aB", Some(2)).expect_err("conflict");
        assert!(
            error.contains("\"a_b\"") && error.contains("\"aB\""),
            "{error}"
        );
    }
}

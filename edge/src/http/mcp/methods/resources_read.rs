//! `resources/read`: the app reads one of its resources (or a URI of its
//! templates). A URI the session does not serve is refused before the app
//! sees it, with the error the caller's revision names.

use super::app_served::AppServed;

pub(super) static METHOD: AppServed = AppServed {
    method: "resources/read",
    target: |params| target(params, "uri"),
    in_rounds: true,
    cacheable: true,
};

/// The string param `key` (`uri` or `name`) of `params`, or why it is not
/// there; the rest of the params is skipped unread.
pub(super) fn target(params: &str, key: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Named {
        #[serde(default)]
        uri: Option<String>,
        #[serde(default)]
        name: Option<String>,
    }
    let named: Named = serde_json::from_str(params).map_err(|error| error.to_string())?;
    let value = if key == "uri" { named.uri } else { named.name };
    value.ok_or_else(|| format!("\"{key}\" is missing"))
}

//! `completion/complete`: the app suggests values for a prompt's or a
//! resource template's argument. It goes in no rounds at 2026-07-28: a
//! completion is answered while the user types.

use serde::Deserialize;

use super::app_served::AppServed;

pub(super) static METHOD: AppServed = AppServed {
    method: "completion/complete",
    target,
    in_rounds: false,
    cacheable: false,
};

/// The prompt or template the completion is for.
fn target(params: &str) -> Result<String, String> {
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "ref")]
        reference: Reference,
    }
    #[derive(Deserialize)]
    struct Reference {
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        uri: Option<String>,
    }
    let params: Params = serde_json::from_str(params).map_err(|error| error.to_string())?;
    // A kind of reference newer than this build names neither: the app decides.
    Ok(params
        .reference
        .name
        .or(params.reference.uri)
        .unwrap_or_default())
}

//! `prompts/get`: the app renders one of its prompts with the client's
//! arguments.

use super::app_served::AppServed;
use super::resources_read::target;

pub(super) static METHOD: AppServed = AppServed {
    method: "prompts/get",
    target: |params| target(params, "name"),
    in_rounds: true,
    cacheable: false,
};

//! `server/discover` (2026-07-28): the revisions this server speaks and
//! what it serves, in place of `initialize`.

use rmcp::model::DiscoverResult;

use super::initialize::server_info;
use crate::http::mcp::transport::answer::Answer;
use crate::http::mcp::transport::request::{Request, supported_versions};

pub(super) fn answer(context: &super::Context<'_>, request: &Request) -> Answer {
    let mut info = server_info();
    if context.state.tasks.enabled() {
        info.capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                Default::default(),
            );
    }
    let result = DiscoverResult::from_server_info(supported_versions(), info);
    Answer::result(&request.id, result)
}

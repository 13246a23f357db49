//! `server/discover` (2026-07-28): the revisions this server speaks and
//! what it serves, in place of `initialize`.

use rmcp::model::DiscoverResult;

use super::initialize::server_info;
use crate::http::mcp::transport::answer::Answer;
use crate::http::mcp::transport::request::{Request, supported_versions};

pub(super) fn answer(request: &Request) -> Answer {
    let result = DiscoverResult::from_server_info(supported_versions(), server_info());
    Answer::result(&request.id, result)
}

//! Requests the app answers other than `tools/call` (`resources/read`,
//! `prompts/get`, `completion/complete`, and any later MCP method): one
//! generic `McpRequest` on the bridge, answered by an `McpResult`, so a new
//! method needs no new message. They share everything a tool call has: the
//! session's call limit, the timeout, cancellation, metrics (by method),
//! the audit log and traces.

use tracing::Instrument;

use super::Hub;
use super::invoke::CallCounted;
use crate::call::CallContext;
use crate::delivery::{Asked, RemoteCall};
use crate::directory::SessionRecord;
use crate::escape::Outside;
use crate::metrics::CallOutcome;
use crate::outcome::{InvokeError, McpReply};
use crate::proto::{self, proxy_message};
use crate::trace;

/// An MCP request for the app.
#[derive(Debug)]
pub struct AppRequest<'a> {
    /// The MCP method, for example `resources/read`.
    pub method: &'a str,
    /// What it names, for checks, the audit log and spans: the URI of a
    /// read, the name of a prompt; empty when it names nothing.
    pub target: &'a str,
    /// The request's params as JSON text (an object), passed on exactly.
    pub params_json: String,
}

impl Hub {
    /// Sends an MCP request to the session's app and waits for its result
    /// or JSON-RPC error. A read of a URI the session neither declares nor
    /// can match with a template, and a prompt it does not declare, are
    /// refused here without troubling the app.
    ///
    /// A caller that stops waiting (drops the future) cancels the request:
    /// the app is told to stop working on it.
    pub async fn request(
        &self,
        session_id: &str,
        request: AppRequest<'_>,
        context: CallContext,
    ) -> Result<McpReply, InvokeError> {
        let span = trace::span(|| {
            tracing::info_span!(
                "app_request",
                session = Outside::session(session_id).field(),
                method = Outside::new(request.method).field(),
                outcome = tracing::field::Empty,
            )
        });
        let mut counted = CallCounted::new(
            &self.inner.metrics,
            session_id,
            Some(request.method),
            request.target,
            context.origin,
            context.caller.identity.clone(),
        );
        let outcome = self
            .request_routed(session_id, request, context, &mut counted)
            .instrument(span.clone())
            .await;
        let label = counted.finish(&outcome);
        span.record("outcome", label.as_str());
        outcome
    }

    async fn request_routed(
        &self,
        session_id: &str,
        request: AppRequest<'_>,
        context: CallContext,
        counted: &mut CallCounted<'_>,
    ) -> Result<McpReply, InvokeError> {
        let record = self.record_for_call(session_id).await?;
        check_target(&record, &request)?;
        if let Some((_, bridge)) = self.inner.local_bridge(&record.id) {
            counted.transport = bridge.origin().transport;
            return self.request_local(&record, request, context).await;
        }
        let AppRequest {
            method,
            target,
            params_json,
        } = request;
        let call = RemoteCall {
            session_id: &record.id,
            asked: Asked::Request {
                method,
                target,
                params_json,
            },
            context,
            timeout: self.inner.config.tool_timeout,
        };
        self.deliver_elsewhere(call, method, counted).await
    }

    /// Sends a request that arrived from another node to the bridge
    /// attached here; never forwards it again.
    pub async fn request_here(
        &self,
        session_id: &str,
        request: AppRequest<'_>,
        context: CallContext,
    ) -> Result<McpReply, InvokeError> {
        let record = self.record_for_call(session_id).await?;
        self.request_local(&record, request, context).await
    }

    /// Sends a request to the bridge attached here; never forwards it.
    pub(super) async fn request_local(
        &self,
        record: &SessionRecord,
        request: AppRequest<'_>,
        context: CallContext,
    ) -> Result<McpReply, InvokeError> {
        let AppRequest {
            method,
            params_json,
            ..
        } = request;
        let CallContext {
            client,
            caller,
            progress,
            trace_parent,
            ..
        } = context;
        let (prepared, message) = self.prepare(
            record,
            None,
            method,
            self.inner.config.tool_timeout,
            &trace_parent,
            |request_id, trace_parent| {
                proxy_message::Kind::McpRequest(proto::McpRequest {
                    session_id: record.id.to_string(),
                    request_id: request_id.to_owned(),
                    method: method.to_owned(),
                    params_json,
                    client: Some(client),
                    trace_parent,
                    caller: Some(caller.to_proto()),
                })
            },
        )?;
        let outcome = self
            .round_trip(&prepared, message, |bridge, request_id| {
                bridge.register_mcp(request_id, method, progress)
            })
            .await;
        tracing::debug!(
            outcome = CallOutcome::of(&outcome).as_str(),
            "app request answered"
        );
        outcome
    }
}

/// Refuses a request for something the session does not declare: a read
/// of a URI that is neither a declared resource nor an expansion of one of
/// its templates (which value the app serves is its own decision), a
/// prompt it does not offer.
fn check_target(record: &SessionRecord, request: &AppRequest<'_>) -> Result<(), InvokeError> {
    let catalog = record.catalog();
    match request.method {
        "resources/read" if !catalog.serves(request.target) => Err(InvokeError::UnknownResource {
            uri: request.target.to_owned(),
        }),
        "prompts/get" if catalog.prompt(request.target).is_none() => {
            let names: Vec<&str> = catalog.prompts.iter().map(|p| &*p.name).collect();
            Err(InvokeError::UnknownPrompt {
                name: request.target.to_owned(),
                available: if names.is_empty() {
                    "no prompts".into()
                } else {
                    names.join(", ")
                },
            })
        }
        _ => Ok(()),
    }
}

//! Starting the proxy's requests (tool calls, MCP requests) each on its own
//! task within the app's limits: so many run, as many again wait, and past
//! that a request is answered at once that the app is busy.

use std::future::Future;
use std::sync::Arc;

use openclaw_proxy_proto::v1::{AppMessage, InvokeTool, McpRequest, ToolResult, app_message};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use super::shared::{Shared, send_now};
use crate::call::{InFlight, Scope};
use crate::declarations::Declarations;
use crate::mcp;
use crate::mcp_error::McpError;
use crate::proxy::Bridge;
use crate::tool_call;

impl Shared {
    /// Starts one call on its own task, or answers at once when the app
    /// already holds as many calls as it accepts.
    pub(super) fn start_call(&self, invoke: InvokeTool, bridge: &Bridge, scope: &Scope) {
        let Ok(admitted) = self.admitted.clone().try_acquire_owned() else {
            let busy = ToolResult {
                request_id: invoke.request_id,
                ok: false,
                content_json: String::new(),
                error: self.busy(),
            };
            send_now(bridge, app_message::Kind::Result(busy));
            return;
        };
        self.spawn(admitted, invoke, bridge, scope, tool_call::run);
    }

    /// Starts one MCP request (`resources/read`, ...) like a call: on its
    /// own task, within the same limits.
    pub(super) fn start_mcp_request(&self, request: McpRequest, bridge: &Bridge, scope: &Scope) {
        let Ok(admitted) = self.admitted.clone().try_acquire_owned() else {
            let busy = McpError::internal(self.busy());
            let revision = request
                .client
                .as_ref()
                .map(|client| client.protocol_version.as_str());
            let answer = mcp::answer(request.request_id.clone(), Err(busy), revision);
            send_now(bridge, app_message::Kind::McpResult(answer));
            return;
        };
        self.spawn(admitted, request, bridge, scope, mcp::run);
    }

    /// What a request turned away hears.
    fn busy(&self) -> String {
        format!(
            "The app is busy: it is already running {} calls and has as many waiting. Try again shortly.",
            self.max_concurrent_calls
        )
    }

    /// Runs an admitted request with `run` on its own task once it may run,
    /// with the declarations of now; the admission is held until it ends.
    fn spawn<R, F, Fut>(
        &self,
        admitted: OwnedSemaphorePermit,
        request: R,
        bridge: &Bridge,
        scope: &Scope,
        run: F,
    ) where
        R: Send + 'static,
        F: FnOnce(Arc<Declarations>, R, Outbound, InFlight, Scope, OwnedSemaphorePermit) -> Fut
            + Send
            + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let declarations = self.declarations();
        let running = self.running.clone();
        let outbound = bridge.outbound.clone();
        let in_flight = self.in_flight.clone();
        let scope = scope.clone();
        tokio::spawn(async move {
            let _admitted = admitted;
            // The semaphore is never closed, so this cannot fail.
            let Ok(permit) = running.acquire_owned().await else {
                return;
            };
            run(declarations, request, outbound, in_flight, scope, permit).await;
        });
    }
}

/// The queue of the bridge a request came on, which its answer takes.
type Outbound = mpsc::Sender<AppMessage>;

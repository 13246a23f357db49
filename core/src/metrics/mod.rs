//! The proxy's Prometheus metrics, owned by one [`Metrics`] per hub.
//!
//! Why a registry per instance rather than a global recorder: tests run many
//! servers in one process and assert exact counts, and an embedding program
//! may run several hubs. Every labelled series that the hot path touches is
//! resolved once, when the metrics are built, so a tool call costs a few
//! atomic increments and one histogram observation: no label hashing, no
//! allocation. Label values are small enums, never strings from outside.
//!
//! How a call's end becomes an outcome label is decided in one place,
//! [`CallOutcome::of`]; the names and meanings are listed in
//! `docs/observability.md` ("Metrics").

use std::fmt::Write as _;
use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::progress::Logged;

/// The content type of [`Metrics::render`]'s output (OpenMetrics text,
/// which Prometheus scrapes natively).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the call-duration buckets, in seconds: fine below a
/// millisecond (a call on a local bridge takes a few hundred microseconds),
/// coarse up to the default tool timeout.
const DURATION_BUCKETS: [f64; 19] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0, 120.0,
];

/// Writes a label value given as a static name.
macro_rules! label_value {
    ($type:ty) => {
        impl EncodeLabelValue for $type {
            fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
                encoder.write_str(self.as_str())
            }
        }
    };
}

mod client_requests;
mod labels;
mod policy;

pub use client_requests::AskOutcome;
use client_requests::ClientRequestMetrics;
pub use labels::{Answered, CallOutcome, DropReason, McpMethod, Surface, Transport};
use labels::{
    LoggedLabels, McpLabels, OutcomeLabels, ReasonLabels, RequestLabels, SurfaceLabels,
    TransportLabels,
};
pub use policy::PolicyMetrics;

/// Registers what apps answer besides tool calls and the log records they
/// write.
fn register_app_metrics(
    registry: &mut Registry,
) -> (Family<RequestLabels, Counter>, [Counter; Logged::ALL.len()]) {
    let app_requests = Family::<RequestLabels, Counter>::default();
    registry.register(
        "app_requests",
        "MCP requests other than tools/call that the app answers (resources/read, prompts/get, completion/complete), by method and how they ended",
        app_requests.clone(),
    );
    let logs = Family::<LoggedLabels, Counter>::default();
    let app_logs = Logged::ALL.map(|outcome| logs.get_or_create(&LoggedLabels { outcome }).clone());
    registry.register(
        "app_log_records",
        "Log records apps wrote during calls: forwarded to the client, forwarded after older events gave way (thinned), or dropped below the client's level (unwanted)",
        logs,
    );
    (app_requests, app_logs)
}

/// The metrics of one hub and the edge in front of it.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    sessions: Gauge,
    nats_connected: Option<Gauge>,
    calls_forwarded: Option<Counter>,
    bridges: Family<TransportLabels, Gauge>,
    tool_calls: [Counter; CallOutcome::ALL.len()],
    tool_call_duration: Histogram,
    mcp_requests: Family<McpLabels, Counter>,
    app_requests: Family<RequestLabels, Counter>,
    app_logs: [Counter; Logged::ALL.len()],
    dropped: [Counter; DropReason::ALL.len()],
    auth_failures: [Counter; Surface::ALL.len()],
    client_requests: ClientRequestMetrics,
    policy: PolicyMetrics,
}

impl Metrics {
    /// A fresh set, all at zero. `cluster` adds the NATS connection gauge.
    pub fn new(cluster: bool) -> Self {
        let mut registry = Registry::with_prefix("openclaw_proxy");
        let sessions = Gauge::default();
        registry.register(
            "sessions",
            "Live sessions this node knows of (in cluster mode, the whole cluster's)",
            sessions.clone(),
        );
        let bridges = Family::<TransportLabels, Gauge>::default();
        for transport in [Transport::Grpc, Transport::Websocket] {
            let _ = bridges.get_or_create(&TransportLabels { transport });
        }
        registry.register(
            "bridges",
            "Bridges attached to this node, by transport",
            bridges.clone(),
        );
        let calls = Family::<OutcomeLabels, Counter>::default();
        let tool_calls =
            CallOutcome::ALL.map(|outcome| calls.get_or_create(&OutcomeLabels { outcome }).clone());
        registry.register(
            "tool_calls",
            "Tool calls received by this node, by how they ended",
            calls,
        );
        let tool_call_duration = Histogram::new(DURATION_BUCKETS);
        registry.register_with_unit(
            "tool_call_duration",
            "Time from receiving a tool call to its end, whatever the outcome",
            Unit::Seconds,
            tool_call_duration.clone(),
        );
        let mcp_requests = Family::<McpLabels, Counter>::default();
        registry.register(
            "mcp_requests",
            "MCP requests, by JSON-RPC method and HTTP status",
            mcp_requests.clone(),
        );
        let (app_requests, app_logs) = register_app_metrics(&mut registry);
        let client_requests = ClientRequestMetrics::register(&mut registry);
        let policy = PolicyMetrics::register(&mut registry);
        let drops = Family::<ReasonLabels, Counter>::default();
        let dropped =
            DropReason::ALL.map(|reason| drops.get_or_create(&ReasonLabels { reason }).clone());
        registry.register(
            "bridge_messages_dropped",
            "Bridge messages dropped instead of delivered, by reason",
            drops,
        );
        let failures = Family::<SurfaceLabels, Counter>::default();
        let auth_failures =
            Surface::ALL.map(|surface| failures.get_or_create(&SurfaceLabels { surface }).clone());
        registry.register(
            "auth_failures",
            "Requests refused for a missing or wrong token, by surface",
            failures,
        );
        let nats_connected = cluster.then(|| {
            let gauge = Gauge::default();
            registry.register(
                "nats_connected",
                "1 while this node is connected to NATS, else 0 (cluster mode)",
                gauge.clone(),
            );
            gauge
        });
        let calls_forwarded = cluster.then(|| {
            let counter = Counter::default();
            registry.register(
                "calls_forwarded",
                "Tool calls and app requests this node received for a bridge it does not hold, sent over NATS to the node holding it (cluster mode)",
                counter.clone(),
            );
            counter
        });
        Self {
            registry,
            sessions,
            nats_connected,
            calls_forwarded,
            bridges,
            tool_calls,
            tool_call_duration,
            mcp_requests,
            app_requests,
            app_logs,
            dropped,
            auth_failures,
            client_requests,
            policy,
        }
    }

    /// The operator's policy file's series.
    pub fn policy(&self) -> &PolicyMetrics {
        &self.policy
    }

    /// Counts a finished tool call and its duration.
    pub fn tool_call(&self, outcome: CallOutcome, duration: Duration) {
        self.tool_calls[outcome as usize].inc();
        self.tool_call_duration.observe(duration.as_secs_f64());
    }

    /// Counts a finished request the app answered (not a tool call).
    pub fn app_request(&self, method: McpMethod, outcome: CallOutcome) {
        self.app_requests
            .get_or_create(&RequestLabels { method, outcome })
            .inc();
    }

    /// A request of an app now waits for its client.
    pub fn client_request_asked(&self) {
        self.client_requests.asked();
    }

    /// Counts a request of an app to a client that ended (`was_pending`:
    /// it had been waiting for the client, and no longer does).
    pub fn client_request_ended(
        &self,
        method: Option<crate::asking::AskMethod>,
        outcome: AskOutcome,
        was_pending: bool,
    ) {
        self.client_requests.ended(method, outcome, was_pending);
    }

    /// Counts a client's answer that matched no waiting request (unknown,
    /// twice, late, another session's).
    pub fn client_answer_unmatched(&self) {
        self.client_requests
            .ended(None, AskOutcome::Unmatched, false);
    }

    /// Counts a 2026-07-28 retry whose `requestState` was refused.
    pub fn request_state_refused(&self) {
        self.client_requests
            .ended(None, AskOutcome::BadState, false);
    }

    /// Counts a call or request sent over NATS to another node's bridge.
    pub fn call_forwarded(&self) {
        if let Some(counter) = &self.calls_forwarded {
            counter.inc();
        }
    }

    /// Counts a log record an app wrote during a call.
    pub fn app_log(&self, outcome: Logged) {
        self.app_logs[outcome as usize].inc();
    }

    /// A bridge of `transport` attached (`+1`) or ended (`-1`).
    pub fn bridge(&self, transport: Transport, delta: i64) {
        self.bridges
            .get_or_create(&TransportLabels { transport })
            .inc_by(delta);
    }

    /// Counts an MCP request by method and HTTP status.
    pub fn mcp_request(&self, method: McpMethod, status: u16) {
        self.mcp_requests
            .get_or_create(&McpLabels { method, status })
            .inc();
    }

    /// Counts a dropped bridge message.
    pub fn dropped(&self, reason: DropReason) {
        self.dropped[reason as usize].inc();
    }

    /// Counts a refused credential.
    pub fn auth_failure(&self, surface: Surface) {
        self.auth_failures[surface as usize].inc();
    }

    /// The metrics in the OpenMetrics text format ([`CONTENT_TYPE`]), with
    /// the gauges that are read rather than counted set first.
    pub fn render(&self, sessions: usize, nats_connected: Option<bool>) -> String {
        self.sessions
            .set(i64::try_from(sessions).unwrap_or(i64::MAX));
        if let (Some(gauge), Some(connected)) = (&self.nats_connected, nats_connected) {
            gauge.set(i64::from(connected));
        }
        let mut text = String::with_capacity(4096);
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            // Writing to a String cannot fail; say so rather than panic.
            let _ = writeln!(text, "# encoding failed: {error}");
        }
        text
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_outcome_is_exposed_at_zero_before_any_call() {
        let metrics = Metrics::new(false);
        metrics.tool_call(CallOutcome::Timeout, Duration::from_micros(300));
        let text = metrics.render(2, None);
        for outcome in CallOutcome::ALL {
            let value = if outcome == CallOutcome::Timeout {
                1
            } else {
                0
            };
            let line = format!(
                "openclaw_proxy_tool_calls_total{{outcome=\"{}\"}} {value}",
                outcome.as_str()
            );
            assert!(text.contains(&line), "{line} missing from\n{text}");
        }
        assert!(text.contains("openclaw_proxy_sessions 2"), "{text}");
        assert!(
            text.contains("openclaw_proxy_tool_call_duration_seconds_bucket{le=\"0.0005\"} 1"),
            "{text}"
        );
        assert!(!text.contains("nats_connected"), "{text}");
        assert!(!text.contains("calls_forwarded"), "{text}");
    }
}

//! The app's requests to MCP clients (elicitation, sampling, roots): how
//! each ended, by method, and how many wait for a client now. The pending
//! gauge returning to zero is how a test (and an operator) sees that nothing
//! stays held after calls end.

use std::fmt::Write as _;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::{EncodeLabelValue, LabelValueEncoder};
use crate::asking::AskMethod;

/// How a request of the app to the client ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AskOutcome {
    /// The client answered with a result.
    Answered,
    /// The client answered with a JSON-RPC error.
    ClientError,
    /// The proxy refused it at once: the client cannot be asked that, the
    /// call has too many outstanding, or the request was malformed.
    Refused,
    /// The client did not answer in time.
    Expired,
    /// The call ended (answered, cancelled, timed out, its bridge or
    /// session gone) while the request was outstanding.
    Abandoned,
    /// A client's answer that matched no waiting request: an id the proxy
    /// never gave (or gave another session), an answer sent twice, or one
    /// that came after its request or call ended. Its method is not known
    /// (`other`).
    Unmatched,
    /// A 2026-07-28 retry whose `requestState` was refused: tampered,
    /// expired, another session's or another request's, or naming a call
    /// no longer waiting. Its method is not known (`other`).
    BadState,
}

impl AskOutcome {
    /// Every outcome, in label order.
    pub const ALL: [Self; 7] = [
        Self::Answered,
        Self::ClientError,
        Self::Refused,
        Self::Expired,
        Self::Abandoned,
        Self::Unmatched,
        Self::BadState,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::ClientError => "client_error",
            Self::Refused => "refused",
            Self::Expired => "expired",
            Self::Abandoned => "abandoned",
            Self::Unmatched => "unmatched",
            Self::BadState => "bad_state",
        }
    }
}
label_value!(AskOutcome);

impl EncodeLabelValue for AskMethod {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// The method of a request, or `other` for one the app may not send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AskLabel(pub Option<AskMethod>);

impl EncodeLabelValue for AskLabel {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        let name = self.0.map_or("other", AskMethod::as_str);
        encoder.write_str(name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, EncodeLabelSet)]
struct AskLabels {
    method: AskLabel,
    outcome: AskOutcome,
}

/// The series of the app's requests to clients.
#[derive(Debug)]
pub(super) struct ClientRequestMetrics {
    ended: Family<AskLabels, Counter>,
    pending: Gauge,
}

impl ClientRequestMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let ended = Family::<AskLabels, Counter>::default();
        registry.register(
            "client_requests",
            "Requests apps sent to MCP clients during calls (elicitation/create, sampling/createMessage, roots/list), by method and how they ended",
            ended.clone(),
        );
        let pending = Gauge::default();
        registry.register(
            "client_requests_pending",
            "Requests of apps that wait for an MCP client's answer now",
            pending.clone(),
        );
        Self { ended, pending }
    }

    pub(super) fn asked(&self) {
        self.pending.inc();
    }

    pub(super) fn ended(&self, method: Option<AskMethod>, outcome: AskOutcome, was_pending: bool) {
        if was_pending {
            self.pending.dec();
        }
        self.ended
            .get_or_create(&AskLabels {
                method: AskLabel(method),
                outcome,
            })
            .inc();
    }
}

//! Trace context: the proxy's spans, and the W3C `traceparent` that links
//! them to the MCP client's trace before and to the app's spans after.
//!
//! A tool call runs through three spans: the MCP request (edge), the
//! invocation ([`crate::Hub::invoke_json`]) and the bridge round trip (the
//! call on the app's bridge, or the request to the node that holds it). The
//! app receives a `traceparent` naming the round trip span as its parent,
//! so its own spans join the same trace; between nodes it travels in a NATS
//! header.
//!
//! Why a switch rather than always creating spans: OpenTelemetry export is
//! off unless configured, and then a call should cost nothing extra. The
//! binary calls [`enable`] when it installs the export layer; until then
//! [`span`] hands out disabled spans (no allocation, no subscriber call), and
//! an incoming `traceparent` is passed to the app unchanged, so the app
//! still joins the caller's trace through a proxy that exports nothing.
//!
//! The `traceparent` text is parsed and written here, on the API crate's
//! types, rather than through an SDK propagator: it is one fixed-format
//! header (version `00`), and the core then needs no SDK.

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns span creation on: called once, by the binary, when it installs the
/// OpenTelemetry layer.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether spans are exported.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The span `make` builds when export is on, else a disabled span.
#[inline]
pub fn span(make: impl FnOnce() -> Span) -> Span {
    if enabled() { make() } else { Span::none() }
}

/// A W3C `traceparent` (version `00`) as a span context; `None` when it is
/// malformed or names the all-zero trace or span.
pub fn parse(traceparent: &str) -> Option<SpanContext> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace, span, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Version 00 has exactly four fields; later versions may append more.
    if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    let lower_hex = |text: &str, len: usize| {
        text.len() == len && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if !lower_hex(version, 2)
        || !lower_hex(trace, 32)
        || !lower_hex(span, 16)
        || !lower_hex(flags, 2)
    {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok()?;
    let span_id = SpanId::from_hex(span).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let context = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & 1),
        true,
        TraceState::NONE,
    );
    context.is_valid().then_some(context)
}

/// The `traceparent` naming `context` as the parent.
pub fn format(context: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        context.trace_id(),
        context.span_id(),
        context.trace_flags().to_u8()
    )
}

/// Makes the remote span named by `traceparent` the parent of `span`, when
/// export is on and the value is well-formed. Must be called before `span`
/// is first entered.
pub fn set_remote_parent(span: &Span, traceparent: &str) {
    if !enabled() || traceparent.is_empty() {
        return;
    }
    if let Some(remote) = parse(traceparent) {
        let parent = opentelemetry::Context::new().with_remote_span_context(remote);
        if let Err(error) = span.set_parent(parent) {
            tracing::debug!(%error, "the caller's trace context could not be attached");
        }
    }
}

/// The `traceparent` to hand on from inside `span`: `span` itself when it is
/// exported, else the caller's own `incoming` value when well-formed, else
/// none (empty).
pub fn hand_on(span: &Span, incoming: &str) -> String {
    if enabled() {
        let context = span.context();
        let own = context.span().span_context().clone();
        if own.is_valid() {
            return format(&own);
        }
    }
    if !incoming.is_empty() && parse(incoming).is_some() {
        return incoming.trim().to_owned();
    }
    String::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traceparent_round_trips_and_rejects_malformed_values() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse(text).expect("valid");
        assert!(context.is_sampled());
        assert_eq!(format(&context), text);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
        ] {
            assert!(parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn without_export_the_incoming_value_is_handed_on() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        assert_eq!(hand_on(&Span::none(), text), text);
        assert_eq!(hand_on(&Span::none(), "garbage"), "");
    }
}

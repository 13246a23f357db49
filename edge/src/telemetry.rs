//! Where the server's logs and traces go: log lines on stderr as text or
//! JSON (`OPENCLAW_PROXY_LOG_FORMAT`), filtered by `RUST_LOG`, and, when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`)
//! is set, spans exported over OTLP/gRPC.
//!
//! The exporter reads the standard `OTEL_*` variables itself (endpoint,
//! headers, timeout, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`,
//! `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`); `OTEL_SDK_DISABLED=true` turns it
//! off. Spans have a filter of their own (the proxy's spans at INFO), so
//! `RUST_LOG=warn` quiets the logs without losing traces. Without an
//! endpoint no layer is installed and [`openclaw_proxy_core::trace`] creates
//! no spans: tracing costs nothing.
//!
//! With `RUST_LOG` unset or empty the filter is [`DEFAULT_FILTER`]: the
//! proxy's own lines at INFO (one audit line per call, one line per MCP
//! client that initializes, with its name and version).

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

use crate::config::LogFormat;

/// Why logging or tracing could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "cannot set up the OTLP trace exporter (check OTEL_EXPORTER_OTLP_ENDPOINT, e.g. http://collector:4317): {0}"
    )]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    #[error("a global log subscriber is already installed: {0}")]
    AlreadyInstalled(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps the trace exporter running; [`Telemetry::shutdown`] sends the
/// spans still buffered.
#[must_use = "dropping it without shutdown loses the last spans"]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Whether spans are exported.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes and stops the exporter.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown()
        {
            tracing::warn!(%error, "the last spans could not be exported");
        }
    }
}

/// Whether the environment asks for OTLP trace export.
fn export_configured() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|value| !value.trim().is_empty());
    let disabled = std::env::var("OTEL_SDK_DISABLED")
        .is_ok_and(|value| value.trim().eq_ignore_ascii_case("true"));
    !disabled && (set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
}

/// The log filter when `RUST_LOG` is unset or empty.
pub const DEFAULT_FILTER: &str = "info";

/// `RUST_LOG`'s filter, or [`DEFAULT_FILTER`] when it is unset or empty (an
/// empty value, as unit files and compose files write it, means the default).
fn env_filter() -> EnvFilter {
    match std::env::var("RUST_LOG") {
        Ok(value) if !value.trim().is_empty() => {
            EnvFilter::try_new(&value).unwrap_or_else(|error| {
                eprintln!(
                    "RUST_LOG={value:?} is not a log filter ({error}); using {DEFAULT_FILTER:?}"
                );
                EnvFilter::new(DEFAULT_FILTER)
            })
        }
        _ => EnvFilter::new(DEFAULT_FILTER),
    }
}

/// Installs the process's subscriber. Call inside the Tokio runtime (the
/// exporter's gRPC client needs it).
pub fn init(format: LogFormat) -> Result<Telemetry, TelemetryError> {
    let env_filter = env_filter();
    let logs = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(env_filter)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .with_filter(env_filter)
            .boxed(),
    };
    let provider = if export_configured() {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()?;
        let mut resource = Resource::builder();
        if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("openclaw-proxy");
        }
        Some(
            SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(resource.build())
                .build(),
        )
    } else {
        None
    };
    let spans = provider.as_ref().map(|provider| {
        let tracer = provider.tracer("openclaw-proxy");
        let ours = Targets::new()
            .with_target("openclaw_proxy_core", LevelFilter::INFO)
            .with_target("openclaw_proxy_edge", LevelFilter::INFO);
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(ours)
    });
    Registry::default().with(logs).with(spans).try_init()?;
    if provider.is_some() {
        openclaw_proxy_core::trace::enable();
    }
    Ok(Telemetry { provider })
}

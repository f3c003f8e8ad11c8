//! Exporting the `tracing` built-in's spans to an OpenTelemetry collector:
//! OTLP over HTTP/protobuf (`POST {endpoint}/v1/traces`), through
//! `tracing-opentelemetry`. Used by the `otlp` example and its test.
//!
//! The span names an exporter sees are the GenAI conventions' (`chat {model}`,
//! `execute_tool {tool}`, `invoke_agent`): the built-in sets `otel.name`, which
//! `tracing-opentelemetry` uses as the span's name, and `otel.kind`.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Registry;

/// The service name spans are reported under.
pub const SERVICE_NAME: &str = "tinyagents-example";

/// A tracer provider exporting to the collector at `endpoint`
/// (`http://localhost:4318`, OTLP/HTTP's usual port) in batches, from the
/// batch processor's own thread. Call [`SdkTracerProvider::shutdown`] (or
/// `force_flush`) before the program ends so the last batch is sent.
///
/// # Errors
/// When the exporter cannot be built (a malformed endpoint).
pub fn provider(endpoint: &str) -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .build()?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(SERVICE_NAME).build())
        .build())
}

/// A `tracing` subscriber sending every span to `provider` (install it with
/// `tracing::subscriber::set_global_default` or `set_default`).
pub fn subscriber(provider: &SdkTracerProvider) -> impl tracing::Subscriber + Send + Sync + use<> {
    let tracer = provider.tracer("tinyagents");
    Registry::default().with(tracing_opentelemetry::layer().with_tracer(tracer))
}

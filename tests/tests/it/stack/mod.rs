//! The middleware stack: ordering (declared and with least displacement), hook order, wrap layers, control and jumps, errors and events, deltas, tracing, effective access and concurrency.

mod concurrency;
mod conflict_errors;
mod control;
mod default_middleware;
mod deltas;
mod effective_access;
mod errors_and_events;
mod events_json;
mod hook_notice;
mod hook_order;
mod middleware_tools;
mod ordering;
mod ordering_displacement;
mod otel_span_names;
mod run_context_size;
mod runtime_seam;
mod seed_hook_types;
mod separate_wraps;
mod testing_kit;
mod tracing_capture;
mod wraps;

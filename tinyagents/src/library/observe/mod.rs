//! Observability built-ins: see the table in [the library docs](super).
//!
//! * [`TracingMiddleware`] — `tracing` spans with OpenTelemetry GenAI attribute names.
//! * [`LoggingMiddleware`] — a `tracing` event per hook, and [`HookCounts`].
//! * [`UsageAccountingMiddleware`] — [`UsageTotals`] and per-run [`RunUsage`].

mod logging;
mod tracing;
mod usage_accounting;

pub use self::tracing::{TracingConfig, TracingMiddleware};
pub use logging::{HookCounts, LogLevel, LoggingConfig, LoggingMiddleware};
pub use usage_accounting::{RunUsage, UsageAccountingMiddleware, UsageTotals};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<TracingMiddleware>(),
    doc_of::<LoggingMiddleware>(),
    doc_of::<UsageAccountingMiddleware>(),
];

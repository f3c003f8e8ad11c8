//! Resilience built-ins: see the table in [the library docs](super).
//!
//! * [`TimeoutMiddleware`] — limits per model call, tool call and run.
//! * [`ModelRetryMiddleware`] and [`ToolRetryMiddleware`] — exponential [`Backoff`] with jitter and a cap.
//! * [`ModelFallbackMiddleware`] — an ordered list of fallback models.
//! * [`RateLimiterMiddleware`] — token buckets behind a [`RateLimitStore`].
//!
//! The usual order, outermost first: `model_fallback`, `model_retry`,
//! `rate_limiter`, `timeout` (each model retried before falling back; each
//! attempt rate-limited and timed on its own).

mod backoff;
mod model_fallback;
mod model_retry;
mod rate_limiter;
mod retry;
mod timeout;
mod tool_retry;

/// The store trait the rate limiter takes its tokens from (it lives in [`crate::store`]).
pub use crate::store::{BucketSpec, InMemoryRateLimitStore, RateLimitStore};
pub use backoff::{Backoff, ErrorClassifier, OnFailure};
pub use model_fallback::ModelFallbackMiddleware;
pub use model_retry::{ModelRetryConfig, ModelRetryMiddleware};
pub use rate_limiter::{RateKey, RateLimitMode, RateLimiterConfig, RateLimiterMiddleware};
pub use timeout::{TimeoutConfig, TimeoutMiddleware};
pub use tool_retry::{ToolRetryConfig, ToolRetryMiddleware};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<TimeoutMiddleware>(),
    doc_of::<ModelRetryMiddleware>(),
    doc_of::<ToolRetryMiddleware>(),
    doc_of::<ModelFallbackMiddleware>(),
    doc_of::<RateLimiterMiddleware>(),
];

//! What the retry built-ins share: [`Backoff`] (exponential, jittered,
//! capped), [`OnFailure`], the error classifier type and the config checks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::{ErrorKind, Result, TinyAgentsError};

/// Decides whether an error is worth another attempt (or a fallback).
/// Interrupts and cancellations are never retried, whatever it says.
pub type ErrorClassifier = Arc<dyn Fn(&TinyAgentsError) -> bool + Send + Sync>;

/// The default classifier: [`TinyAgentsError::is_retryable`].
pub(super) fn default_classifier() -> ErrorClassifier {
    Arc::new(TinyAgentsError::is_retryable)
}

/// A classifier accepting errors of these kinds.
pub(super) fn kinds_classifier(kinds: Vec<ErrorKind>) -> ErrorClassifier {
    Arc::new(move |e: &TinyAgentsError| kinds.contains(&e.kind()))
}

/// The error kind labels a `retry_on` list may name.
pub(super) const KIND_LABELS: &[(&str, ErrorKind)] = &[
    ("model", ErrorKind::Model),
    ("tool", ErrorKind::Tool),
    ("timeout", ErrorKind::Timeout),
    ("rate_limited", ErrorKind::RateLimited),
    ("validation", ErrorKind::Validation),
    ("middleware", ErrorKind::Middleware),
];

/// Parses `retry_on` labels (checked by [`check_retry`] first).
pub(super) fn parse_kinds(labels: &[String]) -> Vec<ErrorKind> {
    labels
        .iter()
        .filter_map(|l| KIND_LABELS.iter().find(|(k, _)| k == l).map(|(_, kind)| *kind))
        .collect()
}

crate::config_enum! {
    /// What a retry middleware does when the last attempt failed with an error it retries.
    pub enum OnFailure {
        /// Return the last error (the run decides what it means).
        Error = "error",
        /// Carry on with a message naming the failure: the model call resolves to
        /// an assistant message, the tool call to an error result the model sees.
        Continue = "continue",
    }
}

/// Exponential backoff with jitter and a cap.
///
/// The delay after failed attempt `n` (1-based) is
/// `initial * factor^(n-1)`, spread by `± jitter` (a fraction), raised to
/// the provider's `retry_after` hint when there is one, and never above `max`.
///
/// ```
/// use std::time::Duration;
/// use tinyagents::middleware::Backoff;
///
/// let b = Backoff { initial: Duration::from_millis(100), factor: 2.0, max: Duration::from_millis(300), jitter: 0.0 };
/// assert_eq!(b.delay(1, None), Duration::from_millis(100));
/// assert_eq!(b.delay(2, None), Duration::from_millis(200));
/// assert_eq!(b.delay(3, None), Duration::from_millis(300)); // capped
/// assert_eq!(b.delay(1, Some(Duration::from_millis(250))), Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    /// The delay after the first failed attempt.
    pub initial: Duration,
    /// The growth factor per attempt (≥ 1).
    pub factor: f64,
    /// The cap.
    pub max: Duration,
    /// The spread, as a fraction of the delay (0 = none, 0.25 = ±25%).
    pub jitter: f64,
}

impl Backoff {
    /// The same backoff within the bounds the retry configs enforce: `factor`
    /// in 1.0..=100.0 (NaN: 1.0), `jitter` in 0.0..=1.0 (NaN: 0.0), and `max`
    /// at least `initial`. The retry built-ins' builders apply it, so a value
    /// given in code cannot do what the config refuses.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tinyagents::middleware::Backoff;
    ///
    /// let b = Backoff { initial: Duration::from_secs(2), factor: f64::NAN, max: Duration::from_secs(1), jitter: 7.0 };
    /// let b = b.bounded();
    /// assert_eq!((b.factor, b.jitter, b.max), (1.0, 1.0, Duration::from_secs(2)));
    /// ```
    pub fn bounded(self) -> Self {
        let factor = if self.factor.is_nan() {
            1.0
        } else {
            self.factor.clamp(1.0, 100.0)
        };
        let jitter = if self.jitter.is_nan() {
            0.0
        } else {
            self.jitter.clamp(0.0, 1.0)
        };
        Self {
            initial: self.initial,
            factor,
            max: self.max.max(self.initial),
            jitter,
        }
    }

    /// The delay before the attempt after failed attempt `attempt`.
    pub fn delay(&self, attempt: u32, hint: Option<Duration>) -> Duration {
        let exp = i32::try_from(attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let base = self.initial.as_secs_f64() * self.factor.powi(exp);
        let spread = if self.jitter > 0.0 {
            1.0 + self.jitter * (2.0 * unit_random() - 1.0)
        } else {
            1.0
        };
        let secs = (base * spread).clamp(0.0, self.max.as_secs_f64());
        let delay = Duration::try_from_secs_f64(secs).unwrap_or(self.max);
        match hint {
            Some(h) if h > delay => h.min(self.max),
            _ => delay,
        }
    }
}

/// A uniform number in `[0, 1)` (splitmix64 over a global counter: jitter
/// needs spread, not cryptographic quality).
fn unit_random() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let mut z = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// Waits `delay` on tokio's clock, or fails with `Cancelled` when the run is cancelled first.
pub(super) async fn pause<C>(ctx: &RunContext<C>, delay: Duration) -> Result<()> {
    if delay.is_zero() {
        return Ok(());
    }
    let token = ctx.flow().cancellation().clone();
    tokio::select! {
        () = tokio::time::sleep(delay) => Ok(()),
        () = token.cancelled() => Err(TinyAgentsError::cancelled("the run was cancelled while a retry was waiting")),
    }
}

/// The cross-field checks of a retry config: the cap is not below the first
/// delay, and every `retry_on` label names an error kind that can be retried.
pub(super) fn check_retry(
    initial_delay_ms: u64,
    max_delay_ms: u64,
    retry_on: &[String],
) -> std::result::Result<(), ConfigViolation> {
    if max_delay_ms < initial_delay_ms {
        return Err(ConfigViolation::new(
            "max_delay_ms",
            format!(
                "must be at least `initial_delay_ms` ({initial_delay_ms}): the cap cannot be below the first delay"
            ),
        )
        .with_value(max_delay_ms));
    }
    for label in retry_on {
        if !KIND_LABELS.iter().any(|(k, _)| k == label) {
            let known: Vec<&str> = KIND_LABELS.iter().map(|(k, _)| *k).collect();
            return Err(ConfigViolation::new(
                "retry_on",
                format!(
                    "each entry must be one of {} (interrupts and cancellations are never retried)",
                    known.join(", ")
                ),
            )
            .with_value(label));
        }
    }
    Ok(())
}

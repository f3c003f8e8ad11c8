//! The retry loop both retry built-ins run: [`Retry`] holds the attempts,
//! the backoff, the classifier and the failure behaviour, and decides after
//! each failed attempt whether to wait and try again; [`retry_builders!`]
//! gives both built-ins the same builder methods.

use std::sync::Arc;
use std::time::Duration;

use super::backoff::{default_classifier, kinds_classifier, parse_kinds, pause};
use super::timeout::is_run_deadline;
use super::{Backoff, ErrorClassifier, OnFailure};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};

/// A retry policy: how many attempts, how long to wait between them, which
/// errors are worth another attempt and what to do when none is left.
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub(super) struct Retry {
    /// Attempts in all, the first included.
    pub(super) max_attempts: u32,
    /// The wait between attempts.
    pub(super) backoff: Backoff,
    /// Which errors are retried.
    #[educe(Debug(ignore))]
    pub(super) retry_on: ErrorClassifier,
    /// What the last failure becomes.
    pub(super) on_failure: OnFailure,
}

/// What a failed attempt leads to, when it is not returned as an error.
pub(super) enum AfterFailure {
    /// The wait is over: make the next attempt.
    Again,
    /// No attempt is left and `on_failure = "continue"`: answer with a
    /// message naming this error.
    GiveUp(TinyAgentsError),
}

impl Retry {
    /// The policy of a retry config's shared fields (both retry built-ins
    /// read them the same way; the config checked them first).
    pub(super) fn from_config(
        max_attempts: u32,
        (initial_delay_ms, backoff_factor, max_delay_ms, jitter): (u64, f64, u64, f64),
        retry_on: &[String],
        on_failure: OnFailure,
    ) -> Self {
        Self {
            max_attempts,
            backoff: Backoff {
                initial: Duration::from_millis(initial_delay_ms),
                factor: backoff_factor,
                max: Duration::from_millis(max_delay_ms),
                jitter,
            },
            retry_on: if retry_on.is_empty() {
                default_classifier()
            } else {
                kinds_classifier(parse_kinds(retry_on))
            },
            on_failure,
        }
    }

    /// After failed attempt `attempt` (1-based) of a `target` call: returns
    /// `error` when it is not retried (control flow, a run deadline, or an
    /// error the classifier rejects) or when no attempt is left under
    /// `on_failure = "error"`; gives up under `continue`; otherwise emits
    /// [`AgentEvent::Retry`] and waits the backoff (a cancellation ends the
    /// wait with `Cancelled`).
    pub(super) async fn after_failure<C>(
        &self,
        ctx: &RunContext<C>,
        target: &'static str,
        attempt: u32,
        error: TinyAgentsError,
    ) -> Result<AfterFailure> {
        if error.is_control_flow() || is_run_deadline(&error) || !(self.retry_on)(&error) {
            return Err(error);
        }
        if attempt >= self.max_attempts {
            return match self.on_failure {
                OnFailure::Error => Err(error),
                OnFailure::Continue => Ok(AfterFailure::GiveUp(error)),
            };
        }
        let delay = self.backoff.delay(attempt, error.retry_after());
        ctx.events().emit_with(EventKind::Retry, || AgentEvent::Retry {
            run_id: ctx.run_id().clone(),
            target,
            attempt,
            max_attempts: self.max_attempts,
            delay,
            error: error.kind(),
        });
        pause(ctx, delay).await?;
        Ok(AfterFailure::Again)
    }

    /// The same policy retrying the errors `classify` accepts.
    pub(super) fn set_classifier(&mut self, classify: impl Fn(&TinyAgentsError) -> bool + Send + Sync + 'static) {
        self.retry_on = Arc::new(classify);
    }
}

/// The builder methods and accessors of a retry built-in `$ty` (a struct
/// with a `retry: Retry` field), with their doc examples.
macro_rules! retry_builders {
    ($ty:ident) => {
        impl $ty {
            /// The same middleware retrying the errors `classify` accepts (interrupts
            /// and cancellations are still never retried).
            pub fn retry_on(mut self, classify: impl Fn(&TinyAgentsError) -> bool + Send + Sync + 'static) -> Self {
                self.retry.set_classifier(classify);
                self
            }

            /// The same middleware making at most `attempts` attempts (clamped to
            /// 1..=100, the config's `max_attempts` range).
            pub fn with_max_attempts(mut self, attempts: u32) -> Self {
                self.retry.max_attempts = attempts.clamp(1, 100);
                self
            }

            /// The same middleware waiting by `backoff` between attempts (kept within
            /// the config's bounds by [`Backoff::bounded`]).
            ///
            #[doc = concat!(
                "```\n",
                "use std::time::Duration;\n",
                "use tinyagents::middleware::{Backoff, ", stringify!($ty), "};\n\n",
                "let backoff = Backoff { initial: Duration::from_millis(50), factor: 3.0, max: Duration::from_secs(2), jitter: 0.0 };\n",
                "let retry = ", stringify!($ty), "::new().with_max_attempts(5).with_backoff(backoff);\n",
                "assert_eq!((retry.max_attempts(), retry.backoff()), (5, backoff));\n",
                "```"
            )]
            pub fn with_backoff(mut self, backoff: Backoff) -> Self {
                self.retry.backoff = backoff.bounded();
                self
            }

            /// The same middleware waiting `initial` after the first failed attempt,
            /// growing by the backoff factor up to `max` (raised to `initial` when below it).
            ///
            #[doc = concat!(
                "```\n",
                "use std::time::Duration;\n",
                "use tinyagents::middleware::", stringify!($ty), ";\n\n",
                "let retry = ", stringify!($ty), "::new().with_delays(Duration::from_millis(10), Duration::from_millis(80));\n",
                "assert_eq!(retry.backoff().initial, Duration::from_millis(10));\n",
                "assert_eq!(retry.backoff().max, Duration::from_millis(80));\n",
                "```"
            )]
            pub fn with_delays(mut self, initial: std::time::Duration, max: std::time::Duration) -> Self {
                self.retry.backoff = Backoff {
                    initial,
                    max,
                    ..self.retry.backoff
                }
                .bounded();
                self
            }

            /// The same middleware with another failure behaviour.
            pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
                self.retry.on_failure = on_failure;
                self
            }

            /// The most attempts it makes.
            pub fn max_attempts(&self) -> u32 {
                self.retry.max_attempts
            }

            /// Its backoff.
            pub fn backoff(&self) -> Backoff {
                self.retry.backoff
            }
        }
    };
}
pub(super) use retry_builders;

//! [`ModelRetryMiddleware`]: retries failed model calls with exponential backoff.

use super::backoff::check_retry;
use super::retry::{retry_builders, AfterFailure, Retry};
use super::{Backoff, OnFailure};
use crate::config::{ConfigErrors, ConfigViolation, MiddlewareConfig};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::{MiddlewareModelOutcome, ModelHandler};
use crate::harness::model::{ModelRequest, ModelResponse};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ModelRetryMiddleware`] (`type = "model_retry"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::ModelRetryConfig;
///
/// let config: ModelRetryConfig = from_toml_str("max_attempts = 5\ninitial_delay_ms = 200").unwrap();
/// let _retry = config.build();
/// let err = from_toml_str::<ModelRetryConfig>("max_attempts = 0").unwrap_err();
/// assert_eq!(err.to_string(), "invalid configuration: `max_attempts` = 0: must be in 1..=100");
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "model_retry", builds = ModelRetryMiddleware, validate = check_model_retry)]
pub struct ModelRetryConfig {
    /// Attempts in all, the first included (1 = no retry).
    #[config(default = 3, range = 1..=100)]
    pub max_attempts: u32,
    /// The delay after the first failed attempt, in milliseconds.
    #[config(default = 1000)]
    pub initial_delay_ms: u64,
    /// The delay's growth per attempt.
    #[config(default = 2.0, range = 1.0..=100.0, finite)]
    pub backoff_factor: f64,
    /// The cap on any delay, in milliseconds (at least `initial_delay_ms`).
    #[config(default = 60000)]
    pub max_delay_ms: u64,
    /// The spread of each delay, as a fraction (0.25 = ±25%).
    #[config(default = 0.25, range = 0.0..=1.0, finite)]
    pub jitter: f64,
    /// Error kinds to retry (`model`, `timeout`, `rate_limited`, …); empty: every error whose `is_retryable()` holds.
    #[config(default = Vec::new())]
    pub retry_on: Vec<String>,
    /// After the last failed attempt: `error` returns the error, `continue` answers with an assistant message naming it.
    #[config(default = "error")]
    pub on_failure: OnFailure,
}

fn check_model_retry(c: &ModelRetryConfig) -> std::result::Result<(), ConfigViolation> {
    check_retry(c.initial_delay_ms, c.max_delay_ms, &c.retry_on)
}

impl From<ModelRetryConfig> for ModelRetryMiddleware {
    fn from(c: ModelRetryConfig) -> Self {
        Self {
            retry: Retry::from_config(
                c.max_attempts,
                (c.initial_delay_ms, c.backoff_factor, c.max_delay_ms, c.jitter),
                &c.retry_on,
                c.on_failure,
            ),
        }
    }
}

/// Retries a failed model call (LangChain's `ModelRetryMiddleware`):
/// up to `max_attempts` attempts with exponential backoff, jitter and a cap,
/// for errors its classifier accepts (default: [`TinyAgentsError::is_retryable`]).
/// Interrupts and cancellations are never retried. Each retry emits
/// [`AgentEvent::Retry`](crate::harness::event::AgentEvent::Retry); the failed attempt's streamed deltas were already
/// marked by an `AttemptDiscarded` event from the model call.
///
/// ```
/// use tinyagents::middleware::ModelRetryMiddleware;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap().block_on(async {
/// let model = ScriptedModel::new([
///     ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
///     ScriptedTurn::text("hello"),
/// ]);
/// let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(ModelRetryMiddleware::new())?);
/// let run = agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi").await?;
/// assert_eq!(run.final_text(), "hello");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct ModelRetryMiddleware {
    retry: Retry,
}

impl Default for ModelRetryMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ModelRetryMiddleware {
    /// The defaults of [`ModelRetryConfig`]: 3 attempts, 1 s doubling to at most 60 s, ±25% jitter.
    pub fn new() -> Self {
        ModelRetryConfig::defaults()
            .expect("every model_retry key has a default")
            .into()
    }

    /// A retry middleware from a config built in code, checked first.
    pub fn try_from_config(config: ModelRetryConfig) -> std::result::Result<Self, ConfigErrors> {
        config.check("")?;
        Ok(config.into())
    }
}

retry_builders!(ModelRetryMiddleware);

/// Retries failed model calls with exponential backoff, jitter and a cap; interrupts and cancellations are never retried.
#[middleware(
    builtin,
    name = "model_retry",
    config = ModelRetryConfig,
    doc(
        mutation = "None on success. With `on_failure = \"continue\"` a call that failed on its last attempt resolves to an assistant message `Model call failed after N attempt(s): …` instead of an error.",
        events = "`Retry { target: \"model\", attempt, max_attempts, delay, error }` before each new attempt; the model call itself emits `ModelCallStarted`/`ModelCallCompleted` per attempt and `AttemptDiscarded` for each failed one.",
        failure = "Fails clearly: an error its classifier rejects (and every interrupt, cancellation or run deadline `Timeout { what: \"run\" }`) is returned at once, unchanged; after the last attempt the last error is returned (or, with `continue`, described in the reply). A cancellation during a backoff wait ends the wait with `Cancelled`.",
        streaming = "Each attempt streams anew; deltas of a failed attempt were already sent, and the `AttemptDiscarded { attempt }` event tells a client to drop them (`ModelDelta` events carry their attempt).",
        cache = "Sends the same request again, so the provider's prompt cache prefix is reused by the retry.",
        retries = "Place it inside `model_fallback` (each model retried before falling back) and outside `timeout` (a timed-out attempt is a retryable `Timeout`). Backoff waits use tokio's clock, honour a `retry_after` hint up to the cap, and count toward a run timeout outside."
    )
)]
impl ModelRetryMiddleware {
    #[wrap_model]
    async fn retry<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let error = match next.run(ctx, state, request.clone()).await {
                Ok(outcome) => return Ok(outcome),
                Err(e) => e,
            };
            if let AfterFailure::GiveUp(error) = self.retry.after_failure(ctx, "model", attempt, error).await? {
                return Ok(
                    ModelResponse::text(format!("Model call failed after {attempt} attempt(s): {error}")).into(),
                );
            }
        }
    }
}

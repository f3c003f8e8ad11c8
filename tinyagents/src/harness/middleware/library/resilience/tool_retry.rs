//! [`ToolRetryMiddleware`]: retries failed tool calls with exponential backoff.

use super::backoff::{check_retry, pause, retry_parts};
use super::timeout::is_run_deadline;
use super::{Backoff, ErrorClassifier, OnFailure};
use crate::config::{ConfigErrors, ConfigViolation, MiddlewareConfig};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::middleware::{MiddlewareToolOutcome, ToolHandler};
use crate::harness::tool::{ToolCall, ToolResult};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ToolRetryMiddleware`] (`type = "tool_retry"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::ToolRetryConfig;
///
/// let config: ToolRetryConfig = from_toml_str("max_attempts = 5\ninitial_delay_ms = 200").unwrap();
/// let _retry = config.build();
/// let err = from_toml_str::<ToolRetryConfig>("max_attempts = 0").unwrap_err();
/// assert_eq!(err.to_string(), "invalid configuration: `max_attempts` = 0: must be in 1..=100");
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "tool_retry", builds = ToolRetryMiddleware, validate = check_tool_retry)]
pub struct ToolRetryConfig {
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
    /// After the last failed attempt: `continue` gives the call an error result naming the failure (the model sees it), `error` returns the error.
    #[config(default = "continue")]
    pub on_failure: OnFailure,
    /// The tools to retry; empty: every tool.
    #[config(default = Vec::new())]
    pub tools: Vec<String>,
}

fn check_tool_retry(c: &ToolRetryConfig) -> std::result::Result<(), ConfigViolation> {
    check_retry(c.initial_delay_ms, c.max_delay_ms, &c.retry_on)
}

impl From<ToolRetryConfig> for ToolRetryMiddleware {
    fn from(c: ToolRetryConfig) -> Self {
        let (backoff, retry_on, on_failure) = retry_parts(
            c.initial_delay_ms,
            c.backoff_factor,
            c.max_delay_ms,
            c.jitter,
            &c.retry_on,
            c.on_failure,
        );
        Self {
            max_attempts: c.max_attempts,
            backoff,
            retry_on,
            on_failure,
            tools: c.tools,
        }
    }
}

/// Retries a failed tool call (LangChain's `ToolRetryMiddleware`): up to
/// `max_attempts` attempts with exponential backoff, jitter and a cap, for
/// errors its classifier accepts (default: [`TinyAgentsError::is_retryable`],
/// so a `Timeout` or `RateLimited` error; a plain tool failure is retried only
/// when `retry_on` names `tool`). Interrupts and cancellations are never
/// retried. Each retry emits [`AgentEvent::Retry`]. By default a call that
/// still fails gets an error result (`on_failure = "continue"`), so every
/// call keeps exactly one result.
///
/// ```
/// use tinyagents::middleware::ToolRetryMiddleware;
/// use tinyagents::prelude::*;
///
/// let retry = ToolRetryMiddleware::new().only_tools(["search"]);
/// assert_eq!(retry.max_attempts(), 3);
/// ```
#[derive(Clone)]
pub struct ToolRetryMiddleware {
    max_attempts: u32,
    backoff: Backoff,
    retry_on: ErrorClassifier,
    on_failure: OnFailure,
    tools: Vec<String>,
}

impl std::fmt::Debug for ToolRetryMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRetryMiddleware")
            .field("max_attempts", &self.max_attempts)
            .field("backoff", &self.backoff)
            .field("on_failure", &self.on_failure)
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Default for ToolRetryMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ToolRetryMiddleware {
    /// The defaults of [`ToolRetryConfig`]: 3 attempts, 1 s doubling to at most 60 s, ±25% jitter, `continue`, every tool.
    pub fn new() -> Self {
        ToolRetryConfig::defaults()
            .expect("every tool_retry key has a default")
            .into()
    }

    /// A retry middleware from a config built in code, checked first.
    pub fn try_from_config(config: ToolRetryConfig) -> std::result::Result<Self, ConfigErrors> {
        config.check("")?;
        Ok(config.into())
    }

    /// The same middleware retrying the errors `classify` accepts (interrupts
    /// and cancellations are still never retried).
    pub fn retry_on(mut self, classify: impl Fn(&TinyAgentsError) -> bool + Send + Sync + 'static) -> Self {
        self.retry_on = std::sync::Arc::new(classify);
        self
    }

    /// The same middleware making at most `attempts` attempts (clamped to
    /// 1..=100, the config's `max_attempts` range).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.clamp(1, 100);
        self
    }

    /// The same middleware waiting by `backoff` between attempts (kept within
    /// the config's bounds by [`Backoff::bounded`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tinyagents::middleware::{Backoff, ToolRetryMiddleware};
    ///
    /// let backoff = Backoff { initial: Duration::from_millis(50), factor: 3.0, max: Duration::from_secs(2), jitter: 0.0 };
    /// let retry = ToolRetryMiddleware::new().with_max_attempts(5).with_backoff(backoff);
    /// assert_eq!((retry.max_attempts(), retry.backoff()), (5, backoff));
    /// ```
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff.bounded();
        self
    }

    /// The same middleware waiting `initial` after the first failed attempt,
    /// growing by the backoff factor up to `max` (raised to `initial` when below it).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tinyagents::middleware::ToolRetryMiddleware;
    ///
    /// let retry = ToolRetryMiddleware::new().with_delays(Duration::from_millis(10), Duration::from_millis(80));
    /// assert_eq!(retry.backoff().initial, Duration::from_millis(10));
    /// assert_eq!(retry.backoff().max, Duration::from_millis(80));
    /// ```
    pub fn with_delays(mut self, initial: std::time::Duration, max: std::time::Duration) -> Self {
        self.backoff = Backoff {
            initial,
            max,
            ..self.backoff
        }
        .bounded();
        self
    }

    /// The same middleware with another failure behaviour.
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// The same middleware retrying only these tools.
    pub fn only_tools<I, N>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// The most attempts it makes.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Its backoff.
    pub fn backoff(&self) -> Backoff {
        self.backoff
    }
}

/// Retries failed tool calls with exponential backoff, jitter and a cap; a call that still fails gets an error result by default; interrupts and cancellations are never retried.
#[middleware(
    builtin,
    name = "tool_retry",
    config = ToolRetryConfig,
    doc(
        mutation = "None on success. With `on_failure = \"continue\"` (the default) a call that failed on its last attempt resolves to an error `ToolResult` (`Tool `NAME` failed after N attempt(s): …`) instead of an error.",
        events = "`Retry { target: \"tool\", attempt, max_attempts, delay, error }` before each new attempt. `ToolCallStarted`/`ToolCallCompleted` stay one pair per call: the retries happen inside the call.",
        failure = "Fails clearly: an error its classifier rejects (and every interrupt, cancellation or run deadline `Timeout { what: \"run\" }`) is returned at once, unchanged; after the last attempt the call gets an error result (`continue`) or the last error is returned (`error`). A cancellation during a backoff wait ends the wait with `Cancelled`.",
        streaming = "Tool progress deltas of every attempt are forwarded as they come; a failed attempt's progress is not withdrawn.",
        cache = "None: tool calls do not touch the prompt prefix.",
        retries = "Place it outside `timeout` (a timed-out attempt is a retryable `Timeout`) and outside a rate limiter in `reject` mode (a `RateLimited` refusal is retried after its `retry_after`). Tools not listed in `tools` pass straight through."
    )
)]
impl ToolRetryMiddleware {
    #[wrap_tool]
    async fn retry<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        call: ToolCall,
        next: ToolHandler<'_, S, C>,
    ) -> Result<MiddlewareToolOutcome> {
        if !self.tools.is_empty() && !self.tools.contains(&call.name) {
            return next.run(ctx, state, call).await;
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let error = match next.run(ctx, state, call.clone()).await {
                Ok(outcome) => return Ok(outcome),
                Err(e) if e.is_control_flow() || is_run_deadline(&e) || !(self.retry_on)(&e) => return Err(e),
                Err(e) => e,
            };
            if attempt >= self.max_attempts {
                return match self.on_failure {
                    OnFailure::Error => Err(error),
                    OnFailure::Continue => Ok(ToolResult::error(
                        &call,
                        format!("Tool `{}` failed after {attempt} attempt(s): {error}", call.name),
                    )
                    .into()),
                };
            }
            let delay = self.backoff.delay(attempt, error.retry_after());
            ctx.emit_with(EventKind::Retry, || AgentEvent::Retry {
                run_id: ctx.run_id().clone(),
                target: "tool",
                attempt,
                max_attempts: self.max_attempts,
                delay,
                error: error.kind(),
            });
            pause(ctx, delay).await?;
        }
    }
}

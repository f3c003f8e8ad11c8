//! [`ToolRetryMiddleware`]: retries failed tool calls with exponential backoff.

use super::backoff::check_retry;
use super::retry::{retry_builders, AfterFailure, Retry};
use super::{Backoff, OnFailure};
use crate::config::{ConfigErrors, ConfigViolation, MiddlewareConfig};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
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
        Self {
            retry: Retry::from_config(
                c.max_attempts,
                (c.initial_delay_ms, c.backoff_factor, c.max_delay_ms, c.jitter),
                &c.retry_on,
                c.on_failure,
            ),
            tools: c.tools,
        }
    }
}

/// Retries a failed tool call (LangChain's `ToolRetryMiddleware`): up to
/// `max_attempts` attempts with exponential backoff, jitter and a cap, for
/// errors its classifier accepts (default: [`TinyAgentsError::is_retryable`],
/// so a `Timeout` or `RateLimited` error; a plain tool failure is retried only
/// when `retry_on` names `tool`). Interrupts and cancellations are never
/// retried. Each retry emits [`AgentEvent::Retry`](crate::harness::event::AgentEvent::Retry). By default a call that
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
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct ToolRetryMiddleware {
    retry: Retry,
    tools: Vec<String>,
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

    /// The same middleware retrying only these tools.
    pub fn only_tools<I, N>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.tools = tools.into_iter().map(Into::into).collect();
        self
    }
}

retry_builders!(ToolRetryMiddleware);

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
                Err(e) => e,
            };
            if let AfterFailure::GiveUp(error) = self.retry.after_failure(ctx, "tool", attempt, error).await? {
                let message = format!("Tool `{}` failed after {attempt} attempt(s): {error}", call.name);
                return Ok(ToolResult::error(&call, message).into());
            }
        }
    }
}

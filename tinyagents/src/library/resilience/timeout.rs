//! [`TimeoutMiddleware`]: time limits per model call, per tool call and per run.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{ConfigErrors, ConfigViolation, MiddlewareConfig};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::{MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, RunState, ToolHandler};
use crate::harness::model::ModelRequest;
use crate::harness::tool::ToolCall;
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`TimeoutMiddleware`] (`type = "timeout"`); at least one limit must be set.
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::TimeoutConfig;
///
/// let config: TimeoutConfig = from_toml_str("model_ms = 30000\nrun_ms = 600000").unwrap();
/// let _timeout = config.build();
/// let err = from_toml_str::<TimeoutConfig>("model_ms = 0").unwrap_err();
/// assert_eq!(err.to_string(), "invalid configuration: `model_ms` = 0: must be in 1..");
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "timeout", builds = TimeoutMiddleware, validate = check_timeout)]
pub struct TimeoutConfig {
    /// The limit on one model call (one pass through the onion inside this layer), in milliseconds.
    #[config(range = 1..)]
    pub model_ms: Option<u64>,
    /// The limit on one tool call, in milliseconds.
    #[config(range = 1..)]
    pub tool_ms: Option<u64>,
    /// The limit on the whole run, from `before_agent`, in milliseconds.
    #[config(range = 1..)]
    pub run_ms: Option<u64>,
}

fn check_timeout(c: &TimeoutConfig) -> std::result::Result<(), ConfigViolation> {
    if c.model_ms.is_none() && c.tool_ms.is_none() && c.run_ms.is_none() {
        return Err(ConfigViolation::new(
            "model_ms",
            "set at least one of `model_ms`, `tool_ms`, `run_ms`: a timeout with no limit does nothing",
        ));
    }
    Ok(())
}

impl From<TimeoutConfig> for TimeoutMiddleware {
    fn from(c: TimeoutConfig) -> Self {
        Self {
            model: c.model_ms.map(Duration::from_millis),
            tool: c.tool_ms.map(Duration::from_millis),
            run: c.run_ms.map(Duration::from_millis),
        }
    }
}

/// Its run state: the run's deadline, set in `before_agent`.
#[derive(Default)]
struct RunDeadline(Option<Instant>);

/// Limits how long a model call, a tool call and a whole run may take, on
/// tokio's clock. On expiry the inner future is dropped (the call is
/// abandoned, its wrap layers' events still close, the model call's
/// `AttemptDiscarded` is emitted) and the call fails with
/// [`TinyAgentsError::Timeout`], which is retryable: a retry layer outside
/// sees it and may try again; `on_error` hooks see it when nothing recovers.
///
/// The run limit starts in `before_agent` and bounds every model and tool
/// call after it (each call gets the smaller of its own limit and the time
/// left); a call started after the deadline fails at once with
/// `Timeout { what: "run" }`.
///
/// ```
/// use std::time::Duration;
/// use tinyagents::middleware::TimeoutMiddleware;
///
/// let timeout = TimeoutMiddleware::new()
///     .model(Duration::from_secs(30))
///     .tool(Duration::from_secs(10))
///     .run(Duration::from_secs(600));
/// # let _ = timeout;
/// ```
#[derive(Debug, Clone, Default)]
pub struct TimeoutMiddleware {
    model: Option<Duration>,
    tool: Option<Duration>,
    run: Option<Duration>,
}

impl TimeoutMiddleware {
    /// No limits yet: add them with [`model`](Self::model), [`tool`](Self::tool), [`run`](Self::run).
    pub fn new() -> Self {
        Self::default()
    }

    /// A timeout middleware from a config built in code, checked first.
    pub fn try_from_config(config: TimeoutConfig) -> std::result::Result<Self, ConfigErrors> {
        config.check("")?;
        Ok(config.into())
    }

    /// The same middleware limiting each model call.
    pub fn model(mut self, limit: Duration) -> Self {
        self.model = Some(limit);
        self
    }

    /// The same middleware limiting each tool call.
    pub fn tool(mut self, limit: Duration) -> Self {
        self.tool = Some(limit);
        self
    }

    /// The same middleware limiting the whole run.
    pub fn run(mut self, limit: Duration) -> Self {
        self.run = Some(limit);
        self
    }

    fn run_timeout(&self) -> TinyAgentsError {
        TinyAgentsError::timeout("run", self.run.unwrap_or_default())
    }

    /// The limit for one call: its own, or the time left in the run when
    /// that is shorter; `Err` when the run's deadline has passed.
    fn limit(
        &self,
        deadline: &RunState<RunDeadline>,
        own: Option<Duration>,
        what: impl FnOnce() -> String,
    ) -> Result<Option<(Duration, TinyAgentsError)>> {
        let deadline = deadline.lock()?.0;
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        if left == Some(Duration::ZERO) {
            return Err(self.run_timeout());
        }
        Ok(match (own, left) {
            (Some(own), Some(left)) if left < own => Some((left, self.run_timeout())),
            (Some(own), _) => Some((own, TinyAgentsError::timeout(what(), own))),
            (None, Some(left)) => Some((left, self.run_timeout())),
            (None, None) => None,
        })
    }
}

/// Whether `error` is a run's deadline passing: trying the call again
/// cannot help, so retry and fallback return it at once.
pub(super) fn is_run_deadline(error: &TinyAgentsError) -> bool {
    matches!(error, TinyAgentsError::Timeout { what, .. } if what == "run")
}

/// Runs `fut` under `limit`, dropping it on expiry.
async fn bounded<T>(limit: Option<(Duration, TinyAgentsError)>, fut: impl Future<Output = Result<T>>) -> Result<T> {
    match limit {
        None => fut.await,
        Some((limit, error)) => tokio::time::timeout(limit, fut).await.unwrap_or(Err(error)),
    }
}

/// Limits each model call, each tool call and the whole run on tokio's clock; the call is dropped on expiry and fails with a retryable `Timeout`.
#[middleware(
    builtin,
    name = "timeout",
    config = TimeoutConfig,
    run_state = RunDeadline,
    doc(
        mutation = "None: it only bounds the calls.",
        events = "None of its own. The dropped call's events still close: wrap layers inside it complete with outcome `cancelled`, and the model call emits `ModelCallCompleted` (error `cancelled`) and `AttemptDiscarded` for the abandoned attempt; this layer's own `wrap_model`/`wrap_tool` completes with `error:timeout`.",
        failure = "Fails clearly with `TinyAgentsError::Timeout { what, after }` (`model call`, `tool call `NAME``, or `run`); `on_error` hooks see it when it escapes the onion. A timed-out tool call ends the run under the default tool error policy unless a `tool_retry` outside turns it into an error result.",
        streaming = "The limit covers the whole streamed call, first delta to last; deltas already forwarded stay forwarded and are marked by `AttemptDiscarded`.",
        cache = "None: the request is not touched.",
        retries = "Place it inside `model_retry`/`tool_retry`: each attempt gets its own limit and a `Timeout` is retryable. Placed outside, one limit covers every attempt and backoff wait. The run limit bounds retries and fallbacks too, and its `Timeout { what: \"run\" }` is never retried or fallen back from."
    )
)]
impl TimeoutMiddleware {
    #[before_agent]
    fn start_clock(&self, deadline: &mut RunDeadline) -> Result<()> {
        if let Some(run) = self.run {
            deadline.0 = Some(Instant::now() + run);
        }
        Ok(())
    }

    #[wrap_model]
    async fn bound_model<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        deadline: &RunState<RunDeadline>,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let limit = self.limit(deadline, self.model, || "model call".to_owned())?;
        bounded(limit, next.run(ctx, state, request)).await
    }

    #[wrap_tool]
    async fn bound_tool<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        deadline: &RunState<RunDeadline>,
        call: ToolCall,
        next: ToolHandler<'_, S, C>,
    ) -> Result<MiddlewareToolOutcome> {
        let limit = self.limit(deadline, self.tool, || format!("tool call `{}`", call.name))?;
        bounded(limit, next.run(ctx, state, call)).await
    }
}

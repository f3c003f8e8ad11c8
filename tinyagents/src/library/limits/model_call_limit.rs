//! [`ModelCallLimitMiddleware`]: caps model calls per run and per thread.

use std::sync::Arc;
use std::time::Duration;

use super::counts::{describe, ModelExitBehavior, RunCounts, ThreadCounts};
use crate::config::{ConfigErrors, ConfigViolation, MiddlewareConfig};
use crate::harness::context::{MiddlewareControl, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::ModelRequest;
use crate::library::policy::replays_next_turn;
use crate::store::LedgerStore;
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ModelCallLimitMiddleware`] (`type = "model_call_limit"`); at least one limit must be set.
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::ModelCallLimitConfig;
///
/// let config: ModelCallLimitConfig = from_toml_str("run_limit = 10\nthread_limit = 50").unwrap();
/// let _limit = config.build();
/// assert!(from_toml_str::<ModelCallLimitConfig>("exit_behavior = \"continue\"\nrun_limit = 1").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "model_call_limit", builds = ModelCallLimitMiddleware, validate = check_model_call_limit)]
pub struct ModelCallLimitConfig {
    /// Most model calls in one run.
    #[config(range = 1..)]
    pub run_limit: Option<u32>,
    /// Most model calls across the runs of one thread (`RunConfig::thread_id`).
    #[config(range = 1..)]
    pub thread_limit: Option<u32>,
    /// At the limit: `end` stops the run with a final message naming it, `error` fails the run with `LimitExceeded`.
    #[config(default = "end")]
    pub exit_behavior: ModelExitBehavior,
}

fn check_model_call_limit(c: &ModelCallLimitConfig) -> std::result::Result<(), ConfigViolation> {
    if c.run_limit.is_none() && c.thread_limit.is_none() {
        return Err(ConfigViolation::new(
            "run_limit",
            "set `run_limit`, `thread_limit` or both: a limit with no bound does nothing",
        ));
    }
    Ok(())
}

impl From<ModelCallLimitConfig> for ModelCallLimitMiddleware {
    fn from(c: ModelCallLimitConfig) -> Self {
        Self {
            run_limit: c.run_limit,
            thread_limit: c.thread_limit,
            exit: c.exit_behavior,
            threads: ThreadCounts::default(),
        }
    }
}

/// With an agent file's `[store]`: a `thread_limit` counts the thread's
/// calls in the store's ledger, across every worker
/// ([`shared_thread_counts`](ModelCallLimitMiddleware::shared_thread_counts),
/// keys kept for [`SHARED_COUNT_TTL`](crate::store::SHARED_COUNT_TTL)).
impl crate::config::BuildShared for ModelCallLimitConfig {
    fn build_shared(self, stores: &crate::store::SharedStores) -> Result<ModelCallLimitMiddleware> {
        let shared = self.thread_limit.is_some();
        let limit = ModelCallLimitMiddleware::from(self);
        Ok(if shared {
            limit.shared_thread_counts(stores.ledger(), crate::store::SHARED_COUNT_TTL)
        } else {
            limit
        })
    }
}

/// Caps the model calls (turns) of a run and of a conversation thread
/// (LangChain's `ModelCallLimitMiddleware`). Each turn counts once, in
/// `before_model`, however many attempts retries or fallbacks make inside
/// the model onion. At the limit the call is not made: with `end` the run
/// stops with a final assistant message naming the limit; with `error` it
/// fails with [`TinyAgentsError::LimitExceeded`]. Every tool call of the
/// previous reply already has its result, so nothing is left unanswered.
///
/// Run counts are the middleware's run state (each registration counts on
/// its own); thread counts live in the middleware
/// (keyed by `RunConfig::thread_id`), shared by every run of a thread.
///
/// ```
/// use tinyagents::middleware::ModelCallLimitMiddleware;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let model = ScriptedModel::new([ScriptedTurn::tool_call("t", serde_json::json!({})), ScriptedTurn::text("x")]);
/// let tools = ToolRegistry::new().with(tool_fn("t", "T.", |_c, _a| async move { Ok("ok".into()) }))?;
/// let limit = ModelCallLimitMiddleware::per_run(1);
/// let agent: Agent<()> = Agent::new(model).with_tools(tools).with_stack(MiddlewareStack::new().with(limit)?);
/// let run = agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go").await?;
/// assert_eq!(run.stop, StopReason::StoppedByMiddleware);
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ModelCallLimitMiddleware {
    run_limit: Option<u32>,
    thread_limit: Option<u32>,
    exit: ModelExitBehavior,
    threads: ThreadCounts,
}

impl ModelCallLimitMiddleware {
    /// At most `limit` model calls per run, ending the run at the limit.
    pub fn per_run(limit: u32) -> Self {
        Self::from(ModelCallLimitConfig {
            run_limit: Some(limit.max(1)),
            thread_limit: None,
            exit_behavior: ModelExitBehavior::End,
        })
    }

    /// A limit from a config built in code, checked first.
    pub fn try_from_config(config: ModelCallLimitConfig) -> std::result::Result<Self, ConfigErrors> {
        config.check("")?;
        Ok(config.into())
    }

    /// The same middleware also capping each thread at `limit` model calls.
    pub fn thread_limit(mut self, limit: u32) -> Self {
        self.thread_limit = Some(limit.max(1));
        self
    }

    /// The same middleware failing the run at the limit instead of ending it.
    pub fn error_at_limit(mut self) -> Self {
        self.exit = ModelExitBehavior::Error;
        self
    }

    /// The same middleware counting each thread's model calls in `ledger`
    /// (key `model_calls:THREAD`), shared by every process using it: across
    /// all of them at most `thread_limit` calls of a thread are ever made
    /// (each call is one atomic reservation). A key expires `ttl` after its
    /// thread's last call. A ledger that cannot answer refuses the call
    /// (`Middleware` error). Give two instances that count on one ledger
    /// different threads, or one instance only: they share the key.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tinyagents::middleware::ModelCallLimitMiddleware;
    /// use tinyagents::store::MemoryLedger;
    ///
    /// let limit = ModelCallLimitMiddleware::per_run(10)
    ///     .thread_limit(50)
    ///     .shared_thread_counts(Arc::new(MemoryLedger::default()), Duration::from_secs(86_400));
    /// # let _ = limit;
    /// ```
    pub fn shared_thread_counts(mut self, ledger: Arc<dyn LedgerStore>, ttl: Duration) -> Self {
        self.threads = self.threads.shared(
            ledger,
            "model_calls".to_owned(),
            ttl,
            ("model_call_limit", "shared_thread_counts"),
        );
        self
    }

    /// The model calls this process counted so far for `thread` (with
    /// [`shared_thread_counts`](Self::shared_thread_counts), the ledger's
    /// `totals("model_calls:THREAD")` is the count of every process).
    pub fn thread_count(&self, thread: &str) -> u32 {
        self.threads.count(thread)
    }

    /// Starts `thread`'s count over.
    pub fn reset_thread(&self, thread: &str) {
        self.threads.reset(thread);
    }
}

/// Caps model calls per run and per thread; at the limit the run ends with a final message naming it, or fails with `LimitExceeded`.
#[middleware(
    builtin,
    name = "model_call_limit",
    config = ModelCallLimitConfig,
    run_state = RunCounts,
    doc(
        mutation = "None on the request. At the limit with `end`, it asks the loop to stop with a final assistant message (`Model call limit reached: …`).",
        events = "With `end`, the loop emits `ControlApplied { control: \"stop_with_final\" }`; nothing of its own otherwise.",
        failure = "Fails closed: at the limit the call is never made. `error` fails the run with `LimitExceeded { limit: \"model_call_limit\" }`; `end` stops it cleanly. Runs without a `thread_id` are counted per run only. With `shared_thread_counts`, a ledger that cannot answer refuses the call with a `Middleware` error.",
        streaming = "Decides before the call; a call that is admitted streams normally.",
        cache = "None: the request is not touched.",
        retries = "Counts turns in `before_model`, outside the model onion: retries and fallbacks inside one turn count once. Use `limits` (`max_price_usd`) to bound every paid attempt."
    )
)]
impl ModelCallLimitMiddleware {
    #[before_model]
    async fn count<C>(
        &self,
        ctx: &mut RunContext<C>,
        counts: &mut RunCounts,
        request: &mut ModelRequest,
    ) -> Result<()> {
        let _ = request;
        if replays_next_turn(ctx) {
            // `human_in_the_loop` answers this turn with the reply it paused on: no model call
            return Ok(());
        }
        let run = counts.count;
        let over = if self.run_limit.is_some_and(|limit| run >= limit) {
            Some(format!("this run made {run} model calls"))
        } else if self.thread_limit.is_some() || !self.threads.is_shared() {
            // Without a limit the thread is still counted in process (`thread_count`).
            let limit = self.thread_limit.unwrap_or(u32::MAX);
            (!self.threads.admit(ctx, limit).await?).then(|| format!("this thread made {limit} model calls"))
        } else {
            None
        };
        if let Some(what) = over {
            let message = format!(
                "Model call limit reached: {what}, {}.",
                describe(self.run_limit, self.thread_limit)
            );
            return match self.exit {
                ModelExitBehavior::Error => Err(TinyAgentsError::limit("model_call_limit", message)),
                ModelExitBehavior::End => {
                    ctx.flow_mut()
                        .request_control(MiddlewareControl::StopWithFinal(message));
                    Ok(())
                }
            };
        }
        counts.count += 1;
        Ok(())
    }
}

//! [`ToolCallLimitMiddleware`]: caps tool calls per run and per thread, for one tool or all.

use std::sync::Arc;
use std::time::Duration;

use super::counts::{describe, ExitBehavior, RunCounts, ThreadCounts};
use crate::config::{ConfigErrors, ConfigViolation, MiddlewareConfig};
use crate::harness::context::{MiddlewareControl, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::{AgentRun, PreparedBatch};
use crate::harness::tool::ToolCall;
use crate::store::LedgerStore;
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ToolCallLimitMiddleware`] (`type = "tool_call_limit"`); at least one limit must be set.
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::ToolCallLimitConfig;
///
/// let config: ToolCallLimitConfig = from_toml_str("tool_name = \"search\"\nrun_limit = 3").unwrap();
/// let _limit = config.build();
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "tool_call_limit", builds = ToolCallLimitMiddleware, validate = check_tool_call_limit)]
pub struct ToolCallLimitConfig {
    /// The tool counted; unset: every tool call counts.
    pub tool_name: Option<String>,
    /// Most calls in one run.
    #[config(range = 1..)]
    pub run_limit: Option<u32>,
    /// Most calls across the runs of one thread (`RunConfig::thread_id`).
    #[config(range = 1..)]
    pub thread_limit: Option<u32>,
    /// At the limit: `continue` gives each blocked call an error result, `end` stops the run with a final message, `error` fails it.
    #[config(default = "continue")]
    pub exit_behavior: ExitBehavior,
}

fn check_tool_call_limit(c: &ToolCallLimitConfig) -> std::result::Result<(), ConfigViolation> {
    if c.run_limit.is_none() && c.thread_limit.is_none() {
        return Err(ConfigViolation::new(
            "run_limit",
            "set `run_limit`, `thread_limit` or both: a limit with no bound does nothing",
        ));
    }
    if c.tool_name.as_deref() == Some("") {
        return Err(
            ConfigViolation::new("tool_name", "must name a tool, or be left out to count every tool").with_value(""),
        );
    }
    Ok(())
}

impl From<ToolCallLimitConfig> for ToolCallLimitMiddleware {
    fn from(c: ToolCallLimitConfig) -> Self {
        Self {
            tool: c.tool_name,
            run_limit: c.run_limit,
            thread_limit: c.thread_limit,
            exit: c.exit_behavior,
            threads: ThreadCounts::default(),
        }
    }
}

/// With an agent file's `[store]`: a `thread_limit` counts the thread's
/// calls in the store's ledger, across every worker
/// ([`shared_thread_counts`](ToolCallLimitMiddleware::shared_thread_counts),
/// keys kept for [`SHARED_COUNT_TTL`](crate::store::SHARED_COUNT_TTL)).
impl crate::config::BuildShared for ToolCallLimitConfig {
    fn build_shared(self, stores: &crate::store::SharedStores) -> Result<ToolCallLimitMiddleware> {
        let shared = self.thread_limit.is_some();
        let limit = ToolCallLimitMiddleware::from(self);
        Ok(if shared {
            limit.shared_thread_counts(stores.ledger(), crate::store::SHARED_COUNT_TTL)
        } else {
            limit
        })
    }
}

/// Caps tool calls per run and per thread, for one tool or every tool
/// (LangChain's `ToolCallLimitMiddleware`). It reviews each reply's batch
/// (`on_tool_batch`) in the model's order, so concurrent calls are counted
/// deterministically. At the limit:
///
/// * `continue` (default): each blocked call gets an error result telling
///   the model not to call it again; the other calls run; the run goes on.
/// * `end`: no call of the batch runs (each gets a "not run" result) and the
///   run stops with a final assistant message naming the limit.
/// * `error`: the run fails with [`TinyAgentsError::LimitExceeded`].
///
/// Every tool call still gets exactly one result. Give each instance its own
/// name in a stack (`stack.add_named`) to cap several tools separately.
///
/// ```
/// use tinyagents::middleware::ToolCallLimitMiddleware;
/// let search = ToolCallLimitMiddleware::per_run(Some("search"), 3);
/// # let _ = search;
/// ```
#[derive(Debug, Clone)]
pub struct ToolCallLimitMiddleware {
    tool: Option<String>,
    run_limit: Option<u32>,
    thread_limit: Option<u32>,
    exit: ExitBehavior,
    threads: ThreadCounts,
}

impl ToolCallLimitMiddleware {
    /// At most `limit` calls per run of `tool` (or of every tool), blocking the rest (`continue`).
    pub fn per_run(tool: Option<&str>, limit: u32) -> Self {
        Self::from(ToolCallLimitConfig {
            tool_name: tool.map(str::to_owned),
            run_limit: Some(limit.max(1)),
            thread_limit: None,
            exit_behavior: ExitBehavior::Continue,
        })
    }

    /// A limit from a config built in code, checked first.
    pub fn try_from_config(config: ToolCallLimitConfig) -> std::result::Result<Self, ConfigErrors> {
        config.check("")?;
        Ok(config.into())
    }

    /// The same middleware also capping each thread at `limit` calls.
    pub fn thread_limit(mut self, limit: u32) -> Self {
        self.thread_limit = Some(limit.max(1));
        self
    }

    /// The same middleware with another exit behaviour.
    pub fn exit_behavior(mut self, exit: ExitBehavior) -> Self {
        self.exit = exit;
        self
    }

    /// The same middleware counting each thread's calls in `ledger` (key
    /// `tool_calls:TOOL:THREAD`, `*` for every tool), shared by every
    /// process using it: across all of them at most `thread_limit` calls of
    /// a thread are ever admitted (each call is one atomic reservation, in
    /// the model's order; calls of a batch that `end` or `error` stops are
    /// given back). A key expires `ttl` after its thread's last call. A
    /// ledger that cannot answer refuses the batch (`Middleware` error).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tinyagents::middleware::ToolCallLimitMiddleware;
    /// use tinyagents::store::MemoryLedger;
    ///
    /// let search = ToolCallLimitMiddleware::per_run(Some("search"), 3)
    ///     .thread_limit(20)
    ///     .shared_thread_counts(Arc::new(MemoryLedger::default()), Duration::from_secs(86_400));
    /// # let _ = search;
    /// ```
    pub fn shared_thread_counts(mut self, ledger: Arc<dyn LedgerStore>, ttl: Duration) -> Self {
        let prefix = format!("tool_calls:{}", self.tool.as_deref().unwrap_or("*"));
        self.threads = self
            .threads
            .shared(ledger, prefix, ttl, ("tool_call_limit", "shared_thread_counts"));
        self
    }

    /// The calls this process counted so far for `thread` (with
    /// [`shared_thread_counts`](Self::shared_thread_counts), the ledger's
    /// totals are the count of every process).
    pub fn thread_count(&self, thread: &str) -> u32 {
        self.threads.count(thread)
    }

    /// Starts `thread`'s count over.
    pub fn reset_thread(&self, thread: &str) {
        self.threads.reset(thread);
    }

    fn counts(&self, name: &str) -> bool {
        self.tool.as_deref().is_none_or(|t| t == name)
    }

    fn what(&self) -> String {
        match &self.tool {
            Some(t) => format!("`{t}`"),
            None => "tools".to_owned(),
        }
    }
}

/// Caps tool calls per run and per thread, for one tool or all; blocked calls get an error result (`continue`), or the run ends or fails.
#[middleware(
    builtin,
    name = "tool_call_limit",
    config = ToolCallLimitConfig,
    run_state = RunCounts,
    doc(
        mutation = "Rejects blocked calls in the prepared batch with an error result (`Tool call limit reached: …`); with `end`, asks the loop to stop with a final message.",
        events = "None of its own; blocked calls still get `after_tool` and their result; with `end` the loop emits `ControlApplied { control: \"stop_with_final\" }`.",
        failure = "Fails closed: a call over the limit never runs. `continue` answers it with an error result, `end` stops the run before any call of the batch runs (each gets a \"not run\" result, right after its assistant message and before the final message, so the transcript stays one providers accept), `error` fails the run with `LimitExceeded { limit: \"tool_call_limit\" }`. Runs without a `thread_id` are counted per run only. With `shared_thread_counts`, a ledger that cannot answer refuses the batch with a `Middleware` error.",
        streaming = "Decides on the whole batch before any call starts; admitted calls stream progress normally.",
        cache = "None: the request is not touched; error results enter the conversation like any tool result.",
        retries = "Counts each call once in the batch review, outside the tool onion: tool retries inside a call do not count again. A counted call that never starts (a later review rejects it, `human_in_the_loop` pauses the batch to ask a person, a jump leaves the batch, the run fails) is given back at the next batch review or when the run ends, so an approved call is counted once, when it runs."
    )
)]
impl ToolCallLimitMiddleware {
    #[on_tool_batch]
    async fn review<C>(
        &self,
        ctx: &mut RunContext<C>,
        counts: &mut RunCounts,
        batch: &mut PreparedBatch,
    ) -> Result<()> {
        // what the previous batch counted and never started goes back first
        self.give_back_unstarted(ctx, counts).await?;
        let mut run = counts.count;
        let thread_limit = self.thread_cap();
        let (mut admitted, mut blocked, mut ids) = (0u32, Vec::new(), Vec::new());
        for (i, p) in batch.calls().iter().enumerate() {
            if !self.counts(&p.call.name) {
                continue;
            }
            if self.run_limit.is_some_and(|l| run >= l) {
                blocked.push((i, p.call.name.clone(), "run"));
                continue;
            }
            if let Some(limit) = thread_limit {
                match self.threads.admit(ctx, limit).await {
                    Ok(true) => {}
                    Ok(false) => {
                        blocked.push((i, p.call.name.clone(), "thread"));
                        continue;
                    }
                    Err(e) => {
                        // Give back what this batch counted: none of it runs.
                        let _ = self.threads.release(ctx, admitted).await;
                        return Err(e);
                    }
                }
            }
            run += 1;
            admitted += 1;
            ids.push(p.call.id.clone());
        }
        if blocked.is_empty() || self.exit == ExitBehavior::Continue {
            counts.count += admitted;
            counts.record(ids);
        } else if thread_limit.is_some() {
            // `end` and `error` run no call of the batch: its thread counts go back.
            self.threads.release(ctx, admitted).await?;
        }
        let Some((_, _, scope)) = blocked.first() else {
            return Ok(());
        };
        let message = format!(
            "Tool call limit reached for {}: {}; this {scope} has used them all.",
            self.what(),
            describe(self.run_limit, self.thread_limit)
        );
        match self.exit {
            ExitBehavior::Error => Err(TinyAgentsError::limit("tool_call_limit", message)),
            ExitBehavior::End => {
                ctx.flow_mut()
                    .request_control(MiddlewareControl::StopWithFinal(message));
                Ok(())
            }
            ExitBehavior::Continue => {
                for (i, name, _) in blocked {
                    batch.reject(
                        i,
                        format!("{message} The call to `{name}` was not run; do not call it again."),
                    );
                }
                Ok(())
            }
        }
    }

    /// A counted call starts: it stays counted.
    #[before_tool]
    fn started(&self, counts: &mut RunCounts, call: &mut ToolCall) -> Result<()> {
        counts.started(&call.id);
        Ok(())
    }

    /// The run ends (paused, failed or finished): calls counted that never started are given back.
    #[after_agent]
    async fn settle<C>(&self, ctx: &mut RunContext<C>, counts: &mut RunCounts, run: &mut AgentRun) -> Result<()> {
        let _ = run;
        self.give_back_unstarted(ctx, counts).await
    }
}

impl ToolCallLimitMiddleware {
    /// The cap a review admits each call's thread count against: the thread
    /// limit; without one the thread is still counted in process
    /// (`thread_count`), but not in a shared ledger.
    fn thread_cap(&self) -> Option<u32> {
        match self.thread_limit {
            Some(limit) => Some(limit),
            None if !self.threads.is_shared() => Some(u32::MAX),
            None => None,
        }
    }

    /// Gives back the calls a review counted that never started: to the
    /// run's count, and to the thread's when a thread limit counted them.
    async fn give_back_unstarted<C>(&self, ctx: &RunContext<C>, counts: &mut RunCounts) -> Result<()> {
        let n = counts.take_unstarted();
        if n == 0 {
            return Ok(());
        }
        if self.thread_cap().is_some() {
            self.threads.release(ctx, n).await?;
        }
        Ok(())
    }
}

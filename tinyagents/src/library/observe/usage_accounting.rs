//! [`UsageAccountingMiddleware`]: token usage folded from every model
//! response into shared [`UsageTotals`], and per run into [`RunUsage`]
//! (sub-agent runs rolled up).

use std::sync::{Arc, Mutex};

use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::middleware::{MiddlewareToolOutcome, ToolHandler};
use crate::harness::model::{ModelResponse, Usage};
use crate::harness::run::AgentRun;
use crate::harness::tool::ToolCall;
use tinyagents_macros::middleware;

/// Usage folded from every model response an accounting middleware saw, at
/// every depth and across every run it serves.
///
/// ```
/// use tinyagents::middleware::UsageTotals;
/// let totals = UsageTotals::default();
/// assert_eq!((totals.responses, totals.usage.cache_read_tokens), (0, 0));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageTotals {
    /// Tokens by class: uncached input, output (reasoning included), reasoning, cache read, cache write.
    pub usage: Usage,
    /// Model responses folded.
    pub responses: u64,
    /// Runs that ended (`after_agent`).
    pub runs: u64,
}

/// The usage of one run, kept in the run's context.
///
/// ```
/// use tinyagents::middleware::RunUsage;
/// use tinyagents::prelude::*;
///
/// let run = RunUsage { own: Usage::new(10, 2), responses: 1, sub_agents: Usage::new(5, 1) };
/// assert_eq!(run.total(), Usage::new(15, 3));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunUsage {
    /// Usage of the run's own model responses.
    pub own: Usage,
    /// The run's own model responses.
    pub responses: u64,
    /// Usage rolled up from sub-agent runs (reported by tool calls, e.g. [`AgentTool`](crate::harness::agent::AgentTool)).
    pub sub_agents: Usage,
}

impl RunUsage {
    /// Own usage plus sub-agent usage.
    pub fn total(&self) -> Usage {
        self.own + self.sub_agents
    }
}

#[derive(Default)]
struct RunUsageCell(Mutex<RunUsage>);

/// `a - b`, field by field (never below zero).
fn minus(a: Usage, b: Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens.saturating_sub(b.input_tokens),
        output_tokens: a.output_tokens.saturating_sub(b.output_tokens),
        reasoning_tokens: a.reasoning_tokens.saturating_sub(b.reasoning_tokens),
        cache_read_tokens: a.cache_read_tokens.saturating_sub(b.cache_read_tokens),
        cache_write_tokens: a.cache_write_tokens.saturating_sub(b.cache_write_tokens),
    }
}

/// Folds the token usage of every model response into shared [`UsageTotals`]
/// (readable while runs go on, through [`UsageAccountingMiddleware::totals`])
/// and into the run's own [`RunUsage`], which also rolls up the usage of
/// sub-agent runs reported by tool calls.
///
/// Shared totals count every response this instance sees: give a sub-agent
/// the same stack (`Agent::with_shared_stack`) and its responses are counted
/// as they happen; they are rolled up into the parent's [`RunUsage`] either way.
///
/// ```
/// use tinyagents::middleware::UsageAccountingMiddleware;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let usage = UsageAccountingMiddleware::new();
/// let handle = usage.clone();
/// let reply = ModelResponse::text("hi").with_usage(Usage::new(12, 3));
/// let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Reply(reply)]))
///     .with_stack(MiddlewareStack::new().with(usage)?);
/// let mut ctx = RunContext::new(RunConfig::new("r"), ());
/// agent.run(&mut ctx, &(), "hello").await?;
/// assert_eq!(handle.totals().usage, Usage::new(12, 3));
/// assert_eq!(UsageAccountingMiddleware::run_usage(&ctx).own, Usage::new(12, 3));
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct UsageAccountingMiddleware {
    totals: Arc<Mutex<UsageTotals>>,
}

impl UsageAccountingMiddleware {
    /// An accounting middleware with zero totals. Clones share the totals.
    pub fn new() -> Self {
        Self::default()
    }

    /// A snapshot of the shared totals.
    pub fn totals(&self) -> UsageTotals {
        *self.totals.lock().expect("usage totals lock")
    }

    /// The usage of the run `ctx` belongs to, so far.
    pub fn run_usage<C>(ctx: &RunContext<C>) -> RunUsage {
        *ctx.locals().local::<RunUsageCell>().0.lock().expect("run usage lock")
    }
}

/// Folds token usage (cache read and write included) from every model response into shared totals and per-run figures, rolling sub-agent usage up to the parent run.
#[middleware(
    builtin,
    name = "usage_accounting",
    doc(
        mutation = "None: it only reads responses and tool outcomes.",
        events = "`Custom { middleware: \"usage_accounting\", name: \"run_usage\", data }` in `after_agent`, with the run's own, sub-agent and total token counts by class.",
        failure = "Never fails; a tool call's error passes through unchanged (its usage, if any, was already reported to the run).",
        streaming = "Reads the accumulated response in `after_model`, so streaming costs nothing; usage deltas are already summed by the accumulator.",
        cache = "Counts cache read and cache write tokens separately from uncached input; it does not touch the request.",
        retries = "Counts responses after the model onion, so a failed attempt (which reports no usage) adds nothing and a fallback's response is counted once; the run's own `Usage` from `RunContext::usage` includes every attempt that reported usage."
    )
)]
impl UsageAccountingMiddleware {
    #[after_model]
    fn fold<C>(&self, ctx: &mut RunContext<C>, response: &mut ModelResponse) -> Result<()> {
        {
            let mut t = self.totals.lock().expect("usage totals lock");
            t.usage += response.usage;
            t.responses += 1;
        }
        let cell = ctx.locals().local::<RunUsageCell>();
        let mut run = cell.0.lock().expect("run usage lock");
        run.own += response.usage;
        run.responses += 1;
        Ok(())
    }

    #[wrap_tool]
    async fn roll_up<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        call: ToolCall,
        next: ToolHandler<'_, S, C>,
    ) -> Result<MiddlewareToolOutcome> {
        let before = *ctx.usage();
        let outcome = next.run(ctx, state, call).await;
        let reported = minus(*ctx.usage(), before);
        if !reported.is_zero() {
            ctx.locals()
                .local::<RunUsageCell>()
                .0
                .lock()
                .expect("run usage lock")
                .sub_agents += reported;
        }
        outcome
    }

    #[after_agent]
    fn report<C>(&self, ctx: &mut RunContext<C>, run: &mut AgentRun) -> Result<()> {
        let _ = run;
        self.totals.lock().expect("usage totals lock").runs += 1;
        let usage = Self::run_usage(ctx);
        ctx.events().emit_with(EventKind::Custom, || AgentEvent::Custom {
            middleware: "usage_accounting".into(),
            name: "run_usage".into(),
            data: serde_json::json!({
                "own": usage.own,
                "sub_agents": usage.sub_agents,
                "total": usage.total(),
                "responses": usage.responses,
            }),
        });
        Ok(())
    }
}

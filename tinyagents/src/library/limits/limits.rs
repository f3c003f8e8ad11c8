//! [`LimitsMiddleware`]: `max_steps` per session, `max_turns`
//! and `max_price_usd` per execution cycle, with best-effort price enforcement.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;

use super::budget::{AccountingJournal, Basis, BudgetSnapshot, PriceBudget};
use super::counts::ThreadCounts;
use crate::config::{ConfigError, ConfigErrors, MiddlewareConfig};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::{MiddlewareModelOutcome, ModelHandler};
use crate::harness::model::ModelRequest;
use crate::harness::model::TokenRates;
use crate::harness::tool::{AsyncCallGuard, GuardedRun, Restriction, ToolCall};
use crate::library::policy::replays_next_turn;
use crate::store::{LedgerStore, SharedBudget};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`LimitsMiddleware`] (`type = "limits"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::LimitsConfig;
///
/// let config: LimitsConfig = from_toml_str("max_price_usd = 1.0\ninput_cost_per_million = 3.0").unwrap();
/// let _limits = config.build();
/// let err = from_toml_str::<LimitsConfig>("cache_read_cost_per_million = -0.3").unwrap_err();
/// assert_eq!(err.to_string(), "invalid configuration: `cache_read_cost_per_million` = -0.3: must not be negative");
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "limits", builds = LimitsMiddleware)]
pub struct LimitsConfig {
    /// Most tool calls per session: per conversation thread (`RunConfig::thread_id`) across its runs, or per run for a run without a thread.
    #[config(range = 1..)]
    pub max_steps: Option<u32>,
    /// Most model turns per execution cycle (run).
    #[config(range = 1..)]
    pub max_turns: Option<u32>,
    /// Most USD spent per execution cycle, checked before each paid attempt (best effort, not a reservation).
    #[config(finite, non_negative)]
    pub max_price_usd: Option<f64>,
    /// Manual budget rate: USD per million uncached input tokens.
    #[config(finite, non_negative)]
    pub input_cost_per_million: Option<f64>,
    /// Manual budget rate: USD per million output tokens (reasoning included).
    #[config(finite, non_negative)]
    pub output_cost_per_million: Option<f64>,
    /// Manual budget rate: USD per million cache-read tokens (never derived from the input rate).
    #[config(finite, non_negative)]
    pub cache_read_cost_per_million: Option<f64>,
    /// Manual budget rate: USD per million cache-write tokens (never derived from the input rate).
    #[config(finite, non_negative)]
    pub cache_write_cost_per_million: Option<f64>,
    /// Manual budget rate: USD per million one-hour cache-write tokens (never derived from the base write rate).
    #[config(finite, non_negative)]
    pub cache_write_1h_cost_per_million: Option<f64>,
    /// Providers (the part of a `provider:model` id before the colon) or model ids not metered per token: their usage is excluded from the budget.
    #[config(default = vec!["codex".to_owned(), "kimi-code".to_owned()])]
    pub excluded_providers: Vec<String>,
}

impl LimitsConfig {
    fn rates(&self) -> TokenRates {
        TokenRates {
            input: self.input_cost_per_million,
            output: self.output_cost_per_million,
            cache_read: self.cache_read_cost_per_million,
            cache_write: self.cache_write_cost_per_million,
            cache_write_1h: self.cache_write_1h_cost_per_million,
        }
    }
}

impl From<LimitsConfig> for LimitsMiddleware {
    fn from(c: LimitsConfig) -> Self {
        Self {
            max_steps: c.max_steps,
            max_turns: c.max_turns,
            cap: c.max_price_usd,
            manual: Arc::new(RwLock::new(c.rates())),
            excluded: c.excluded_providers.into(),
            journal: None,
            lifetime: Arc::default(),
            thread_steps: ThreadCounts::default(),
            shared: None,
        }
    }
}

/// With an agent file's `[store]`: `max_steps` counts each thread's tool
/// calls in the store's ledger, across every worker
/// ([`shared_steps`](LimitsMiddleware::shared_steps), keys kept for
/// [`SHARED_COUNT_TTL`](crate::store::SHARED_COUNT_TTL)). The cycle's
/// `max_price_usd` stays per run; a budget shared by workers is built in
/// code (`shared_budget`), since it needs its own key and cap.
impl crate::config::BuildShared for LimitsConfig {
    fn build_shared(self, stores: &crate::store::SharedStores) -> Result<LimitsMiddleware> {
        let shared = self.max_steps.is_some();
        let limits = LimitsMiddleware::from(self);
        Ok(if shared {
            limits.shared_steps(stores.ledger(), crate::store::SHARED_COUNT_TTL)
        } else {
            limits
        })
    }
}

/// Per-run step and turn counts.
#[derive(Default)]
struct Counts {
    turns: AtomicU32,
    steps: AtomicU32,
}

/// A fee the request is known to incur that token prices do not value
/// (an unsupported pricing dimension): provider-side server tools asked
/// for through `params.extra` (web search, code execution, file search…).
fn unvalued_fee(request: &ModelRequest) -> Option<&'static str> {
    let extra = &request.params.extra;
    if extra.contains_key("web_search_options") {
        return Some("web search");
    }
    let tools = extra.get("tools").and_then(|t| t.as_array())?;
    tools.iter().find_map(|tool| {
        let kind = tool.get("type").and_then(|t| t.as_str())?;
        [
            ("web_search", "web search"),
            ("web_fetch", "web fetch"),
            ("code_execution", "code execution"),
            ("code_interpreter", "code interpreter"),
            ("file_search", "file search"),
            ("computer", "computer use"),
        ]
        .into_iter()
        .find(|(prefix, _)| kind.starts_with(prefix))
        .map(|(_, name)| name)
    })
}

/// Whether a request asks for one-hour cache writes (`params.extra["cache_ttl"] = "1h"`).
fn one_hour_writes(request: &ModelRequest) -> bool {
    request.params.extra.get("cache_ttl").and_then(|v| v.as_str()) == Some("1h")
}

/// Enforces execution limits: `max_steps` (tool calls per
/// session: per conversation thread across its runs, or per run without a
/// thread), `max_turns` (model turns per run) and `max_price_usd` (USD per
/// execution cycle, "Price limits").
///
/// **What the price cap counts:** every paid attempt attributed to the
/// cycle — main responses, retries, fallbacks, the built-in summarisers'
/// model calls (compaction, transcript and output summaries), and the whole
/// tree of sub-agents, concurrent children included (a child's budget is
/// linked to its parent's: see [`PriceBudget`]); usage that a failed
/// attempt streamed before failing is charged too. Known fees that token
/// prices do not value (server tools asked for in `params.extra`: web
/// search, code execution, file search…) make the spend a lower bound with
/// a notice, never a silent zero.
///
/// The price cap is checked before each paid attempt is dispatched (it sits
/// inside retry and fallback, so every attempt is one), against the cycle's
/// known spend; at the cap the attempt is not sent and the run fails with
/// `LimitExceeded { limit: "max_price_usd" }`. It is not a reservation:
/// attempts in flight count once they settle. Usage is valued with the
/// manual rates when any is set, else with the built-in
/// [`PRICE_TABLE`](super::PRICE_TABLE); usage that cannot be priced makes the
/// spend a lower bound and sends one `Notice { source: "price_limit" }` per
/// cycle and reason. Providers not metered per token are excluded.
///
/// ```
/// use tinyagents::middleware::{LimitsMiddleware, TokenRates};
///
/// let limits = LimitsMiddleware::new()
///     .max_price_usd(1.0)
///     .manual_rates(TokenRates { input: Some(3.0), output: Some(15.0), ..TokenRates::default() })
///     .unwrap();
/// assert_eq!(limits.lifetime_spend_usd(), 0.0);
/// ```
#[derive(Clone)]
pub struct LimitsMiddleware {
    max_steps: Option<u32>,
    max_turns: Option<u32>,
    cap: Option<f64>,
    manual: Arc<RwLock<TokenRates>>,
    excluded: Arc<[String]>,
    journal: Option<Arc<dyn AccountingJournal>>,
    lifetime: Arc<Mutex<f64>>,
    /// Tool calls per conversation thread, across its runs (`max_steps` is per
    /// session): in process, or in a shared ledger (`shared_steps`).
    thread_steps: ThreadCounts,
    /// A budget shared with other processes, checked on top of `cap`.
    shared: Option<SharedBudget>,
}

impl std::fmt::Debug for LimitsMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimitsMiddleware")
            .field("max_steps", &self.max_steps)
            .field("max_turns", &self.max_turns)
            .field("max_price_usd", &self.cap)
            .field("manual", &*self.manual.read().expect("manual rates lock"))
            .field("excluded", &self.excluded)
            .finish_non_exhaustive()
    }
}

impl Default for LimitsMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl LimitsMiddleware {
    /// No limits yet, catalog pricing, the default excluded providers.
    pub fn new() -> Self {
        LimitsConfig::defaults().expect("every limits key has a default").into()
    }

    /// A limits middleware from a config built in code, checked first.
    pub fn try_from_config(config: LimitsConfig) -> std::result::Result<Self, ConfigErrors> {
        config.check("")?;
        Ok(config.into())
    }

    /// The same middleware with a price cap per cycle.
    ///
    /// # Panics
    /// If `usd` is negative or not finite.
    pub fn max_price_usd(mut self, usd: f64) -> Self {
        assert!(
            usd.is_finite() && usd >= 0.0,
            "max_price_usd must be finite and not negative, got {usd}"
        );
        self.cap = Some(usd);
        self
    }

    /// The same middleware with a tool-call cap per session: per
    /// conversation thread across its runs, or per run without a thread.
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = Some(steps.max(1));
        self
    }

    /// The same middleware with a model-turn cap per cycle.
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.max_turns = Some(turns.max(1));
        self
    }

    /// The same middleware also spending against `budget`, a cap shared by
    /// every process using the same ledger and key (Redis, PostgreSQL,
    /// SQLite: see [`SharedBudget`] for the overshoot bound). Each paid
    /// attempt reserves on it before it is sent and settles its real cost
    /// after; at the shared cap the attempt is not sent and the run fails
    /// with `LimitExceeded { limit: "max_price_usd" }`; a store that cannot
    /// answer fails the attempt (nothing is sent unchecked).
    pub fn shared_budget(mut self, budget: SharedBudget) -> Self {
        self.shared = Some(budget);
        self
    }

    /// The same middleware counting each thread's tool calls (`max_steps`
    /// per session) in `ledger` under `steps:THREAD`, shared by every
    /// process using it, so a session resumed in another worker keeps its
    /// count; the count expires `ttl` after the thread's last call. Each
    /// tool call is one atomic reservation: across all processes at most
    /// `max_steps` calls of a thread are ever admitted. A run without a
    /// thread is counted per run, as without a ledger. A ledger that cannot
    /// answer refuses the call (`Middleware` error).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tinyagents::middleware::LimitsMiddleware;
    /// use tinyagents::store::MemoryLedger;
    ///
    /// let limits = LimitsMiddleware::new()
    ///     .max_steps(20)
    ///     .shared_steps(Arc::new(MemoryLedger::default()), Duration::from_secs(86_400));
    /// # let _ = limits;
    /// ```
    pub fn shared_steps(mut self, ledger: Arc<dyn LedgerStore>, ttl: Duration) -> Self {
        self.thread_steps = self
            .thread_steps
            .shared(ledger, "steps".to_owned(), ttl, ("limits", "shared_steps"));
        self
    }

    /// The same middleware recording every charge in `journal`.
    pub fn with_journal(mut self, journal: Arc<dyn AccountingJournal>) -> Self {
        self.journal = Some(journal);
        self
    }

    /// The same middleware with manual budget rates (checked: finite, not negative).
    pub fn manual_rates(self, rates: TokenRates) -> std::result::Result<Self, ConfigErrors> {
        self.set_manual_rates(rates)?;
        Ok(self)
    }

    /// Replaces the manual budget rates for attempts dispatched from now on;
    /// charges already settled keep the valuation they were dispatched with.
    pub fn set_manual_rates(&self, rates: TokenRates) -> std::result::Result<(), ConfigErrors> {
        let mut errors = ConfigErrors::new();
        for (class, rate) in rates.classes() {
            if let Some(r) = rate
                && (!r.is_finite() || r < 0.0)
            {
                let value = if r.is_finite() {
                    serde_json::json!(r)
                } else {
                    serde_json::json!(r.to_string())
                };
                errors.push(ConfigError::new(
                    format!("{class}_cost_per_million"),
                    Some(value),
                    "must be a finite number and not negative",
                ));
            }
        }
        errors.into_result()?;
        *self.manual.write().expect("manual rates lock") = rates;
        Ok(())
    }

    /// The budget valuation spent by every cycle this middleware served (the
    /// lifetime total, reported apart from any one cycle's cap).
    pub fn lifetime_spend_usd(&self) -> f64 {
        *self.lifetime.lock().expect("lifetime spend lock")
    }

    /// The budget of the cycle `ctx` belongs to.
    pub fn budget<C>(ctx: &RunContext<C>) -> BudgetSnapshot {
        PriceBudget::of(ctx).snapshot()
    }
}

/// A run's `max_steps`, counting the tool calls of its sub-agents: in the
/// run's session (the counts its own calls go to), or without a session in
/// the run's own count.
#[derive(educe::Educe)]
#[educe(Debug)]
struct StepGuard {
    session: Option<Arc<str>>,
    steps: ThreadCounts,
    #[educe(Debug(ignore))]
    run: Arc<Counts>,
    max: u32,
    /// The sub-agent calls already counted, by (run, batch, call id): the last
    /// check runs again for each retry inside a call, which is the same call.
    #[educe(Debug(ignore))]
    counted: std::sync::Mutex<std::collections::HashSet<(String, u64, String)>>,
}

impl AsyncCallGuard for StepGuard {
    fn check_call<'a>(
        &'a self,
        call: &'a ToolCall,
        run: &'a GuardedRun<'a>,
    ) -> BoxFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move {
            let this_call = (run.run_id.to_owned(), run.batch, call.id.clone());
            if self.counted.lock().expect("step guard lock").contains(&this_call) {
                // a retry of a call already counted (and admitted)
                return Ok(());
            }
            let (admitted, scope) = match &self.session {
                Some(session) => (
                    self.steps
                        .admit_in(session, self.max)
                        .await
                        .map_err(|e| e.to_string())?,
                    "the parent run's session",
                ),
                None => (
                    self.run.steps.fetch_add(1, Ordering::Relaxed) < self.max,
                    "the parent run",
                ),
            };
            if admitted {
                self.counted.lock().expect("step guard lock").insert(this_call);
                Ok(())
            } else {
                Err(format!(
                    "{scope} reached its limit of {} tool calls (`max_steps`), its sub-agents' included; `{}` was \
                     not run",
                    self.max, call.name
                ))
            }
        })
    }

    /// A sub-agent sharing the parent's `limits` counts its calls in the same
    /// session already (its own `before_tool`): with a session, the guard is
    /// the session's counts; without one, the parent run's own count.
    fn key(&self) -> usize {
        match &self.session {
            Some(_) => self.steps.key(),
            None => Arc::as_ptr(&self.run).cast::<()>() as usize,
        }
    }
}

/// Caps tool calls per session (`max_steps`), model turns (`max_turns`) and USD spend (`max_price_usd`) per execution cycle, sub-agents and summaries included; price checked before each paid attempt, best effort.
#[middleware(
    builtin,
    name = "limits",
    config = LimitsConfig,
    after_if_present = ["model_fallback", "model_retry", "output_limit_recovery", "structured_output"],
    doc(
        mutation = "None: it only admits or refuses calls and records the cycle's spend in the run context (`PriceBudget`).",
        events = "`Notice { source: \"price_limit\", is_error: false }` once per cycle per reason when usage cannot be fully priced (a token class with no rate, an unknown model, an attempt that ended without final usage or failed after reporting part of it, a server-tool fee); none when the sink does not want notices (the reasons stay in `LimitsMiddleware::budget`).",
        failure = "Fails closed: at a limit the call is not made and the run fails with `LimitExceeded` (`max_steps`, `max_turns`, `max_price_usd`). Incomplete pricing warns and continues against the known subtotal. A failure of the accounting journal fails the attempt with a `Middleware` error, and no further paid request of the cycle is sent. A shared budget or step counter (`shared_budget`, `shared_steps`: Redis, PostgreSQL, SQLite) that cannot answer refuses the call with a `Middleware` error; at the shared cap the call fails with `LimitExceeded`.",
        streaming = "Checks before the stream starts and values the accumulated usage when it settles; a request in flight is not an uncertainty.",
        cache = "Values cache reads, cache writes and one-hour cache writes (requests with `params.extra.cache_ttl = \"1h\"`) at their own rates, never derived from the input or base write rate.",
        retries = "Ordered inside `model_fallback`, `model_retry`, `output_limit_recovery` and `structured_output`, so every paid attempt (retries, fallbacks, escalations, re-asks for a valid reply) is checked and counted, with the usage a failed attempt streamed before failing; the built-in summarisers' calls and sub-agents' spend count in the same budget; paid calls made by other middleware count when they go through `PriceBudget::dispatch`."
    )
)]
impl LimitsMiddleware {
    #[before_agent]
    fn open_cycle<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        PriceBudget::of(ctx).install(Basis {
            cap: self.cap,
            manual: self.manual.clone(),
            excluded: self.excluded.clone(),
            journal: self.journal.clone(),
            lifetime: self.lifetime.clone(),
        });
        if let Some(max) = self.max_steps {
            // the run's `max_steps` holds over its sub-agents, whatever their stacks
            let guard = StepGuard {
                session: ctx.config().session().cloned(),
                steps: self.thread_steps.clone(),
                run: ctx.locals().local::<Counts>(),
                max,
                counted: Default::default(),
            };
            ctx.policy_mut()
                .add_restriction("limits", Restriction::AsyncGuard(Arc::new(guard)));
        }
        Ok(())
    }

    #[before_model]
    fn count_turn<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        let Some(max) = self.max_turns else { return Ok(()) };
        if replays_next_turn(ctx) {
            // `human_in_the_loop` answers this turn with the reply it paused on: no model turn
            return Ok(());
        }
        let counts = ctx.locals().local::<Counts>();
        if counts.turns.load(Ordering::Relaxed) >= max {
            return Err(TinyAgentsError::limit(
                "max_turns",
                format!("this run reached its limit of {max} model turns"),
            ));
        }
        counts.turns.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    #[before_tool]
    async fn count_step<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        let Some(max) = self.max_steps else { return Ok(()) };
        let (admitted, scope) = match ctx.config().session() {
            Some(_) => (
                self.thread_steps.admit(ctx, max).await?,
                if self.thread_steps.is_shared() {
                    "this session (thread, counted across every process on the shared store)"
                } else {
                    "this session (thread)"
                },
            ),
            None => (
                ctx.locals().local::<Counts>().steps.fetch_add(1, Ordering::Relaxed) < max,
                "this run",
            ),
        };
        if !admitted {
            return Err(TinyAgentsError::limit(
                "max_steps",
                format!(
                    "{scope} reached its limit of {max} tool calls; `{}` was not run",
                    call.name
                ),
            ));
        }
        Ok(())
    }

    #[wrap_model]
    async fn price<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let budget = PriceBudget::of(ctx);
        // The shared budget first (it holds a reservation), then this cycle's;
        // a local refusal releases the shared hold.
        let hold = match &self.shared {
            Some(shared) => Some(shared.reserve(ctx).await?),
            None => None,
        };
        let ticket = match budget.dispatch(ctx, one_hour_writes(&request)) {
            Ok(ticket) => ticket,
            Err(e) => {
                if let (Some(shared), Some(hold)) = (&self.shared, hold) {
                    shared.settle(hold, Some(0.0)).await?;
                }
                return Err(e);
            }
        };
        if let Some(fee) = unvalued_fee(&request) {
            budget.mark_incomplete(
                ctx,
                &format!("fee:{fee}"),
                &format!("{fee} fees apply to this request and are not valued"),
            );
        }
        let target = request
            .route
            .as_ref()
            .map(|r| r.0.id().to_owned())
            .or_else(|| request.model.clone())
            .unwrap_or_default();
        // Usage of attempts that failed before this one was dispatched is not this attempt's.
        let _ = ctx.take_failed_attempt_usage();
        match next.run(ctx, state, request).await {
            Ok(outcome) => {
                let response = outcome.response();
                let model = response.model.clone().unwrap_or(target);
                if !response.usage_reported {
                    budget.mark_incomplete(
                        ctx,
                        &format!("unreported:{model}"),
                        &format!("model `{model}` reported no usage, so the cost of its calls is unknown"),
                    );
                }
                let failed = ctx.take_failed_attempt_usage();
                let usd = ticket.settle_usd(ctx, &model, response.usage + failed);
                if let (Some(shared), Some(hold)) = (&self.shared, hold) {
                    // A charge the local journal could not record is charged its reservation.
                    shared.settle(hold, usd.as_ref().ok().copied()).await?;
                }
                usd?;
                Ok(outcome)
            }
            Err(e) => {
                let failed = ctx.take_failed_attempt_usage();
                let usd = if failed.is_zero() {
                    ticket.settle_unknown(ctx, &e);
                    Ok(None)
                } else {
                    ticket.settle_failed_usd(ctx, &target, failed, &e).map(Some)
                };
                if let (Some(shared), Some(hold)) = (&self.shared, hold) {
                    // An unknown cost is charged its reservation.
                    shared.settle(hold, usd.as_ref().ok().copied().flatten()).await?;
                }
                usd?;
                Err(e)
            }
        }
    }
}

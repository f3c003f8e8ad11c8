//! [`PriceBudget`]: one execution cycle's spend, kept in the run's context;
//! [`AttemptTicket`]s snapshot the valuation basis when an attempt is
//! dispatched and settle it; [`AccountingJournal`] records every charge.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};

use crate::harness::child_run::{ChildRun, ChildRunHook};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind, EventSink};
use crate::harness::model::Usage;
use crate::harness::model::{catalog_rates, provider_of, TokenRates};

/// Whether usage is metered per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BillingClass {
    /// Metered per token: it counts toward the budget.
    Metered,
    /// Not metered per token (a subscription): recorded, never priced, never counted.
    Excluded,
}

/// One settled paid attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct Charge {
    /// The model that answered.
    pub model: String,
    /// Its usage.
    pub usage: Usage,
    /// Metered or excluded.
    pub billing: BillingClass,
    /// The reported API cost: catalog-priced subtotal (`None` when excluded or the catalog has no price).
    pub api_usd: Option<f64>,
    /// The budget valuation (manual rates when any is set, else the catalog), snapshotted at dispatch;
    /// `None` when excluded.
    pub budget_usd: Option<f64>,
    /// Whether part of the usage could not be priced.
    pub partial: bool,
}

/// Where charges are recorded durably (a journal, a database). A failure
/// to record is an execution error: the attempt fails and no further paid
/// request of the cycle is sent.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use tinyagents::middleware::{AccountingJournal, Charge, LimitsMiddleware};
///
/// #[derive(Default)]
/// struct Lines(Mutex<Vec<String>>);
///
/// impl AccountingJournal for Lines {
///     fn record(&self, run_id: &str, charge: &Charge) -> Result<(), String> {
///         let line = format!("{run_id} {} {:?}", charge.model, charge.budget_usd);
///         self.0.lock().map_err(|e| e.to_string())?.push(line);
///         Ok(())
///     }
/// }
///
/// let limits = LimitsMiddleware::new().max_price_usd(5.0).with_journal(Arc::new(Lines::default()));
/// # let _ = limits;
/// ```
pub trait AccountingJournal: Send + Sync {
    /// Records one charge of run `run_id`.
    fn record(&self, run_id: &str, charge: &Charge) -> std::result::Result<(), String>;
}

/// The valuation basis of a cycle, installed by `LimitsMiddleware::before_agent`.
#[derive(Clone)]
pub(super) struct Basis {
    pub(super) cap: Option<f64>,
    pub(super) manual: Arc<RwLock<TokenRates>>,
    pub(super) excluded: Arc<[String]>,
    pub(super) journal: Option<Arc<dyn AccountingJournal>>,
    pub(super) lifetime: Arc<Mutex<f64>>,
}

#[derive(Default)]
struct State {
    basis: Option<Basis>,
    spent: f64,
    charges: Vec<Charge>,
    reasons: BTreeSet<String>,
    notified: BTreeSet<String>,
    journal_failed: Option<String>,
}

/// What a cycle's budget looks like now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BudgetSnapshot {
    /// The known spend in USD; `None` when every charge was excluded (no
    /// dollar total, unlike a known zero).
    pub spent_usd: Option<f64>,
    /// The cap, when one is set.
    pub cap_usd: Option<f64>,
    /// Every settled charge, in order.
    pub charges: Vec<Charge>,
    /// Why the spend is a lower bound (empty when it is exact).
    pub partial_reasons: Vec<String>,
}

/// One execution cycle's spend against `max_price_usd`, kept in the run's
/// context (so a new run starts at zero). Other middleware that makes paid
/// calls of its own (a summariser) attributes them to the cycle through it:
/// [`dispatch`](PriceBudget::dispatch) before the call, then settle the ticket.
///
/// **One budget covers the run tree.** A sub-agent's budget is linked to its
/// parent's ([`Locals::parent_local`](crate::harness::context::Locals::parent_local)): every charge a child settles also
/// counts in each ancestor's spend, and a child's attempt is refused when
/// its own cap *or any ancestor's* is reached, so three sub-agents under a
/// $1 cap share that dollar (concurrent children included: the check is not
/// a reservation, so spend can overshoot by the attempts in flight, as the
/// best-effort rule of `max_price_usd` says). A child without a `limits` middleware of
/// its own is valued with its nearest ancestor's rates.
///
/// ```
/// use tinyagents::middleware::PriceBudget;
/// use tinyagents::prelude::*;
///
/// let ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
/// let budget = PriceBudget::of(&ctx);
/// let ticket = budget.dispatch(&ctx, false).unwrap(); // no limits middleware: nothing to enforce
/// ticket.settle(&ctx, "gpt-4o", Usage::new(1000, 10)).unwrap();
/// assert_eq!(budget.snapshot().spent_usd, Some(0.0));
/// ```
#[derive(Default)]
pub struct PriceBudget {
    state: Mutex<State>,
    /// The budget of the parent run, for a sub-agent's run.
    parent: Option<Arc<PriceBudget>>,
}

impl std::fmt::Debug for PriceBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PriceBudget").field(&self.snapshot()).finish()
    }
}

/// An attempt admitted by [`PriceBudget::dispatch`], with the rates
/// snapshotted then. Settle it when the attempt ends; a ticket dropped
/// unsettled (an attempt abandoned by a timeout or a cancellation outside
/// it) makes the spend a lower bound.
#[derive(Debug)]
#[must_use = "settle the ticket when the attempt ends"]
pub struct AttemptTicket {
    budget: Option<Arc<PriceBudget>>,
    rates: Option<TokenRates>,
    one_hour_writes: bool,
}

/// Where a settled charge's notices go.
struct Reporter<'a> {
    run_id: &'a str,
    sink: &'a Arc<dyn EventSink>,
    wants_notices: bool,
}

impl<'a> Reporter<'a> {
    fn of<C>(ctx: &'a RunContext<C>) -> Self {
        Self {
            run_id: ctx.run_id(),
            sink: ctx.events().sink(),
            wants_notices: ctx.events().wants(EventKind::Notice),
        }
    }

    fn notice(&self, message: String) {
        if self.wants_notices {
            self.sink.emit(AgentEvent::Notice {
                source: "price_limit".into(),
                message,
                is_error: false,
            });
        }
    }
}

impl PriceBudget {
    /// The budget of the cycle `ctx` belongs to (linked to the parent run's
    /// budget when `ctx` is a sub-agent's run).
    pub fn of<C>(ctx: &RunContext<C>) -> Arc<PriceBudget> {
        if let Some(budget) = ctx.locals().try_local::<PriceBudget>() {
            return budget;
        }
        let budget = ctx.locals().local_with(|| PriceBudget {
            state: Mutex::default(),
            parent: ctx.locals().parent_local::<PriceBudget>(),
        });
        // The run's sub-agents spend this budget too: what their stacks did not price is charged when they return.
        let spend = ctx.locals().local_with(|| ChildSpend(budget.clone()));
        ctx.locals().child_run_hooks().install(spend);
        budget
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("price budget lock")
    }

    pub(super) fn install(&self, basis: Basis) {
        self.lock().basis = Some(basis);
    }

    /// This budget and its ancestors, nearest first.
    fn chain(self: &Arc<Self>) -> impl Iterator<Item = Arc<PriceBudget>> + use<> {
        std::iter::successors(Some(self.clone()), |b| b.parent.clone())
    }

    /// The valuation basis: this cycle's, else the nearest ancestor's.
    fn basis(self: &Arc<Self>) -> Option<Basis> {
        self.chain().find_map(|b| b.lock().basis.clone())
    }

    /// Checks the cap before a paid attempt is dispatched: `Err` with a
    /// `max_price_usd` limit when the known spend has reached this cycle's
    /// cap or the cap of any ancestor run (a sub-agent spends its parent's
    /// budget), or an execution error after a failed journal record. Not a
    /// reservation: attempts in flight are not counted until they settle.
    /// `one_hour_writes` says the attempt's cache writes have a one-hour lifetime.
    pub fn dispatch<C>(self: &Arc<Self>, ctx: &RunContext<C>, one_hour_writes: bool) -> Result<AttemptTicket> {
        let _ = ctx;
        let mut rates = None;
        for (depth, budget) in self.chain().enumerate() {
            let state = budget.lock();
            if let Some(why) = &state.journal_failed {
                return Err(TinyAgentsError::middleware(
                    "limits",
                    format!("accounting could not be recorded ({why}); no further paid request is sent"),
                ));
            }
            let Some(basis) = &state.basis else { continue };
            if let Some(cap) = basis.cap
                && state.spent >= cap
            {
                let whose = if depth == 0 {
                    "this run".to_owned()
                } else {
                    format!("the run tree of an ancestor run ({depth} level(s) up)")
                };
                return Err(TinyAgentsError::limit(
                    "max_price_usd",
                    format!(
                        "{whose} has spent ${:.6} of its ${cap} budget; the next paid request was not sent",
                        state.spent
                    ),
                ));
            }
            if rates.is_none() {
                rates = Some(*basis.manual.read().expect("manual rates lock"));
            }
        }
        Ok(AttemptTicket {
            budget: Some(self.clone()),
            rates,
            one_hour_writes,
        })
    }

    /// Records a known condition that makes the spend incomplete (a fee that
    /// is not valued, for instance): the reason is kept in the accounting
    /// metadata and, with a cap set, a `price_limit` notice is sent once per
    /// cycle for it.
    pub fn mark_incomplete<C>(self: &Arc<Self>, ctx: &RunContext<C>, key: &str, message: &str) {
        self.note(&Reporter::of(ctx), key, message);
    }

    /// Adds a reason to this budget (one notice per cycle and key, with a cap
    /// set in the chain) and to every ancestor's reasons.
    fn note(self: &Arc<Self>, reporter: &Reporter<'_>, key: &str, message: &str) {
        let capped = self
            .chain()
            .any(|b| b.lock().basis.as_ref().is_some_and(|b| b.cap.is_some()));
        for (depth, budget) in self.chain().enumerate() {
            let mut state = budget.lock();
            state.reasons.insert(message.to_owned());
            if depth == 0 && capped && state.notified.insert(key.to_owned()) {
                reporter.notice(format!(
                    "{message}; the price limit is enforced against the known subtotal"
                ));
            }
        }
    }

    /// Charges usage that no attempt of a sub-agent's run priced (a child
    /// whose stack has no `limits`), when the child returns: `model` is the
    /// child's model. Called by the sub-agent tool with the parent's run id
    /// and sink; a late charge stays with the cycle that started it.
    pub(crate) fn settle_late(
        self: &Arc<Self>,
        run_id: &str,
        sink: &Arc<dyn EventSink>,
        model: &str,
        usage: Usage,
    ) -> Result<()> {
        let rates = self.basis().map(|b| *b.manual.read().expect("manual rates lock"));
        let reporter = Reporter {
            run_id,
            sink,
            wants_notices: sink.interest().contains(EventKind::Notice),
        };
        self.settle_charge(&reporter, rates, false, model, usage).map(drop)
    }

    /// The usage of every charge counted here (this cycle's and its sub-agents').
    pub(crate) fn priced_usage(&self) -> Usage {
        let state = self.lock();
        let mut total = Usage::default();
        for charge in &state.charges {
            total += charge.usage;
        }
        total
    }

    fn settle_charge(
        self: &Arc<Self>,
        reporter: &Reporter<'_>,
        rates: Option<TokenRates>,
        one_hour_writes: bool,
        model: &str,
        usage: Usage,
    ) -> Result<f64> {
        let Some(basis) = self.basis() else {
            return Ok(0.0);
        };
        let excluded = basis.excluded.iter().any(|e| e == model || e == provider_of(model));
        let charge = if excluded {
            Charge {
                model: model.to_owned(),
                usage,
                billing: BillingClass::Excluded,
                api_usd: None,
                budget_usd: None,
                partial: false,
            }
        } else {
            let catalog = catalog_rates(model);
            let api = catalog.map(|r| r.value(&usage, one_hour_writes));
            let manual = rates.filter(|r| !r.is_empty());
            let budget = match manual {
                Some(rates) => Some(rates.value(&usage, one_hour_writes)),
                None => api.clone(),
            };
            let mut partial = false;
            match &budget {
                Some(v) => {
                    for class in &v.unpriced {
                        partial = true;
                        let basis_name = if manual.is_some() {
                            "manual budget rates"
                        } else {
                            "the price table"
                        };
                        self.note(
                            reporter,
                            &format!("unpriced:{class}"),
                            &format!("`{class}` tokens were used but {basis_name} give no `{class}` rate"),
                        );
                    }
                }
                None if !usage.is_zero() => {
                    partial = true;
                    self.note(
                        reporter,
                        &format!("unknown_model:{model}"),
                        &format!("model `{model}` has no price in the table and no manual rates are set"),
                    );
                }
                None => {}
            }
            Charge {
                model: model.to_owned(),
                usage,
                billing: BillingClass::Metered,
                api_usd: api.map(|v| v.usd),
                budget_usd: Some(budget.map_or(0.0, |v| v.usd)),
                partial,
            }
        };
        if let Some(journal) = &basis.journal
            && let Err(why) = journal.record(reporter.run_id, &charge)
        {
            self.lock().journal_failed = Some(why.clone());
            return Err(TinyAgentsError::middleware(
                "limits",
                format!("accounting could not be recorded ({why}); no further paid request is sent"),
            ));
        }
        let usd = charge.budget_usd.unwrap_or(0.0);
        *basis.lifetime.lock().expect("lifetime spend lock") += usd;
        for budget in self.chain() {
            let mut state = budget.lock();
            state.spent += usd;
            state.charges.push(charge.clone());
        }
        Ok(usd)
    }

    /// What the budget looks like now.
    pub fn snapshot(&self) -> BudgetSnapshot {
        let state = self.lock();
        let all_excluded =
            !state.charges.is_empty() && state.charges.iter().all(|c| c.billing == BillingClass::Excluded);
        BudgetSnapshot {
            spent_usd: (!all_excluded).then_some(state.spent),
            cap_usd: state.basis.as_ref().and_then(|b| b.cap),
            charges: state.charges.clone(),
            partial_reasons: state.reasons.iter().cloned().collect(),
        }
    }
}

impl AttemptTicket {
    /// Settles the attempt with the usage it reported from `model`.
    pub fn settle<C>(self, ctx: &RunContext<C>, model: &str, usage: Usage) -> Result<()> {
        self.settle_usd(ctx, model, usage).map(drop)
    }

    /// [`settle`](Self::settle), returning the budget valuation charged in USD.
    pub(crate) fn settle_usd<C>(mut self, ctx: &RunContext<C>, model: &str, usage: Usage) -> Result<f64> {
        let Some(budget) = self.budget.take() else {
            return Ok(0.0);
        };
        budget.settle_charge(&Reporter::of(ctx), self.rates, self.one_hour_writes, model, usage)
    }

    /// Settles an attempt that ended without final usage (an error or an
    /// interrupt): its cost is unknown, so the spend becomes a lower bound.
    /// Usage the attempt streamed before it failed is charged with
    /// [`settle_failed`](Self::settle_failed) instead.
    pub fn settle_unknown<C>(mut self, ctx: &RunContext<C>, error: &TinyAgentsError) {
        let Some(budget) = self.budget.take() else { return };
        if budget.basis().is_none() {
            return;
        }
        budget.note(
            &Reporter::of(ctx),
            "no_final_usage",
            &format!(
                "an attempt ended without final usage ({}), so its cost is unknown",
                error.kind()
            ),
        );
    }

    /// Settles a failed attempt that streamed `usage` before it failed: the
    /// streamed usage is charged (a paid attempt is never free because it
    /// failed), and the spend is marked a lower bound, since the provider
    /// may bill more than it reported before the failure.
    pub fn settle_failed<C>(
        self,
        ctx: &RunContext<C>,
        model: &str,
        usage: Usage,
        error: &TinyAgentsError,
    ) -> Result<()> {
        self.settle_failed_usd(ctx, model, usage, error).map(drop)
    }

    /// [`settle_failed`](Self::settle_failed), returning the USD charged.
    pub(crate) fn settle_failed_usd<C>(
        self,
        ctx: &RunContext<C>,
        model: &str,
        usage: Usage,
        error: &TinyAgentsError,
    ) -> Result<f64> {
        let Some(budget) = self.budget.clone() else {
            return Ok(0.0);
        };
        let usd = self.settle_usd(ctx, model, usage)?;
        if budget.basis().is_some() {
            budget.note(
                &Reporter::of(ctx),
                "failed_attempt_usage",
                &format!(
                    "an attempt failed ({}) after reporting part of its usage; the rest of its cost is unknown",
                    error.kind()
                ),
            );
        }
        Ok(usd)
    }
}

impl Drop for AttemptTicket {
    fn drop(&mut self) {
        let Some(budget) = self.budget.take() else { return };
        if budget.basis().is_none() {
            return;
        }
        for b in budget.chain() {
            b.lock().reasons.insert(
                "an attempt was abandoned before it settled (a timeout or cancellation outside it), so its cost is unknown"
                    .to_owned(),
            );
        }
    }
}

/// Charges to a run's price budget the usage of a child run that no attempt
/// of the child priced (a child stack without `limits`): the run tree has one
/// budget whatever the child's stack holds. A child that priced its own
/// attempts already charged the parent through its linked budget.
struct ChildSpend(Arc<PriceBudget>);

impl ChildRunHook for ChildSpend {
    fn child_finished(&self, child: &ChildRun<'_>, usage: Usage) -> Result<()> {
        let priced = child
            .locals
            .try_get::<PriceBudget>()
            .map(|b| b.priced_usage())
            .unwrap_or_default();
        let unpriced = Usage {
            input_tokens: usage.input_tokens.saturating_sub(priced.input_tokens),
            output_tokens: usage.output_tokens.saturating_sub(priced.output_tokens),
            reasoning_tokens: usage.reasoning_tokens.saturating_sub(priced.reasoning_tokens),
            cache_read_tokens: usage.cache_read_tokens.saturating_sub(priced.cache_read_tokens),
            cache_write_tokens: usage.cache_write_tokens.saturating_sub(priced.cache_write_tokens),
        };
        if unpriced.is_zero() {
            return Ok(());
        }
        self.0
            .settle_late(&child.parent.run_id, &child.parent.sink, child.model, unpriced)
    }
}

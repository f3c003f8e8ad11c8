//! [`PriceBudget`]: one execution cycle's spend, kept in the run's context;
//! [`AttemptTicket`]s snapshot the valuation basis when an attempt is
//! dispatched and settle it; [`AccountingJournal`] records every charge.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, RwLock};

use super::pricing::{catalog_rates, provider_of, TokenRates};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::Usage;

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
}

impl std::fmt::Debug for PriceBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PriceBudget").field(&self.snapshot()).finish()
    }
}

/// An attempt admitted by [`PriceBudget::dispatch`], with the rates
/// snapshotted then. Settle it when the attempt ends.
#[derive(Debug)]
#[must_use = "settle the ticket when the attempt ends"]
pub struct AttemptTicket {
    budget: Arc<PriceBudget>,
    rates: Option<TokenRates>,
    one_hour_writes: bool,
}

impl PriceBudget {
    /// The budget of the cycle `ctx` belongs to.
    pub fn of<C>(ctx: &RunContext<C>) -> Arc<PriceBudget> {
        ctx.local::<PriceBudget>()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("price budget lock")
    }

    pub(super) fn install(&self, basis: Basis) {
        self.lock().basis = Some(basis);
    }

    /// Checks the cap before a paid attempt is dispatched: `Err` with a
    /// `max_price_usd` limit when the known spend has reached it (or an
    /// execution error after a failed journal record). Not a reservation:
    /// attempts in flight are not counted until they settle. `one_hour_writes`
    /// says the attempt's cache writes have a one-hour lifetime.
    pub fn dispatch<C>(self: &Arc<Self>, ctx: &RunContext<C>, one_hour_writes: bool) -> Result<AttemptTicket> {
        let _ = ctx;
        let state = self.lock();
        if let Some(why) = &state.journal_failed {
            return Err(TinyAgentsError::middleware(
                "limits",
                format!("accounting could not be recorded ({why}); no further paid request is sent"),
            ));
        }
        let rates = match &state.basis {
            Some(basis) => {
                if let Some(cap) = basis.cap {
                    if state.spent >= cap {
                        return Err(TinyAgentsError::limit(
                            "max_price_usd",
                            format!(
                                "this run has spent ${:.6} of its ${cap} budget; the next paid request was not sent",
                                state.spent
                            ),
                        ));
                    }
                }
                Some(*basis.manual.read().expect("manual rates lock"))
            }
            None => None,
        };
        Ok(AttemptTicket {
            budget: self.clone(),
            rates,
            one_hour_writes,
        })
    }

    /// Records a known condition that makes the spend incomplete (a fee that
    /// is not valued, for instance): the reason is kept in the accounting
    /// metadata and, with a cap set, a `price_limit` notice is sent once per
    /// cycle for it.
    pub fn mark_incomplete<C>(&self, ctx: &RunContext<C>, key: &str, message: &str) {
        let mut state = self.lock();
        Self::note(&mut state, ctx, key, message);
    }

    fn note<C>(state: &mut State, ctx: &RunContext<C>, key: &str, message: &str) {
        state.reasons.insert(message.to_owned());
        let capped = state.basis.as_ref().is_some_and(|b| b.cap.is_some());
        if capped && state.notified.insert(key.to_owned()) {
            ctx.emit_with(EventKind::Notice, || AgentEvent::Notice {
                source: "price_limit".into(),
                message: format!("{message}; the price limit is enforced against the known subtotal"),
                is_error: false,
            });
        }
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
        let mut state = self.budget.lock();
        let Some(basis) = state.basis.clone() else {
            return Ok(());
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
            let api = catalog.map(|r| r.value(&usage, self.one_hour_writes));
            let manual = self.rates.filter(|r| !r.is_empty());
            let budget = match manual {
                Some(rates) => Some(rates.value(&usage, self.one_hour_writes)),
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
                        Self::note_for(
                            &mut state,
                            ctx,
                            &format!("unpriced:{class}"),
                            &format!("`{class}` tokens were used but {basis_name} give no `{class}` rate"),
                        );
                    }
                }
                None if !usage.is_zero() => {
                    partial = true;
                    Self::note_for(
                        &mut state,
                        ctx,
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
        if let Some(journal) = &basis.journal {
            if let Err(why) = journal.record(ctx.run_id(), &charge) {
                state.journal_failed = Some(why.clone());
                return Err(TinyAgentsError::middleware(
                    "limits",
                    format!("accounting could not be recorded ({why}); no further paid request is sent"),
                ));
            }
        }
        let usd = charge.budget_usd.unwrap_or(0.0);
        state.spent += usd;
        *basis.lifetime.lock().expect("lifetime spend lock") += usd;
        state.charges.push(charge);
        Ok(())
    }

    /// Settles an attempt that ended without final usage (an error or an
    /// interrupt): its cost is unknown, so the spend becomes a lower bound.
    pub fn settle_unknown<C>(self, ctx: &RunContext<C>, error: &TinyAgentsError) {
        let mut state = self.budget.lock();
        if state.basis.is_none() {
            return;
        }
        Self::note_for(
            &mut state,
            ctx,
            "no_final_usage",
            &format!(
                "an attempt ended without final usage ({}), so its cost is unknown",
                error.kind()
            ),
        );
    }

    fn note_for<C>(state: &mut State, ctx: &RunContext<C>, key: &str, message: &str) {
        PriceBudget::note(state, ctx, key, message);
    }
}

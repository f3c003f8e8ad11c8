//! Stores shared by many processes: where rate-limit buckets, budgets and
//! counters, pending approvals and checkpoints live when one process is not
//! enough (`docs/scale-out.md`).
//!
//! | state | in-process | one machine | many machines |
//! | --- | --- | --- | --- |
//! | rate-limit buckets ([`RateLimitStore`]) | [`InMemoryRateLimitStore`] | — | `RedisStore` (`redis`) |
//! | budgets and counters ([`LedgerStore`]) | [`MemoryLedger`] | `SqliteStore` (`sqlite`) | `RedisStore` (`redis`), `PostgresStore` (`postgres`) |
//! | checkpoints, and so pending approvals ([`Checkpointer`](crate::graph::Checkpointer)) | `MemoryCheckpointer` | `SqliteStore` (`sqlite`), `FileCheckpointer` | `PostgresStore` (`postgres`) |
//!
//! A pending approval is a checkpoint: `human_in_the_loop` records what it
//! asked in the paused thread's checkpoint, and
//! [`AgentGraph::resume_with`](crate::graph::AgentGraph::resume_with) spends
//! the decisions by writing the next one, which a checkpointer never
//! replaces. So a store that keeps checkpoints for many processes keeps
//! their approvals too, single-use across processes.
//!
//! (`RedisStore`, `PostgresStore` and `SqliteStore` exist with their
//! feature: build the docs with `--features redis,postgres,sqlite` to see them.)
//!
//! Agent files name the store (`[store] url = "redis://…"`,
//! `"postgres://…"`, `"sqlite:PATH"`): [`StoreUrl`] parses and checks it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};

#[cfg(feature = "postgres")]
mod postgres;
mod rate_limits;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(feature = "postgres", feature = "sqlite", feature = "redis"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod url;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub use postgres::PostgresStore;
pub use rate_limits::{BucketSpec, InMemoryRateLimitStore, RateLimitStore};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use redis::RedisStore;
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub use sqlite::SqliteStore;
pub use url::{SharedStores, StoreUrl};

/// The largest amount a ledger holds: 2^53, so every backend (Redis's Lua
/// numbers are doubles) counts it exactly.
pub const MAX_LEDGER_UNITS: u64 = 1 << 53;

/// Nano-dollars per US dollar: budgets are kept as whole nano-dollars, so
/// adding charges in any order gives the same total in every process.
pub const NANOS_PER_USD: f64 = 1e9;

/// What a ledger holds under one key: units `spent` (settled) and `held`
/// (reserved by calls in flight).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LedgerTotals {
    /// Settled units.
    pub spent: u64,
    /// Units reserved by calls not yet settled.
    pub held: u64,
}

/// The answer to [`LedgerStore::reserve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// The amount is held; settle it when the call ends.
    Admitted(LedgerTotals),
    /// Nothing is held: the cap is reached, or the amount does not fit under it.
    Refused(LedgerTotals),
}

/// A ledger of amounts by key (budgets in nano-dollars, counters in calls),
/// each operation one atomic step on the store (a Lua script on Redis, one
/// function call in a transaction on PostgreSQL, one `IMMEDIATE` transaction
/// on SQLite), so processes sharing a key never race.
///
/// The admission rule, the same in every store: `reserve(key, cap, amount)`
/// holds `amount` when `spent + held + amount <= cap` and `spent + held <
/// cap` (so an amount of 0 is admitted until the cap is reached), else it
/// refuses and holds nothing. `settle(key, reserved, actual)` releases the
/// hold and adds what the call really cost. A key unused for `ttl` expires
/// (its totals start again from zero): give it the lifetime of the thread
/// or budget period it counts.
///
/// A counter is a ledger whose calls reserve 1 and never settle: at most
/// `cap` reservations are ever admitted.
///
/// ```
/// use std::time::Duration;
/// use tinyagents::store::{LedgerStore, MemoryLedger, Reservation};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let ledger = MemoryLedger::default();
/// let day = Duration::from_secs(86_400);
/// assert!(matches!(ledger.reserve("b", 100, 60, day).await?, Reservation::Admitted(_)));
/// assert!(matches!(ledger.reserve("b", 100, 60, day).await?, Reservation::Refused(_)), "60 + 60 > 100");
/// let totals = ledger.settle("b", 60, 55, day).await?;
/// assert_eq!((totals.spent, totals.held), (55, 0));
/// # Ok::<(), tinyagents::TinyAgentsError>(()) }).unwrap();
/// ```
#[async_trait]
pub trait LedgerStore: Send + Sync {
    /// Holds `amount` units under `key` if they fit under `cap`; see the trait docs.
    ///
    /// # Errors
    /// When the store cannot answer, or a number is above [`MAX_LEDGER_UNITS`].
    async fn reserve(&self, key: &str, cap: u64, amount: u64, ttl: Duration) -> Result<Reservation>;

    /// Releases `reserved` held units and adds `actual` spent ones.
    ///
    /// # Errors
    /// When the store cannot answer, or a number is above [`MAX_LEDGER_UNITS`].
    async fn settle(&self, key: &str, reserved: u64, actual: u64, ttl: Duration) -> Result<LedgerTotals>;

    /// What `key` holds now (zeros when it is unknown or expired).
    ///
    /// # Errors
    /// When the store cannot answer.
    async fn totals(&self, key: &str) -> Result<LedgerTotals>;
}

/// Checks that ledger numbers are in range (every backend counts them exactly).
pub(crate) fn check_units(key: &str, numbers: &[(&str, u64)]) -> Result<()> {
    for (name, n) in numbers {
        if *n > MAX_LEDGER_UNITS {
            return Err(TinyAgentsError::validation(format!(
                "ledger `{key}`: `{name}` = {n} is above {MAX_LEDGER_UNITS} (2^53), the most a store counts \
                 exactly; use a smaller cap or amount"
            )));
        }
    }
    if key.is_empty() || key.len() > 512 {
        return Err(TinyAgentsError::validation(format!(
            "a ledger key must be 1 to 512 bytes long, got {} bytes",
            key.len()
        )));
    }
    Ok(())
}

/// How long a shared call counter built from an agent file (`[store]`)
/// keeps a thread's count after its last call: a day.
pub const SHARED_COUNT_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);

/// The admission rule every store applies (see [`LedgerStore`]).
pub(crate) fn admits(totals: LedgerTotals, cap: u64, amount: u64) -> bool {
    let used = totals.spent.saturating_add(totals.held);
    used < cap && used.saturating_add(amount) <= cap
}

/// The in-process [`LedgerStore`]: one process's keys behind a mutex, with
/// expiry on tokio's clock.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    keys: Mutex<HashMap<String, (LedgerTotals, tokio::time::Instant)>>,
}

impl MemoryLedger {
    fn with<T>(&self, key: &str, ttl: Duration, f: impl FnOnce(&mut LedgerTotals) -> T) -> T {
        let now = tokio::time::Instant::now();
        let mut keys = self.keys.lock().expect("ledger lock");
        let entry = keys
            .entry(key.to_owned())
            .or_insert((LedgerTotals::default(), now + ttl));
        if entry.1 <= now {
            entry.0 = LedgerTotals::default();
        }
        entry.1 = now + ttl;
        f(&mut entry.0)
    }
}

#[async_trait]
impl LedgerStore for MemoryLedger {
    async fn reserve(&self, key: &str, cap: u64, amount: u64, ttl: Duration) -> Result<Reservation> {
        check_units(key, &[("cap", cap), ("amount", amount)])?;
        Ok(self.with(key, ttl, |t| {
            if admits(*t, cap, amount) {
                t.held += amount;
                Reservation::Admitted(*t)
            } else {
                Reservation::Refused(*t)
            }
        }))
    }

    async fn settle(&self, key: &str, reserved: u64, actual: u64, ttl: Duration) -> Result<LedgerTotals> {
        check_units(key, &[("reserved", reserved), ("actual", actual)])?;
        Ok(self.with(key, ttl, |t| {
            t.held = t.held.saturating_sub(reserved);
            t.spent = t.spent.saturating_add(actual).min(MAX_LEDGER_UNITS);
            *t
        }))
    }

    async fn totals(&self, key: &str) -> Result<LedgerTotals> {
        let now = tokio::time::Instant::now();
        let keys = self.keys.lock().expect("ledger lock");
        Ok(keys
            .get(key)
            .filter(|(_, expires)| *expires > now)
            .map(|(t, _)| *t)
            .unwrap_or_default())
    }
}

/// A price budget shared by every process that uses the same ledger and
/// key: `LimitsMiddleware::shared_budget` checks it before each paid attempt
/// (on top of the per-cycle `max_price_usd`) and settles it with the
/// attempt's real cost.
///
/// **Consistency.** Each attempt reserves [`reserve_usd`](Self::reserve_usd)
/// (default 0) before it is sent, atomically with the check, and settles
/// its real cost after. So the total spend is at most `cap + Σ max(0,
/// cost − reserve_usd)` over the attempts in flight at once when the cap
/// is reached: with `W` attempts in flight (workers × parallel calls) each
/// costing at most `m`, at most `cap + W × max(0, m − reserve_usd)`. With
/// `reserve_usd` at least the largest attempt's cost, spend never passes the
/// cap. An attempt whose cost is unknown (it failed without final usage)
/// settles at its reservation.
///
/// **Spend is never dropped.** A settle the store cannot take (it is down,
/// or a connection broke mid-call) keeps the attempt's cost in this process
/// (shared by every clone of the budget) and fails the attempt with a
/// `Middleware` error saying so. The next operation on that key records it
/// first: until the store takes it, every paid request under the key is
/// refused (fail closed), so spent + held on the store plus
/// [`unrecorded_usd`](Self::unrecorded_usd) is never below what was spent.
/// Call [`flush`](Self::flush) before a process exits; an amount still
/// unrecorded when the last clone is dropped is logged as a `tracing`
/// error naming the key and the amount. A settle whose answer was lost after
/// the store applied it is recorded again: an outage can count a call twice,
/// never zero times. The same holds when the caller drops the work mid-way
/// (a deadline around a run or around `flush`, a cancelled run): an amount
/// counts as unrecorded from before the store is asked until the store
/// confirms it, and an attempt dropped before it settled is kept as settled
/// at its reservation, as an attempt of unknown cost is.
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::middleware::LimitsMiddleware;
/// use tinyagents::store::{MemoryLedger, SharedBudget};
///
/// let budget = SharedBudget::new(Arc::new(MemoryLedger::default()), "team-a", 5.0).unwrap().reserve_usd(0.05).unwrap();
/// let limits = LimitsMiddleware::new().shared_budget(budget);
/// # let _ = limits;
/// ```
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct SharedBudget {
    #[educe(Debug(ignore))]
    ledger: Arc<dyn LedgerStore>,
    unrecorded: Arc<Unrecorded>,
    key: String,
    per_thread: bool,
    cap_usd: f64,
    reserve_usd: f64,
    ttl: Duration,
}

/// Whole nano-dollars for `usd`, rounded up (a charge is never counted short).
pub fn usd_to_nanos(usd: f64) -> u64 {
    if usd.is_nan() || usd <= 0.0 {
        0
    } else {
        (usd * NANOS_PER_USD).ceil().min(MAX_LEDGER_UNITS as f64) as u64
    }
}

fn usd_check(what: &str, usd: f64) -> Result<()> {
    if !usd.is_finite() || usd < 0.0 || usd_to_nanos(usd) >= MAX_LEDGER_UNITS {
        return Err(TinyAgentsError::config(format!(
            "shared budget: `{what}` = {usd}: must be a finite number of US dollars, not negative, below {}",
            MAX_LEDGER_UNITS as f64 / NANOS_PER_USD
        )));
    }
    Ok(())
}

/// Settles a [`SharedBudget`] has not seen the store take, per ledger key:
/// those it could not record (kept, applied on the store's next answer) and
/// those on their way to the store now (in flight). An amount leaves only
/// when the store confirms it: a settle whose future is dropped mid-way (a
/// caller's deadline, a cancelled run) puts its amount back among the kept
/// ([`InFlight`]'s drop), so it is never lost to a cancellation.
#[derive(Debug, Default)]
struct Unrecorded(Mutex<HashMap<String, Entry>>);

/// One key's unrecorded settles.
#[derive(Debug, Default, Clone, Copy)]
struct Entry {
    /// Not taken by the store; recorded by the next operation on the key.
    kept: Pending,
    /// Sent to the store, not yet confirmed.
    in_flight: Pending,
}

/// Settles summed (a settle is additive).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Pending {
    reserved: u64,
    actual: u64,
}

impl Pending {
    fn plus(self, other: Pending) -> Pending {
        Pending {
            reserved: self.reserved.saturating_add(other.reserved).min(MAX_LEDGER_UNITS),
            actual: self.actual.saturating_add(other.actual).min(MAX_LEDGER_UNITS),
        }
    }

    fn minus(self, other: Pending) -> Pending {
        Pending {
            reserved: self.reserved.saturating_sub(other.reserved),
            actual: self.actual.saturating_sub(other.actual),
        }
    }

    fn is_zero(self) -> bool {
        self == Pending::default()
    }
}

impl Unrecorded {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends `pending` of `key` on its way to the store: it counts as
    /// unrecorded until [`InFlight::confirm`].
    fn send<'a>(&'a self, key: &'a str, pending: Pending) -> InFlight<'a> {
        let mut map = self.lock();
        let entry = map.entry(key.to_owned()).or_default();
        entry.in_flight = entry.in_flight.plus(pending);
        InFlight {
            unrecorded: self,
            key,
            pending,
            confirmed: false,
        }
    }

    /// Sends everything kept for `key` on its way to the store (`None` when
    /// nothing is kept).
    fn send_kept<'a>(&'a self, key: &'a str) -> Option<InFlight<'a>> {
        let mut map = self.lock();
        let entry = map.get_mut(key)?;
        let pending = std::mem::take(&mut entry.kept);
        if pending.is_zero() {
            return None;
        }
        entry.in_flight = entry.in_flight.plus(pending);
        Some(InFlight {
            unrecorded: self,
            key,
            pending,
            confirmed: false,
        })
    }

    /// Keeps a settle of `key` the store has not taken (nothing for a zero one).
    fn keep(&self, key: &str, pending: Pending) {
        if pending.is_zero() {
            return;
        }
        let mut map = self.lock();
        let entry = map.entry(key.to_owned()).or_default();
        entry.kept = entry.kept.plus(pending);
    }

    /// The keys with settles kept (to record on a flush).
    fn keys(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, e)| !e.kept.is_zero())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Units spent and not yet confirmed by the store, kept or in flight.
    fn nanos(&self) -> u64 {
        self.lock().values().fold(0u64, |n, e| {
            n.saturating_add(e.kept.actual).saturating_add(e.in_flight.actual)
        })
    }
}

impl Drop for Unrecorded {
    fn drop(&mut self) {
        for (key, entry) in self.lock().iter() {
            let actual = entry.kept.plus(entry.in_flight).actual;
            if actual == 0 {
                continue;
            }
            tracing::error!(
                key = %key,
                unrecorded_usd = actual as f64 / NANOS_PER_USD,
                "a shared budget was dropped with spend its store never recorded (the store could not answer); \
                 the amount is lost from the shared total: call `SharedBudget::flush` before exiting"
            );
        }
    }
}

/// A settle on its way to the store. [`confirm`](Self::confirm) when the
/// store took it; dropped unconfirmed (the store refused, or the awaiting
/// future was dropped), its amount goes back among the kept, to be recorded
/// by the next operation on the key.
struct InFlight<'a> {
    unrecorded: &'a Unrecorded,
    key: &'a str,
    pending: Pending,
    confirmed: bool,
}

impl InFlight<'_> {
    /// The store took the settle: the amount leaves the process's count.
    fn confirm(mut self) {
        self.confirmed = true;
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut map = self.unrecorded.lock();
        let entry = map.entry(self.key.to_owned()).or_default();
        entry.in_flight = entry.in_flight.minus(self.pending);
        if !self.confirmed {
            entry.kept = entry.kept.plus(self.pending);
        }
        if entry.kept.is_zero() && entry.in_flight.is_zero() {
            map.remove(self.key);
        }
    }
}

/// What one admitted attempt holds on a [`SharedBudget`]. Dropped without
/// [`SharedBudget::settle`] (the attempt's future was dropped mid-call: a
/// deadline, a cancelled run), its cost is unknown, so it is kept as settled
/// at its reservation, as a failed attempt without usage is, and recorded by
/// the next operation on the key; the store would otherwise hold the
/// reservation until the key expires and then forget it.
#[derive(Debug)]
pub(crate) struct SharedHold {
    key: String,
    nanos: u64,
    /// Where an unsettled hold goes when dropped (`None` once settled).
    unrecorded: Option<Arc<Unrecorded>>,
}

impl Drop for SharedHold {
    fn drop(&mut self) {
        if let Some(unrecorded) = self.unrecorded.take() {
            unrecorded.keep(
                &self.key,
                Pending {
                    reserved: self.nanos,
                    actual: self.nanos,
                },
            );
        }
    }
}

impl SharedBudget {
    /// A budget of `cap_usd` US dollars under `key` of `ledger`, shared by
    /// every process using the same ledger and key; keys live 24 hours after
    /// their last use ([`ttl`](Self::ttl)).
    ///
    /// # Errors
    /// A `Config` error when `cap_usd` is negative, not finite or too large.
    pub fn new(ledger: Arc<dyn LedgerStore>, key: impl Into<String>, cap_usd: f64) -> Result<Self> {
        usd_check("cap_usd", cap_usd)?;
        Ok(Self {
            ledger,
            unrecorded: Arc::default(),
            key: key.into(),
            per_thread: false,
            cap_usd,
            reserve_usd: 0.0,
            ttl: Duration::from_secs(86_400),
        })
    }

    /// The same budget reserving `usd` per attempt before it is sent (see the
    /// consistency note on [`SharedBudget`]).
    ///
    /// # Errors
    /// A `Config` error when `usd` is negative, not finite or too large.
    pub fn reserve_usd(mut self, usd: f64) -> Result<Self> {
        usd_check("reserve_usd", usd)?;
        self.reserve_usd = usd;
        Ok(self)
    }

    /// The same budget with one key per conversation thread (`KEY:THREAD`):
    /// a run without a thread id is refused, since it has no budget.
    pub fn per_thread(mut self) -> Self {
        self.per_thread = true;
        self
    }

    /// The same budget with keys that expire `ttl` after their last use.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// The cap, in US dollars.
    pub fn cap_usd(&self) -> f64 {
        self.cap_usd
    }

    /// The ledger key a run spends under.
    fn key_of<C>(&self, ctx: &RunContext<C>) -> Result<String> {
        if !self.per_thread {
            return Ok(format!("budget:{}", self.key));
        }
        match &ctx.config().thread_id {
            Some(thread) => Ok(format!("budget:{}:{thread}", self.key)),
            None => Err(TinyAgentsError::limit(
                "max_price_usd",
                format!(
                    "the shared budget `{}` is kept per thread, and run `{}` has no thread id, so it has no \
                     budget; the paid request was not sent: give the run a thread id (`RunConfig::thread_id`)",
                    self.key,
                    ctx.run_id()
                ),
            )),
        }
    }

    /// The US dollars spent and held under the key a run spends under.
    ///
    /// # Errors
    /// When the ledger cannot answer.
    pub async fn spent_usd<C>(&self, ctx: &RunContext<C>) -> Result<(f64, f64)> {
        let t = self.ledger.totals(&self.key_of(ctx)?).await?;
        Ok((t.spent as f64 / NANOS_PER_USD, t.held as f64 / NANOS_PER_USD))
    }

    /// The US dollars this process spent under any key of this budget that
    /// the store has not confirmed yet (a settle failed, was dropped, or is on
    /// its way): recorded by the next operation on the key, or by
    /// [`flush`](Self::flush).
    pub fn unrecorded_usd(&self) -> f64 {
        self.unrecorded.nanos() as f64 / NANOS_PER_USD
    }

    /// Records every amount the store could not take when it was settled
    /// ([`unrecorded_usd`](Self::unrecorded_usd)); call it before a process
    /// exits. What the store still cannot take stays kept.
    ///
    /// # Errors
    /// A `Middleware` error naming the first key the store could not answer for.
    pub async fn flush(&self) -> Result<()> {
        let mut first = None;
        for key in self.unrecorded.keys() {
            if let Err(e) = self.record_unrecorded(&key).await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Applies `key`'s unrecorded settles to the store, keeping them on
    /// failure and when this future is dropped before the store answers.
    async fn record_unrecorded(&self, key: &str) -> Result<()> {
        let Some(sent) = self.unrecorded.send_kept(key) else {
            return Ok(());
        };
        let Pending { reserved, actual } = sent.pending;
        match self.ledger.settle(key, reserved, actual, self.ttl).await {
            Ok(_) => {
                sent.confirm();
                Ok(())
            }
            Err(e) => {
                drop(sent);
                Err(TinyAgentsError::middleware(
                    "limits",
                    format!(
                        "the shared budget store still cannot record ${:.9} spent under `{key}` by earlier calls \
                         ({e}); the amount is kept in this process and no paid request is sent until the store \
                         takes it: bring the store back",
                        actual as f64 / NANOS_PER_USD
                    ),
                ))
            }
        }
    }

    /// Reserves before a paid attempt: `LimitExceeded { limit: "max_price_usd" }`
    /// when the shared cap is reached; a `Middleware` error when the ledger
    /// cannot answer or still cannot record an earlier settle (the attempt
    /// is not sent: fail closed).
    pub(crate) async fn reserve<C>(&self, ctx: &RunContext<C>) -> Result<SharedHold> {
        let key = self.key_of(ctx)?;
        self.record_unrecorded(&key).await?;
        let nanos = usd_to_nanos(self.reserve_usd);
        let cap = usd_to_nanos(self.cap_usd);
        let answer = self
            .ledger
            .reserve(&key, cap, nanos, self.ttl)
            .await
            .map_err(|e| self.unavailable(&key, e))?;
        match answer {
            Reservation::Admitted(_) => Ok(SharedHold {
                key,
                nanos,
                unrecorded: Some(self.unrecorded.clone()),
            }),
            Reservation::Refused(t) => Err(TinyAgentsError::limit(
                "max_price_usd",
                format!(
                    "the shared budget `{}` has ${:.6} spent and ${:.6} held by calls in flight of its ${} cap \
                     (shared by every process on this store); the next paid request (reserving ${}) was not sent",
                    self.key,
                    t.spent as f64 / NANOS_PER_USD,
                    t.held as f64 / NANOS_PER_USD,
                    self.cap_usd,
                    self.reserve_usd
                ),
            )),
        }
    }

    /// Settles an attempt at `usd` (`None`: its cost is unknown, so it is
    /// charged its reservation). A settle the store does not take is kept
    /// (see "Spend is never dropped" on [`SharedBudget`]) and fails the attempt.
    pub(crate) async fn settle(&self, mut hold: SharedHold, usd: Option<f64>) -> Result<()> {
        // From here the in-flight settle below answers for the hold.
        hold.unrecorded = None;
        let actual = usd.map_or(hold.nanos, usd_to_nanos);
        // Counted as unrecorded before the store is asked, so a caller that
        // drops this future mid-way keeps the amount rather than losing it.
        let sent = self.unrecorded.send(
            &hold.key,
            Pending {
                reserved: hold.nanos,
                actual,
            },
        );
        match self.ledger.settle(&hold.key, hold.nanos, actual, self.ttl).await {
            Ok(_) => {
                sent.confirm();
                Ok(())
            }
            Err(e) => {
                drop(sent);
                Err(TinyAgentsError::middleware(
                    "limits",
                    format!(
                        "the shared budget store could not record a call's ${:.9} under `{}` ({e}); the amount is \
                         kept in this process and recorded on the store's next answer, and no paid request is \
                         sent until then: bring the store back",
                        actual as f64 / NANOS_PER_USD,
                        hold.key
                    ),
                ))
            }
        }
    }

    fn unavailable(&self, key: &str, e: TinyAgentsError) -> TinyAgentsError {
        TinyAgentsError::middleware(
            "limits",
            format!(
                "the shared budget store could not answer for `{key}` ({e}); no paid request is sent without \
                 its check: bring the store back, or remove `shared_budget`"
            ),
        )
    }
}

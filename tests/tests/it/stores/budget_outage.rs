//! A shared budget whose store goes down mid-call never drops the call's
//! cost: the settle that fails keeps it in the process, every paid request
//! is refused until the store takes it, and the next operation records it.
//! A store that hangs instead, and a caller's deadline that drops the settle
//! (or the record of kept spend) mid-way, loses nothing either.
//! (The same across real processes and real servers:
//! `tests/tests/store_processes.rs`, `outage_*`.)

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tinyagents::harness::model::ModelResponse;
use tinyagents::prelude::*;
use tinyagents::store::{LedgerStore, LedgerTotals, MemoryLedger, Reservation, SharedBudget};

use super::support::charging_input;

/// A ledger that answers like `MemoryLedger` while up, fails while down,
/// and never answers while it hangs (a store behind a partition).
#[derive(Default)]
struct Switched {
    inner: MemoryLedger,
    down: AtomicBool,
    hang: AtomicBool,
}

impl Switched {
    async fn check(&self) -> tinyagents::Result<()> {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        if self.down.load(Ordering::SeqCst) {
            Err(TinyAgentsError::middleware("test ledger", "connection refused"))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl LedgerStore for Switched {
    async fn reserve(&self, key: &str, cap: u64, amount: u64, ttl: Duration) -> tinyagents::Result<Reservation> {
        self.check().await?;
        self.inner.reserve(key, cap, amount, ttl).await
    }
    async fn settle(&self, key: &str, reserved: u64, actual: u64, ttl: Duration) -> tinyagents::Result<LedgerTotals> {
        self.check().await?;
        self.inner.settle(key, reserved, actual, ttl).await
    }
    async fn totals(&self, key: &str) -> tinyagents::Result<LedgerTotals> {
        self.check().await?;
        self.inner.totals(key).await
    }
}

/// A store that stops answering (hangs) instead of failing.
fn hang(ledger: &Switched, on: bool) {
    ledger.hang.store(on, Ordering::SeqCst);
}

/// One call: 1000 input tokens at $30 per million.
const CALL_NANOS: u64 = 30_000_000;

struct Setup {
    ledger: Arc<Switched>,
    budget: SharedBudget,
    agent: Agent<()>,
    calls: Arc<AtomicU32>,
    /// When set, the model takes the store down while it answers.
    cut_mid_call: Arc<AtomicBool>,
    /// When set, the model makes the store hang while it answers.
    hang_mid_call: Arc<AtomicBool>,
}

fn setup(reserve_usd: f64) -> Setup {
    let ledger = Arc::new(Switched::default());
    let budget = SharedBudget::new(ledger.clone(), "team", 10.0)
        .unwrap()
        .reserve_usd(reserve_usd)
        .unwrap();
    let limits = charging_input(budget.clone());
    let calls = Arc::new(AtomicU32::new(0));
    let (cut_mid_call, hang_mid_call) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (counted, cut, hangs, store) = (
        calls.clone(),
        cut_mid_call.clone(),
        hang_mid_call.clone(),
        ledger.clone(),
    );
    let model = ScriptedModel::from_fn(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        if cut.swap(false, Ordering::SeqCst) {
            store.down.store(true, Ordering::SeqCst);
        }
        if hangs.swap(false, Ordering::SeqCst) {
            hang(&store, true);
        }
        ModelResponse::text("ok").with_usage(Usage::new(1000, 0)).into()
    });
    let agent = Agent::new(model).with_stack(MiddlewareStack::new().with(limits).unwrap());
    Setup {
        ledger,
        budget,
        agent,
        calls,
        cut_mid_call,
        hang_mid_call,
    }
}

async fn run(agent: &Agent<()>) -> tinyagents::Result<()> {
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    agent.run(&mut ctx, &(), "go").await.map(drop)
}

async fn totals(ledger: &Switched) -> LedgerTotals {
    ledger.inner.totals("budget:team").await.unwrap()
}

#[tokio::test]
async fn budget_outage_mid_call_keeps_the_cost_and_records_it_when_the_store_returns() {
    for reserve in [0.0, 0.05] {
        let s = setup(reserve);
        run(&s.agent).await.unwrap();
        s.cut_mid_call.store(true, Ordering::SeqCst);
        let err = run(&s.agent).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Middleware, "{err}");
        assert!(err.to_string().contains("kept in this process"), "{err}");
        assert_eq!(s.calls.load(Ordering::SeqCst), 2, "the second call was made (and paid)");
        assert!(
            (s.budget.unrecorded_usd() - 0.03).abs() < 1e-12,
            "{}",
            s.budget.unrecorded_usd()
        );

        // While the store is down nothing is sent: fail closed.
        let err = run(&s.agent).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Middleware, "{err}");
        assert_eq!(
            s.calls.load(Ordering::SeqCst),
            2,
            "no paid request while spend is unrecorded"
        );

        // The store comes back: the next run records the kept cost first.
        s.ledger.down.store(false, Ordering::SeqCst);
        run(&s.agent).await.unwrap();
        assert_eq!(s.budget.unrecorded_usd(), 0.0);
        let t = totals(&s.ledger).await;
        assert_eq!(
            t.spent,
            3 * CALL_NANOS,
            "reserve {reserve}: every call's cost is recorded"
        );
        assert_eq!(t.held, 0, "reserve {reserve}: no hold is left");
    }
}

#[tokio::test]
async fn budget_flush_records_the_kept_cost_before_an_exit() {
    let s = setup(0.0);
    s.cut_mid_call.store(true, Ordering::SeqCst);
    run(&s.agent).await.unwrap_err();
    let err = s.budget.flush().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Middleware, "{err}");
    assert!(
        err.to_string().contains("budget:team"),
        "the error names the key: {err}"
    );
    assert!(s.budget.unrecorded_usd() > 0.0, "a failed flush keeps the amount");
    s.ledger.down.store(false, Ordering::SeqCst);
    s.budget.flush().await.unwrap();
    assert_eq!(s.budget.unrecorded_usd(), 0.0);
    assert_eq!(totals(&s.ledger).await.spent, CALL_NANOS);
}

/// Spend still kept when the last clone of the budget goes (a worker that
/// exits without `flush`) is not dropped silently: a `tracing` error names
/// the key and the amount.
#[tokio::test]
async fn budget_dropped_with_kept_spend_logs_an_error_naming_the_key_and_amount() {
    let (captured, _guard) = crate::capture::capture();
    let s = setup(0.0);
    s.cut_mid_call.store(true, Ordering::SeqCst);
    run(&s.agent).await.unwrap_err();
    assert!(s.budget.unrecorded_usd() > 0.0);
    drop(s);
    let errors: Vec<_> = captured
        .events()
        .into_iter()
        .filter(|e| e.level == tracing::Level::ERROR && e.message().contains("never recorded"))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].fields.get("key").map(String::as_str), Some("budget:team"));
    assert_eq!(errors[0].fields.get("unrecorded_usd").map(String::as_str), Some("0.03"));

    // A budget whose kept spend was recorded leaves without a word.
    let (captured, _guard2) = crate::capture::capture();
    let s = setup(0.0);
    s.cut_mid_call.store(true, Ordering::SeqCst);
    run(&s.agent).await.unwrap_err();
    s.ledger.down.store(false, Ordering::SeqCst);
    s.budget.flush().await.unwrap();
    drop(s);
    assert!(
        !captured.events().iter().any(|e| e.message().contains("never recorded")),
        "nothing kept, nothing logged"
    );
}

/// The caller's deadline: long enough for everything but a hung store.
const DEADLINE: Duration = Duration::from_secs(5);

#[tokio::test(start_paused = true)]
async fn budget_settle_dropped_by_a_deadline_while_the_store_hangs_keeps_the_cost() {
    let s = setup(0.0);
    // The store stops answering while the model answers: the call is paid,
    // its settle hangs, and the caller's deadline drops the run.
    s.hang_mid_call.store(true, Ordering::SeqCst);
    assert!(
        tokio::time::timeout(DEADLINE, run(&s.agent)).await.is_err(),
        "the settle hangs"
    );
    assert_eq!(s.calls.load(Ordering::SeqCst), 1);
    assert!(
        (s.budget.unrecorded_usd() - 0.03).abs() < 1e-12,
        "the paid call's cost is kept: {}",
        s.budget.unrecorded_usd()
    );

    hang(&s.ledger, false);
    s.budget.flush().await.unwrap();
    let t = totals(&s.ledger).await;
    assert_eq!((t.spent, t.held), (CALL_NANOS, 0), "recorded once, nothing left held");
    assert_eq!(s.budget.unrecorded_usd(), 0.0);
}

#[tokio::test(start_paused = true)]
async fn budget_flush_dropped_by_a_deadline_while_the_store_hangs_keeps_the_cost() {
    let s = setup(0.0);
    s.cut_mid_call.store(true, Ordering::SeqCst);
    run(&s.agent).await.unwrap_err();
    assert!((s.budget.unrecorded_usd() - 0.03).abs() < 1e-12);

    s.ledger.down.store(false, Ordering::SeqCst);
    hang(&s.ledger, true);
    assert!(
        tokio::time::timeout(DEADLINE, s.budget.flush()).await.is_err(),
        "flush hangs"
    );
    assert!(
        (s.budget.unrecorded_usd() - 0.03).abs() < 1e-12,
        "a dropped flush keeps what it was recording: {}",
        s.budget.unrecorded_usd()
    );

    hang(&s.ledger, false);
    s.budget.flush().await.unwrap();
    assert_eq!(totals(&s.ledger).await.spent, CALL_NANOS, "recorded exactly once");
    assert_eq!(s.budget.unrecorded_usd(), 0.0);
}

#[tokio::test(start_paused = true)]
async fn budget_run_dropped_while_recording_kept_spend_keeps_it_and_the_next_run_records_it() {
    let s = setup(0.0);
    s.cut_mid_call.store(true, Ordering::SeqCst);
    run(&s.agent).await.unwrap_err();
    s.ledger.down.store(false, Ordering::SeqCst);

    // The next run records the kept spend first; the store hangs, and the
    // run is dropped by its deadline before any paid request.
    hang(&s.ledger, true);
    assert!(tokio::time::timeout(DEADLINE, run(&s.agent)).await.is_err());
    assert_eq!(
        s.calls.load(Ordering::SeqCst),
        1,
        "nothing was sent while the record hung"
    );
    assert!((s.budget.unrecorded_usd() - 0.03).abs() < 1e-12);

    hang(&s.ledger, false);
    run(&s.agent).await.unwrap();
    assert_eq!(s.calls.load(Ordering::SeqCst), 2);
    assert_eq!(
        totals(&s.ledger).await.spent,
        2 * CALL_NANOS,
        "both paid calls recorded, once each"
    );
    assert_eq!(s.budget.unrecorded_usd(), 0.0);
}

/// A model whose stream sends one delta, then stalls: a call the caller's
/// deadline drops mid-stream, its cost unknown.
struct Stalls;

#[async_trait]
impl ChatModel for Stalls {
    fn id(&self) -> &str {
        "stalls"
    }
    async fn stream(&self, _: &ModelRequest) -> tinyagents::Result<tinyagents::harness::model::ModelStream> {
        use futures::StreamExt;
        let first = futures::stream::iter([Ok(ModelDelta::text("thinking…"))]);
        Ok(first.chain(futures::stream::pending()).boxed())
    }
}

#[tokio::test(start_paused = true)]
async fn budget_attempt_dropped_mid_call_is_settled_at_its_reservation_not_held_until_expiry() {
    let ledger = Arc::new(Switched::default());
    let budget = SharedBudget::new(ledger.clone(), "team", 10.0)
        .unwrap()
        .reserve_usd(0.05)
        .unwrap();
    let agent = Agent::new(Stalls).with_stack(MiddlewareStack::new().with(charging_input(budget.clone())).unwrap());
    assert!(
        tokio::time::timeout(DEADLINE, run(&agent)).await.is_err(),
        "the call stalls"
    );
    assert_eq!(
        totals(&ledger).await.held,
        50_000_000,
        "the reservation is still held on the store"
    );
    assert!(
        (budget.unrecorded_usd() - 0.05).abs() < 1e-12,
        "the dropped attempt is kept at its reservation: {}",
        budget.unrecorded_usd()
    );

    budget.flush().await.unwrap();
    let t = totals(&ledger).await;
    assert_eq!(
        (t.spent, t.held),
        (50_000_000, 0),
        "charged its reservation, and the hold released"
    );
    assert_eq!(budget.unrecorded_usd(), 0.0);
}

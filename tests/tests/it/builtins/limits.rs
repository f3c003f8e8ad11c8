//! `LimitsMiddleware` (seed 002): `max_steps`, `max_turns`, and one test per
//! sentence of the seed's "Price limits" section (quoted above each test).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::event::EventMask;
use tinyagents::harness::middleware::ModelBaseCall;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

const M: u64 = 1_000_000;

fn limits(toml: &str) -> LimitsMiddleware {
    from_toml_str::<LimitsConfig>(toml).unwrap().build()
}

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        ..Usage::new(input, output)
    }
}

/// A reply asking for a tool call, with usage.
fn tool_turn(u: Usage) -> ScriptedTurn {
    ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new("c", "ping", json!({}))]).with_usage(u))
}

fn text_turn(text: &str, u: Usage) -> ScriptedTurn {
    ScriptedTurn::Reply(ModelResponse::text(text).with_usage(u))
}

fn tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("ping", "Pong.", |_cx, _a| async move { Ok("pong".into()) }))
        .unwrap()
}

fn agent(model: Arc<ScriptedModel>, stack: MiddlewareStack<()>) -> Agent<()> {
    Agent::new(model).with_tools(tools()).with_stack(stack)
}

fn stack_of(limits: LimitsMiddleware) -> MiddlewareStack<()> {
    MiddlewareStack::new().with(limits).unwrap()
}

fn ctx(sink: &Arc<CollectingSink>) -> RunContext {
    RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone())
}

fn notices(sink: &CollectingSink) -> Vec<String> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::Notice {
                source,
                message,
                is_error,
            } if source == "price_limit" => {
                assert!(!is_error, "price notices are warnings");
                Some(message)
            }
            _ => None,
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

// ----- max_steps and max_turns -----

#[tokio::test]
async fn max_turns_and_max_steps_fail_the_cycle_at_their_limit() {
    let model = Arc::new(ScriptedModel::from_fn(|_| tool_turn(Usage::default())));
    let err = agent(model.clone(), stack_of(limits("max_turns = 3")))
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "limit `max_turns` exceeded: this run reached its limit of 3 model turns"
    );
    let model = Arc::new(ScriptedModel::from_fn(|_| tool_turn(Usage::default())));
    let err = agent(model, stack_of(limits("max_steps = 2")))
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "limit `max_steps` exceeded: this run reached its limit of 2 tool calls; `ping` was not run"
    );
}

// ----- Scope -----

/// "The cap applies to one execution cycle (one prompt run)."
#[tokio::test]
async fn the_cap_applies_to_one_run() {
    // $1 per million input tokens: each turn costs $0.60
    let model = Arc::new(ScriptedModel::from_fn(|_| tool_turn(Usage::new(600_000, 0))));
    let l = limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0\noutput_cost_per_million = 0.0");
    let sink = Arc::new(CollectingSink::new());
    let mut c = ctx(&sink);
    let err = agent(model, stack_of(l)).run(&mut c, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    let budget = LimitsMiddleware::budget(&c);
    assert_eq!(
        budget.charges.len(),
        2,
        "$0.60 < $1 admits the second turn; $1.20 stops the third"
    );
    assert!(close(budget.spent_usd.unwrap(), 1.2));
    assert_eq!(budget.cap_usd, Some(1.0));
}

/// Discards its first reply and asks again, like an output-limit escalation:
/// two paid attempts for one turn.
struct Escalate;

#[middleware(name = "escalate")]
impl Escalate {
    #[wrap_model]
    async fn twice(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        let _discarded = next.run(ctx, state, request.clone()).await?;
        next.run(ctx, state, request).await
    }
}

/// Makes a paid summary call of its own before each turn and attributes it to the cycle.
struct Summariser;

#[middleware(name = "summariser")]
impl Summariser {
    #[before_model]
    fn summarise(&self, ctx: &mut RunContext) -> Result<()> {
        let ticket = PriceBudget::of(ctx).dispatch(ctx, false)?;
        ticket.settle(ctx, "summary-model", Usage::new(100_000, 0))
    }
}

/// "It counts every paid attempt attributed to that cycle: main responses,
/// retries, compaction and delegation summaries, including cache read and
/// write charges."
#[tokio::test]
async fn every_paid_attempt_counts_with_its_cache_charges() {
    let model = Arc::new(ScriptedModel::new([
        text_turn("discarded", usage(1_000_000, 0, 1_000_000, 0)),
        text_turn("kept", usage(0, 0, 0, 1_000_000)),
    ]));
    let l = limits(
        "max_price_usd = 100.0\ninput_cost_per_million = 1.0\noutput_cost_per_million = 0.0\n\
         cache_read_cost_per_million = 0.1\ncache_write_cost_per_million = 2.0",
    );
    let stack = MiddlewareStack::new()
        .with(Summariser)
        .unwrap()
        .with(Escalate)
        .unwrap()
        .with(l)
        .unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut c = ctx(&sink);
    let run = agent(model, stack).run(&mut c, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "kept");
    let budget = LimitsMiddleware::budget(&c);
    let models: Vec<&str> = budget.charges.iter().map(|c| c.model.as_str()).collect();
    assert_eq!(models, ["summary-model", "scripted", "scripted"]);
    // summary $0.10 + discarded attempt ($1 input + $0.10 cache read) + kept ($2 cache write)
    assert!(close(budget.spent_usd.unwrap(), 0.1 + 1.1 + 2.0), "{budget:?}");
    assert!(notices(&sink).is_empty());
}

/// "Spend from earlier cycles of the same session does not count against a new cycle, …"
#[tokio::test]
async fn a_new_cycle_starts_from_zero() {
    let model = Arc::new(ScriptedModel::from_fn(|_| text_turn("ok", Usage::new(900_000, 0))));
    let agent = agent(
        model,
        stack_of(limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0")),
    );
    for i in 0..3 {
        let mut c = RunContext::new(RunConfig::new(format!("r{i}")).with_thread("session"), ());
        agent.run(&mut c, &(), "go").await.unwrap();
        assert!(close(LimitsMiddleware::budget(&c).spent_usd.unwrap(), 0.9));
    }
}

/// A model that takes `delay` (per request text) before answering with usage.
struct Slow {
    calls: AtomicU32,
}

#[async_trait]
impl ChatModel for Slow {
    fn id(&self) -> &str {
        "slow"
    }
    async fn stream(&self, request: &ModelRequest) -> Result<tinyagents::harness::model::ModelStream> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let ms: u64 = request.messages[0].text().parse().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let reply = ModelResponse::text(format!("after {ms}")).with_usage(Usage::new(ms * 1000, 0));
        let deltas = ScriptedModel::deltas_for(&reply);
        Ok(Box::pin(futures::stream::iter(deltas.into_iter().map(Ok))))
    }
}

/// "… and a charge that settles late stays with the cycle that started it."
#[tokio::test(start_paused = true)]
async fn a_late_charge_stays_with_the_cycle_that_started_it() {
    let agent = Agent::<()>::new(Slow {
        calls: AtomicU32::new(0),
    })
    .with_stack(stack_of(limits("input_cost_per_million = 1.0")));
    let mut a = RunContext::new(RunConfig::new("a").with_thread("s"), ());
    let mut b = RunContext::new(RunConfig::new("b").with_thread("s"), ());
    // a's call starts first and settles long after b's cycle began and ended
    let (ra, rb) = tokio::join!(agent.run(&mut a, &(), "5000"), async {
        tokio::time::sleep(Duration::from_millis(10)).await;
        agent.run(&mut b, &(), "100").await
    });
    ra.unwrap();
    rb.unwrap();
    assert!(close(LimitsMiddleware::budget(&a).spent_usd.unwrap(), 5.0));
    assert!(close(LimitsMiddleware::budget(&b).spent_usd.unwrap(), 0.1));
}

/// "The session lifetime total is reported separately."
#[tokio::test]
async fn the_lifetime_total_is_reported_apart_from_each_cycle() {
    let model = Arc::new(ScriptedModel::from_fn(|_| text_turn("ok", Usage::new(500_000, 0))));
    let l = limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0");
    let handle = l.clone();
    let agent = agent(model, stack_of(l));
    for i in 0..4 {
        let mut c = RunContext::new(RunConfig::new(format!("r{i}")), ());
        agent.run(&mut c, &(), "go").await.unwrap();
        assert!(close(LimitsMiddleware::budget(&c).spent_usd.unwrap(), 0.5));
    }
    assert!(close(handle.lifetime_spend_usd(), 2.0), "past any one cycle's cap");
}

// ----- Best-effort enforcement -----

/// "The cap is checked before each paid attempt is dispatched."
#[tokio::test]
async fn the_cap_is_checked_before_each_attempt() {
    let model = Arc::new(ScriptedModel::new([
        tool_turn(Usage::new(500_000, 0)),
        text_turn("never sent", Usage::default()),
    ]));
    let err = agent(
        model.clone(),
        stack_of(limits("max_price_usd = 0.5\ninput_cost_per_million = 1.0")),
    )
    .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert_eq!(
        model.calls(),
        1,
        "spend reached the cap exactly: the next attempt was not dispatched"
    );
}

/// "If the known spend of the cycle has reached the cap, the attempt is not
/// sent and the run stops with a price-limit outcome."
#[tokio::test]
async fn at_the_cap_the_run_stops_with_a_price_limit_outcome() {
    let model = Arc::new(ScriptedModel::from_fn(|_| tool_turn(Usage::new(700_000, 0))));
    let stops = Arc::new(Mutex::new(Vec::new()));
    let s = stops.clone();
    let seen = move |run: &mut AgentRun| -> Result<()> {
        s.lock().unwrap().push(run.stop.clone());
        Ok(())
    };
    struct Watch<F>(F);
    #[middleware(name = "watch")]
    impl<F: Fn(&mut AgentRun) -> Result<()> + Send + Sync + 'static> Watch<F> {
        #[after_agent]
        fn after(&self, run: &mut AgentRun) -> Result<()> {
            (self.0)(run)
        }
    }
    let stack = MiddlewareStack::new()
        .with(Watch(seen))
        .unwrap()
        .with(limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0"))
        .unwrap();
    let err = agent(model, stack)
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(
        err,
        TinyAgentsError::limit(
            "max_price_usd",
            "this run has spent $1.400000 of its $1 budget; the next paid request was not sent"
        )
    );
    assert_eq!(*stops.lock().unwrap(), [StopReason::Failed(ErrorKind::LimitExceeded)]);
}

/// A base call that takes a second and reports 800k input tokens.
struct SlowBase;

#[async_trait]
impl ModelBaseCall<()> for SlowBase {
    async fn call(&self, _ctx: &mut RunContext, _state: &(), _request: ModelRequest) -> Result<ModelResponse> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let mut r = ModelResponse::text("ok").with_usage(Usage::new(800_000, 0));
        r.model = Some("m".into());
        Ok(r)
    }
}

/// "This is not a reservation: requests already in flight, including
/// parallel ones, are not counted until they settle, so spend can overshoot
/// the cap by the cost of those requests."
#[tokio::test(start_paused = true)]
async fn parallel_attempts_in_flight_can_overshoot_the_cap() {
    let stack = stack_of(limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0"));
    let mut main = RunContext::new(RunConfig::new("r"), ());
    stack.run_before_agent(&mut main, &()).await.unwrap();
    let (mut one, mut two) = (main.fork(()), main.fork(()));
    let (a, b) = tokio::join!(
        stack.run_wrapped_model(&mut one, &(), ModelRequest::default(), &SlowBase),
        stack.run_wrapped_model(&mut two, &(), ModelRequest::default(), &SlowBase),
    );
    a.unwrap();
    b.unwrap();
    let spent = LimitsMiddleware::budget(&main).spent_usd.unwrap();
    assert!(close(spent, 1.6), "both were admitted at $0 and settled: {spent}");
    let err = stack
        .run_wrapped_model(&mut main, &(), ModelRequest::default(), &SlowBase)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
}

// ----- Incomplete pricing warns and continues -----

/// "If a used category cannot be priced (for example cache writes with no
/// rate, or an interrupted request with no final usage), the run continues
/// against the known subtotal and a HookNotice with event_name = "price_limit"
/// (is_error = false) explains why enforcement is best-effort."
#[tokio::test(start_paused = true)]
async fn an_unpriced_category_or_a_lost_usage_warns_and_continues() {
    let model = Arc::new(ScriptedModel::new([
        tool_turn(usage(100_000, 0, 0, 500_000)),
        text_turn("done", Usage::new(100_000, 0)),
    ]));
    let sink = Arc::new(CollectingSink::new());
    let mut c = ctx(&sink);
    let run = agent(
        model,
        stack_of(limits(
            "max_price_usd = 1.0\ninput_cost_per_million = 1.0\noutput_cost_per_million = 1.0",
        )),
    )
    .run(&mut c, &(), "go")
    .await
    .unwrap();
    assert_eq!(run.final_text(), "done", "the run continued");
    assert!(
        close(LimitsMiddleware::budget(&c).spent_usd.unwrap(), 0.2),
        "the known subtotal"
    );
    assert_eq!(
        notices(&sink),
        [
            "`cache_write` tokens were used but manual budget rates give no `cache_write` rate; the price limit is \
          enforced against the known subtotal"
        ]
    );

    // an interrupted request: deltas, then the stream fails; a retry answers
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::FailAfter(vec![ModelDelta::text("half")], TinyAgentsError::model("reset", true)),
        text_turn("done", Usage::new(100_000, 0)),
    ]));
    let retry = from_toml_str::<ModelRetryConfig>("initial_delay_ms = 1")
        .unwrap()
        .build();
    let stack = MiddlewareStack::new()
        .with(retry)
        .unwrap()
        .with(limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0"))
        .unwrap();
    let sink = Arc::new(CollectingSink::new());
    let run = agent(model, stack).run(&mut ctx(&sink), &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(
        notices(&sink),
        [
            "an attempt ended without final usage (model), so its cost is unknown; the price limit is enforced \
          against the known subtotal"
        ]
    );
}

/// "It is sent once per cycle for each distinct reason, not on every usage
/// update, and it does not need acknowledgement."
#[tokio::test]
async fn one_notice_per_cycle_per_reason() {
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let turn = req.messages.len();
        match turn {
            1 | 3 => tool_turn(usage(0, 0, 0, 10)),
            5 => tool_turn(usage(0, 0, 10, 10)),
            _ => text_turn("done", Usage::default()),
        }
    }));
    let agent = agent(
        model,
        stack_of(limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0")),
    );
    let sink = Arc::new(CollectingSink::new());
    agent.run(&mut ctx(&sink), &(), "go").await.unwrap();
    let n = notices(&sink);
    assert_eq!(n.len(), 2, "{n:#?}");
    assert!(n[0].starts_with("`cache_write` tokens"));
    assert!(n[1].starts_with("`cache_read` tokens"));
    // a new cycle warns again
    let sink = Arc::new(CollectingSink::new());
    agent.run(&mut ctx(&sink), &(), "go").await.unwrap();
    assert_eq!(notices(&sink).len(), 2);
}

/// "A request that is still in flight is not an uncertainty and does not warn."
#[tokio::test(start_paused = true)]
async fn a_request_in_flight_does_not_warn() {
    let agent = Arc::new(
        Agent::<()>::new(Slow {
            calls: AtomicU32::new(0),
        })
        .with_stack(stack_of(limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0"))),
    );
    let sink = Arc::new(CollectingSink::new());
    let a = agent.clone();
    let s = sink.clone();
    let run = tokio::spawn(async move { a.run(&mut ctx(&s), &(), "3000").await });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        sink.events()
            .iter()
            .any(|e| matches!(e, AgentEvent::ModelCallStarted { .. })),
        "the request is in flight"
    );
    assert!(notices(&sink).is_empty());
    run.await.unwrap().unwrap();
    assert!(notices(&sink).is_empty(), "it settled fully priced");
}

/// "Clients that did not negotiate notice support receive no notice; the
/// condition is still carried in the accounting metadata."
#[tokio::test]
async fn without_notice_support_the_condition_stays_in_the_metadata() {
    let model = Arc::new(ScriptedModel::new([text_turn("ok", usage(0, 0, 0, 10))]));
    let sink = Arc::new(CollectingSink::with_mask(EventMask::except([EventKind::Notice])));
    let mut c = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    agent(
        model,
        stack_of(limits("max_price_usd = 1.0\ninput_cost_per_million = 1.0")),
    )
    .run(&mut c, &(), "go")
    .await
    .unwrap();
    assert!(!sink.events().is_empty(), "the sink gets other events");
    assert!(notices(&sink).is_empty());
    let budget = LimitsMiddleware::budget(&c);
    assert_eq!(
        budget.partial_reasons,
        ["`cache_write` tokens were used but manual budget rates give no `cache_write` rate"]
    );
    assert!(budget.charges[0].partial);
}

/// A journal that fails to record.
struct BrokenJournal(AtomicU32);

impl AccountingJournal for BrokenJournal {
    fn record(&self, _run_id: &str, _charge: &Charge) -> std::result::Result<(), String> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err("disk full".into())
    }
}

/// "Failure to record accounting in the journal is different: it is an
/// execution error and no further paid request is sent."
#[tokio::test(start_paused = true)]
async fn a_journal_failure_is_an_execution_error_and_stops_paid_requests() {
    let journal = Arc::new(BrokenJournal(AtomicU32::new(0)));
    let model = Arc::new(ScriptedModel::from_fn(|_| tool_turn(Usage::new(10, 0))));
    let retry = ModelRetryMiddleware::new().retry_on(|_| true);
    let l = limits("input_cost_per_million = 1.0").with_journal(journal.clone());
    let stack = MiddlewareStack::new().with(retry).unwrap().with(l).unwrap();
    let mut c = RunContext::new(RunConfig::new("r"), ());
    let err = agent(model.clone(), stack).run(&mut c, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Middleware);
    assert!(
        err.to_string().contains("accounting could not be recorded (disk full)"),
        "{err}"
    );
    assert_eq!(journal.0.load(Ordering::SeqCst), 1);
    // even a retry that would accept the error sends nothing more
    assert!(PriceBudget::of(&c).dispatch(&c, false).is_err());
}

// ----- Manual rates -----

/// "Without manual rates the budget uses the same catalog-priced components as reported API spend."
#[tokio::test]
async fn without_manual_rates_the_catalog_prices_the_budget() {
    let model = Arc::new(
        ScriptedModel::new([text_turn("ok", usage(M, 100_000, 0, 0))]).with_id("anthropic:claude-sonnet-4-20250514"),
    );
    let mut c = RunContext::new(RunConfig::new("r"), ());
    agent(model, stack_of(limits("max_price_usd = 10.0")))
        .run(&mut c, &(), "go")
        .await
        .unwrap();
    let charge = &LimitsMiddleware::budget(&c).charges[0];
    assert_eq!(charge.model, "anthropic:claude-sonnet-4-20250514");
    assert!(close(charge.budget_usd.unwrap(), 3.0 + 1.5));
    assert_eq!(charge.api_usd, charge.budget_usd);
}

/// "Setting any rate makes a separate budget valuation, computed with the
/// same calculator and snapshotted per attempt when it is dispatched."
#[tokio::test(start_paused = true)]
async fn any_manual_rate_makes_a_separate_valuation_snapshotted_at_dispatch() {
    let model = Arc::new(ScriptedModel::new([text_turn("ok", usage(M, 100_000, 0, 0))]).with_id("openai:gpt-4o"));
    let mut c = RunContext::new(RunConfig::new("r"), ());
    agent(model, stack_of(limits("input_cost_per_million = 1.0")))
        .run(&mut c, &(), "go")
        .await
        .unwrap();
    let charge = &LimitsMiddleware::budget(&c).charges[0];
    assert!(
        close(charge.budget_usd.unwrap(), 1.0),
        "manual input rate; output unpriced, not catalog"
    );
    assert!(charge.partial);
    assert!(
        close(charge.api_usd.unwrap(), 2.5 + 1.0),
        "the API cost keeps the catalog basis"
    );

    // the rates in force when the attempt was dispatched value it, even if they change in flight
    let l = limits("input_cost_per_million = 1.0");
    let handle = l.clone();
    let agent = Arc::new(
        Agent::<()>::new(Slow {
            calls: AtomicU32::new(0),
        })
        .with_stack(stack_of(l)),
    );
    let a = agent.clone();
    let run = tokio::spawn(async move {
        let mut c = RunContext::new(RunConfig::new("r"), ());
        a.run(&mut c, &(), "1000").await.unwrap();
        LimitsMiddleware::budget(&c)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle
        .set_manual_rates(TokenRates {
            input: Some(100.0),
            ..TokenRates::default()
        })
        .unwrap();
    let budget = run.await.unwrap();
    assert!(
        close(budget.spent_usd.unwrap(), 1.0),
        "1M tokens at the $1 dispatched with"
    );
}

/// "Changing the rates later does not reprice earlier charges, and reported
/// API cost keeps its own pricing basis."
#[tokio::test]
async fn changing_rates_later_does_not_reprice_earlier_charges() {
    let model = Arc::new(ScriptedModel::from_fn(|_| tool_turn(Usage::new(M, 0))).with_id("openai:gpt-4o-mini"));
    let l = limits("input_cost_per_million = 1.0");
    let handle = l.clone();
    struct ChangeRates(LimitsMiddleware);
    #[middleware(name = "change_rates")]
    impl ChangeRates {
        #[after_tool]
        fn change(&self) -> Result<()> {
            let rates = TokenRates {
                input: Some(2.0),
                ..TokenRates::default()
            };
            self.0.set_manual_rates(rates).map_err(TinyAgentsError::from)
        }
    }
    let stack = MiddlewareStack::new()
        .with(ChangeRates(handle))
        .unwrap()
        .with(l)
        .unwrap();
    let mut c = RunContext::new(RunConfig::new("r"), ());
    let _ = agent(model, stack).with_max_steps(2).run(&mut c, &(), "go").await;
    let charges = LimitsMiddleware::budget(&c).charges;
    let budget: Vec<f64> = charges.iter().map(|c| c.budget_usd.unwrap()).collect();
    let api: Vec<f64> = charges.iter().map(|c| c.api_usd.unwrap()).collect();
    assert_eq!(budget, [1.0, 2.0]);
    assert!(close(api[0], 0.15) && close(api[1], 0.15), "{api:?}");
}

/// "Rates must be finite and not negative, otherwise the configuration is rejected."
#[test]
fn rates_must_be_finite_and_not_negative() {
    let err = from_toml_str::<LimitsConfig>("input_cost_per_million = -3.0").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: `input_cost_per_million` = -3.0: must not be negative"
    );
    let err = from_toml_str::<LimitsConfig>("output_cost_per_million = nan").unwrap_err();
    let lines: Vec<String> = err.errors().iter().map(ToString::to_string).collect();
    assert!(
        lines
            .contains(&"`output_cost_per_million` = \"NaN\": must be a finite number (not NaN or infinite)".to_owned()),
        "{lines:?}"
    );
    let err = from_toml_str::<LimitsConfig>("cache_write_1h_cost_per_million = inf").unwrap_err();
    assert_eq!(err.errors()[0].path, "cache_write_1h_cost_per_million");
    let err = from_toml_str::<LimitsConfig>("max_price_usd = -1.0").unwrap_err();
    assert_eq!(err.errors()[0].path, "max_price_usd");
    let err = LimitsMiddleware::new()
        .manual_rates(TokenRates {
            cache_read: Some(f64::NAN),
            ..TokenRates::default()
        })
        .unwrap_err();
    assert_eq!(err.errors()[0].path, "cache_read_cost_per_million");
    assert_eq!(err.errors()[0].rule, "must be a finite number and not negative");
}

/// "A rate you do not set stays unset: cache reads and writes are never
/// priced at the input rate, and one-hour writes are never derived from the
/// base write rate."
#[tokio::test]
async fn an_unset_rate_is_never_derived_from_another() {
    let model = Arc::new(ScriptedModel::new([text_turn("ok", usage(M, 0, M, M))]));
    let mut c = RunContext::new(RunConfig::new("r"), ());
    agent(model, stack_of(limits("input_cost_per_million = 1.0")))
        .run(&mut c, &(), "go")
        .await
        .unwrap();
    let b = LimitsMiddleware::budget(&c);
    assert!(
        close(b.spent_usd.unwrap(), 1.0),
        "cache tokens are not priced at the input rate"
    );
    assert_eq!(b.partial_reasons.len(), 2);

    /// Asks for one-hour cache writes.
    #[before_model]
    fn one_hour(request: &mut ModelRequest) -> Result<()> {
        request.params.extra.insert("cache_ttl".into(), json!("1h"));
        Ok(())
    }
    let model = Arc::new(ScriptedModel::new([text_turn("ok", usage(0, 0, 0, M))]));
    let stack = MiddlewareStack::new()
        .with(OneHour)
        .unwrap()
        .with(limits("cache_write_cost_per_million = 3.75"))
        .unwrap();
    let mut c = RunContext::new(RunConfig::new("r"), ());
    agent(model, stack).run(&mut c, &(), "go").await.unwrap();
    let b = LimitsMiddleware::budget(&c);
    assert_eq!(
        b.spent_usd,
        Some(0.0),
        "one-hour writes are not priced at the base write rate"
    );
    assert_eq!(
        b.partial_reasons,
        ["`cache_write_1h` tokens were used but manual budget rates give no `cache_write_1h` rate"]
    );
}

/// "Non-zero usage in a category with no rate makes the budget valuation
/// partial, while an explicit 0.0 rate is a known zero."
#[tokio::test]
async fn an_explicit_zero_rate_is_a_known_zero() {
    let model = Arc::new(ScriptedModel::new([text_turn("ok", usage(M, 0, M, 0))]));
    let sink = Arc::new(CollectingSink::new());
    let mut c = ctx(&sink);
    agent(
        model,
        stack_of(limits(
            "max_price_usd = 5.0\ninput_cost_per_million = 1.0\ncache_read_cost_per_million = 0.0",
        )),
    )
    .run(&mut c, &(), "go")
    .await
    .unwrap();
    let b = LimitsMiddleware::budget(&c);
    assert!(close(b.spent_usd.unwrap(), 1.0));
    assert!(
        b.partial_reasons.is_empty(),
        "zero usage in unrated classes and a 0.0 rate are exact"
    );
    assert!(!b.charges[0].partial);
    assert!(notices(&sink).is_empty());
}

// ----- Unsupported dimensions -----

/// "Only token components are valued: uncached input, output including
/// reasoning, cache reads, cache writes (base rate and an optional one-hour
/// rate). Server-tool fees, cache storage or time charges, and other pricing
/// modifiers are not valued. When one is known to apply, the cost is
/// reported as incomplete instead of being treated as zero."
#[tokio::test]
async fn only_token_components_are_valued_and_a_known_fee_makes_the_cost_incomplete() {
    /// Knows its provider charges a server-tool fee for this call.
    #[after_model]
    fn server_tool_fee(ctx: &mut RunContext) -> Result<()> {
        PriceBudget::of(ctx).mark_incomplete(
            ctx,
            "server_tool_fees",
            "a web-search server-tool fee applies and is not valued",
        );
        Ok(())
    }
    let reasoning = Usage {
        reasoning_tokens: 400_000,
        ..Usage::new(0, 500_000)
    };
    let model = Arc::new(ScriptedModel::new([text_turn("ok", reasoning)]));
    let sink = Arc::new(CollectingSink::new());
    let mut c = ctx(&sink);
    let stack = MiddlewareStack::new()
        .with(ServerToolFee)
        .unwrap()
        .with(limits("max_price_usd = 5.0\noutput_cost_per_million = 2.0"))
        .unwrap();
    agent(model, stack).run(&mut c, &(), "go").await.unwrap();
    let b = LimitsMiddleware::budget(&c);
    assert!(close(b.spent_usd.unwrap(), 1.0), "output including reasoning, once");
    assert_eq!(
        b.partial_reasons,
        ["a web-search server-tool fee applies and is not valued"]
    );
    assert_eq!(notices(&sink).len(), 1);
}

// ----- Exclusions -----

/// "Usage from providers that are not metered per token (…) is recorded with
/// an excluded billing class. It gets no catalog charge, and manual rates do
/// not turn it into API spend, so it never counts toward max_price_usd."
#[tokio::test]
async fn excluded_usage_is_recorded_but_never_counts() {
    let model = Arc::new(
        ScriptedModel::from_fn(|req| {
            if req.messages.len() < 6 {
                tool_turn(Usage::new(10 * M, M))
            } else {
                text_turn("done", Usage::new(10 * M, M))
            }
        })
        .with_id("codex:gpt-5"),
    );
    let mut c = RunContext::new(RunConfig::new("r"), ());
    let run = agent(
        model,
        stack_of(limits(
            "max_price_usd = 0.01\ninput_cost_per_million = 1.0\noutput_cost_per_million = 1.0",
        )),
    )
    .run(&mut c, &(), "go")
    .await
    .unwrap();
    assert_eq!(run.final_text(), "done");
    let b = LimitsMiddleware::budget(&c);
    assert_eq!(b.charges.len(), 4, "three tool turns and the answer");
    assert!(b
        .charges
        .iter()
        .all(|c| c.billing == BillingClass::Excluded && c.api_usd.is_none() && c.budget_usd.is_none()));
    assert_eq!(b.charges[0].usage, Usage::new(10 * M, M), "recorded");
}

/// "A session that is entirely excluded has no dollar total, which differs from a known zero."
#[tokio::test]
async fn an_entirely_excluded_cycle_has_no_dollar_total() {
    let excluded = Arc::new(ScriptedModel::new([text_turn("ok", Usage::new(M, 0))]).with_id("kimi-code:k2"));
    let mut c = RunContext::new(RunConfig::new("r"), ());
    agent(excluded, stack_of(limits("max_price_usd = 1.0")))
        .run(&mut c, &(), "go")
        .await
        .unwrap();
    assert_eq!(LimitsMiddleware::budget(&c).spent_usd, None);

    let free = Arc::new(ScriptedModel::new([text_turn("ok", Usage::new(M, 0))]));
    let mut c = RunContext::new(RunConfig::new("r"), ());
    agent(
        free,
        stack_of(limits("max_price_usd = 1.0\ninput_cost_per_million = 0.0")),
    )
    .run(&mut c, &(), "go")
    .await
    .unwrap();
    assert_eq!(LimitsMiddleware::budget(&c).spent_usd, Some(0.0), "a known zero");
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "limits").unwrap();
    assert_eq!(doc.config_type, Some("limits"));
    assert_eq!(
        doc.hooks,
        [
            HookKind::BeforeAgent,
            HookKind::BeforeModel,
            HookKind::BeforeTool,
            HookKind::WrapModel
        ]
    );
    let keys: Vec<&str> = doc.config.iter().map(|f| f.name).collect();
    for key in [
        "max_steps",
        "max_turns",
        "max_price_usd",
        "input_cost_per_million",
        "output_cost_per_million",
        "cache_read_cost_per_million",
        "cache_write_cost_per_million",
        "cache_write_1h_cost_per_million",
    ] {
        assert!(keys.contains(&key), "{key}");
    }
}

/// `limits` checks and counts every paid attempt, the re-asks of
/// `structured_output` among them: `limits` orders itself inside
/// `structured_output`, also when `output_limit_recovery` (which used to
/// order the two by sitting between them) is removed.
#[tokio::test]
async fn structured_output_re_asks_are_charged_to_the_price_budget() {
    // $1 per million input tokens; every attempt costs $1.
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::Reply(ModelResponse::text("not json").with_usage(Usage::new(1_000_000, 0))),
        ScriptedTurn::Reply(ModelResponse::text(r#"{"answer": 42}"#).with_usage(Usage::new(1_000_000, 0))),
    ]));
    let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]});
    // Output-limit recovery (on by default) is what happens to order the two
    // today (structured_output before it, limits after it); a stack without it
    // leaves them in registration order.
    let stack = MiddlewareStack::new()
        .without("output_limit_recovery")
        .unwrap()
        .with(limits(
            "max_price_usd = 100.0\ninput_cost_per_million = 1.0\noutput_cost_per_million = 0.0",
        ))
        .unwrap()
        .with(StructuredOutputMiddleware::new(schema).unwrap().max_retries(1))
        .unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = Agent::<()>::new(model.clone())
        .with_stack(stack)
        .run(&mut ctx, &(), "answer")
        .await
        .unwrap();
    assert_eq!(run.structured_output, Some(json!({"answer": 42})));
    assert_eq!(ctx.usage().input_tokens, 2_000_000, "two paid attempts were made");
    let budget = LimitsMiddleware::budget(&ctx);
    assert!(
        close(budget.spent_usd.unwrap(), 2.0),
        "both paid attempts count against max_price_usd: {budget:?}"
    );
}

/// A sub-agent (no stack) whose model asks for `ping`, one call a turn,
/// until `pings` have been answered, then says "child done"; and the count
/// of the `ping` calls that ran.
fn pinging_child(pings: usize) -> (Agent<()>, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let ping = tool_fn("ping", "Pong.", move |_cx, _a| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok("pong".into())
        }
    });
    let model = ScriptedModel::from_fn(move |request| {
        let answered = request.messages.iter().filter(|m| m.role == Role::Tool).count();
        if answered >= pings {
            ScriptedTurn::text("child done")
        } else {
            ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
                format!("c{answered}"),
                "ping",
                json!({}),
            )]))
        }
    });
    (
        Agent::new(model).with_tools(ToolRegistry::new().with(ping).unwrap()),
        ran,
    )
}

/// `limits`' `max_steps` caps tool calls per session (thread), sub-agents
/// included: a sub-agent run (`RunConfig::child_of`) has no thread of its
/// own but counts toward its parent's session, so a session capped at 2
/// tool calls makes 2, however they are delegated (it made 6 when each
/// child counted from zero).
#[tokio::test]
async fn max_steps_per_session_counts_the_sub_agents_tool_calls() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let stack = Arc::new(
        MiddlewareStack::new()
            .with(from_toml_str::<LimitsConfig>("max_steps = 2").unwrap().build())
            .unwrap(),
    );
    let (child, pings) = pinging_child(2);
    let child = child.with_shared_stack(stack.clone());
    let helper = AgentTool::new(Arc::new(child), "helper", "Helps.", || ((), ()));
    let delegations = Arc::new(AtomicUsize::new(0));
    let asked = delegations.clone();
    let parent_model = ScriptedModel::from_fn(move |request| {
        let answered = request.messages.iter().filter(|m| m.role == Role::Tool).count();
        if answered >= 2 {
            ScriptedTurn::text("all done")
        } else {
            asked.fetch_add(1, Ordering::SeqCst);
            ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
                format!("d{answered}"),
                "helper",
                json!({"input": "work"}),
            )]))
        }
    });
    let parent = Agent::new(parent_model)
        .with_tools(ToolRegistry::new().with(helper).unwrap())
        .with_shared_stack(stack);
    let mut ctx = RunContext::new(RunConfig::new("p").with_thread("session-1"), ());
    let _ = parent.run(&mut ctx, &(), "delegate").await;
    let total = pings.load(Ordering::SeqCst) + delegations.load(Ordering::SeqCst);
    assert!(
        total <= 2,
        "the session ran {} delegations and {} sub-agent tool calls under max_steps = 2",
        delegations.load(Ordering::SeqCst),
        pings.load(Ordering::SeqCst)
    );
}

/// A parent's `max_steps` holds over a sub-agent whatever the sub-agent's
/// stack (here none): the runtime asks the parent's count at the child's
/// last check, in the parent's session, or without a session in the
/// parent run's own count.
#[tokio::test]
async fn max_steps_holds_over_a_sub_agent_with_a_stack_of_its_own() {
    use std::sync::atomic::Ordering;
    for thread in [Some("session-2"), None] {
        // the child asks for five pings, one per turn, then stops
        let (child, pings) = pinging_child(5);
        let helper = AgentTool::new(Arc::new(child), "helper", "Helps.", || ((), ()));
        let parent = Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new("d0", "helper", json!({"input": "work"}))]),
            ScriptedTurn::text("all done"),
        ]))
        .with_tools(ToolRegistry::new().with(helper).unwrap())
        .with_stack(MiddlewareStack::new().with(limits("max_steps = 3")).unwrap());
        let config = match thread {
            Some(t) => RunConfig::new("p").with_thread(t),
            None => RunConfig::new("p"),
        };
        let mut ctx = RunContext::new(config, ());
        let _ = parent.run(&mut ctx, &(), "delegate").await;
        // one step for the delegation, two for the child's pings: the third ping is refused
        assert_eq!(
            pings.load(Ordering::SeqCst),
            2,
            "max_steps = 3 over the delegation and the sub-agent's pings (thread {thread:?})"
        );
    }
}

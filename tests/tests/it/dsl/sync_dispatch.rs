//! The synchronous lifecycle path (plain-fn hooks, run with no future) keeps
//! every promise of the async one: the same order, the same balanced
//! `MiddlewareStarted`/`MiddlewareCompleted` events and outcomes, the same
//! `on_error` pass, panics classified, undeclared jumps refused, observers
//! called. Each scenario runs once with plain fns and once with `async fn`s
//! of the same bodies, and the two runs must agree in every detail.

use std::sync::{Arc, Mutex};

use tinyagents::harness::event::{AgentEvent, CollectingSink, EventMask, HookOutcome};
use tinyagents::harness::middleware::hook::BeforeModel;
use tinyagents::harness::middleware::{observe_hook, HookObserver};
use tinyagents::prelude::*;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Act {
    Pass,
    Fail,
    Panic,
    Jump,
}

type Log = Arc<Mutex<Vec<String>>>;

#[derive(Clone)]
struct Step {
    name: &'static str,
    act: Act,
    log: Log,
}

impl Step {
    fn run(&self, ctx: &mut RunContext, hook: &str) -> Result<()> {
        self.log.lock().unwrap().push(format!("{hook}:{}", self.name));
        match self.act {
            Act::Pass => Ok(()),
            Act::Fail => Err(TinyAgentsError::validation(format!("{} refused", self.name))),
            Act::Panic => panic!("{} panicked", self.name),
            Act::Jump => {
                ctx.flow_mut().jump_to(JumpTarget::End);
                Ok(())
            }
        }
    }

    fn saw(&self, error: &TinyAgentsError) -> Result<()> {
        self.log
            .lock()
            .unwrap()
            .push(format!("on_error:{}:{:?}", self.name, error.kind()));
        Ok(())
    }
}

/// The hooks as plain fns: the stack takes their synchronous form.
struct Plain(Step);

#[middleware]
impl Plain {
    #[before_agent]
    fn start(&self, ctx: &mut RunContext) -> Result<()> {
        self.0.run(ctx, "before_agent")
    }

    #[before_model]
    fn before(&self, ctx: &mut RunContext, _request: &mut ModelRequest) -> Result<()> {
        self.0.run(ctx, "before_model")
    }

    #[after_model]
    fn after(&self, ctx: &mut RunContext, _response: &mut ModelResponse) -> Result<()> {
        self.0.run(ctx, "after_model")
    }

    #[on_error]
    fn failed(&self, error: &TinyAgentsError) -> Result<()> {
        self.0.saw(error)
    }
}

/// The same hooks as `async fn`s: the stack awaits them.
struct Awaited(Step);

#[middleware]
impl Awaited {
    #[before_agent]
    async fn start(&self, ctx: &mut RunContext) -> Result<()> {
        self.0.run(ctx, "before_agent")
    }

    #[before_model]
    async fn before(&self, ctx: &mut RunContext, _request: &mut ModelRequest) -> Result<()> {
        self.0.run(ctx, "before_model")
    }

    #[after_model]
    async fn after(&self, ctx: &mut RunContext, _response: &mut ModelResponse) -> Result<()> {
        self.0.run(ctx, "after_model")
    }

    #[on_error]
    async fn failed(&self, error: &TinyAgentsError) -> Result<()> {
        self.0.saw(error)
    }
}

/// What one scenario produced: the hooks' log, the bracketing events, and
/// each dispatch's result.
#[derive(Debug, PartialEq)]
struct Trace {
    log: Vec<String>,
    events: Vec<String>,
    results: Vec<String>,
}

fn describe(result: Result<()>) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(e) => format!("{:?}: {e}", e.kind()),
    }
}

/// A stack of one `wrap`ped step per `(name, act)`, in order, each logging into `log`.
fn stack_of<M: Middleware<()> + 'static>(
    wrap: impl Fn(Step) -> M,
    steps: &[(&'static str, Act)],
    log: &Log,
) -> MiddlewareStack<()> {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    for &(name, act) in steps {
        let step = Step {
            name,
            act,
            log: log.clone(),
        };
        stack.add_named(name, wrap(step)).unwrap();
    }
    stack
}

/// Runs `before_agent`, `before_model` and `after_model` on three
/// middleware acting as `acts` say. With `watched`, the sink wants every
/// event (the bracketed pass); without, it wants none (the quiet pass, one
/// panic guard and no brackets).
async fn scenario<M: Middleware<()> + 'static>(wrap: impl Fn(Step) -> M, acts: [Act; 3], watched: bool) -> Trace {
    let log: Log = Arc::default();
    let [a, b, c] = acts;
    let stack = stack_of(wrap, &[("a", a), ("b", b), ("c", c)], &log);
    let sink = Arc::new(if watched {
        CollectingSink::new()
    } else {
        CollectingSink::with_mask(EventMask::NONE)
    });
    let mut ctx: RunContext = RunContext::new(RunConfig::new("sync"), ()).with_sink(sink.clone());
    let results = vec![
        describe(stack.run_before_agent(&mut ctx, &()).await),
        describe(
            stack
                .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
                .await,
        ),
        describe(
            stack
                .run_after_model(&mut ctx, &(), &mut ModelResponse::text("hi"))
                .await,
        ),
    ];
    let events = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::MiddlewareStarted { middleware, hook, .. } => Some(format!("start {middleware} {hook:?}")),
            AgentEvent::MiddlewareCompleted {
                middleware,
                hook,
                outcome,
                ..
            } => Some(format!("done {middleware} {hook:?} {outcome:?}")),
            _ => None,
        })
        .collect();
    let log = log.lock().unwrap().clone();
    Trace { log, events, results }
}

/// The scenario with plain fns and with `async fn`s, watched and not: all
/// four agree (but for the events an unwatched run does not record).
async fn both(acts: [Act; 3]) -> Trace {
    let plain = scenario(Plain, acts, true).await;
    let awaited = scenario(Awaited, acts, true).await;
    assert_eq!(plain, awaited, "the sync and async paths disagree for {acts:?}");
    let quiet = scenario(Plain, acts, false).await;
    let quiet_awaited = scenario(Awaited, acts, false).await;
    assert_eq!(
        quiet, quiet_awaited,
        "the quiet sync pass and the async one disagree for {acts:?}"
    );
    assert!(quiet.events.is_empty(), "{:?}", quiet.events);
    assert_eq!(
        (&quiet.log, &quiet.results),
        (&plain.log, &plain.results),
        "watching changed what ran, for {acts:?}"
    );
    plain
}

#[tokio::test]
async fn before_hooks_run_in_order_and_after_hooks_in_reverse() {
    let trace = both([Act::Pass; 3]).await;
    assert_eq!(
        trace.log,
        [
            "before_agent:a",
            "before_agent:b",
            "before_agent:c",
            "before_model:a",
            "before_model:b",
            "before_model:c",
            "after_model:c",
            "after_model:b",
            "after_model:a",
        ]
    );
    assert_eq!(trace.results, ["ok", "ok", "ok"]);
    assert_eq!(trace.events.len(), 18, "one balanced pair per hook: {:?}", trace.events);
    assert_eq!(trace.events[0], "start a BeforeAgent");
    assert_eq!(trace.events[1], format!("done a BeforeAgent {:?}", HookOutcome::Ok));
}

#[tokio::test]
async fn a_failing_hook_stops_the_pass_and_every_on_error_sees_it() {
    let trace = both([Act::Pass, Act::Fail, Act::Pass]).await;
    // `c` never runs a hook; every on_error (c's included) sees each failure.
    assert!(
        !trace.log.iter().any(|l| l.starts_with("before_model:c")),
        "{:?}",
        trace.log
    );
    assert_eq!(
        &trace.log[..5],
        [
            "before_agent:a",
            "before_agent:b",
            "on_error:a:Validation",
            "on_error:b:Validation",
            "on_error:c:Validation",
        ]
    );
    assert!(
        trace
            .results
            .iter()
            .all(|r| r == "Validation: validation failed: b refused"),
        "{:?}",
        trace.results
    );
    assert!(
        trace.events.contains(&format!(
            "done b BeforeModel {:?}",
            HookOutcome::Error(ErrorKind::Validation)
        )),
        "{:?}",
        trace.events
    );
}

#[tokio::test]
async fn a_panicking_hook_is_a_classified_error_with_a_panicked_outcome() {
    let trace = both([Act::Pass, Act::Panic, Act::Pass]).await;
    for result in &trace.results {
        assert!(result.contains("b panicked"), "{result}");
    }
    assert!(trace
        .events
        .contains(&format!("done b BeforeAgent {:?}", HookOutcome::Panicked)));
    assert!(
        trace.log.iter().any(|l| l.starts_with("on_error:c:")),
        "{:?}",
        trace.log
    );
    let starts = trace.events.iter().filter(|e| e.starts_with("start")).count();
    let dones = trace.events.iter().filter(|e| e.starts_with("done")).count();
    assert_eq!(
        starts, dones,
        "brackets stay balanced after a panic: {:?}",
        trace.events
    );
}

#[tokio::test]
async fn an_undeclared_jump_is_refused_naming_the_middleware_and_the_fix() {
    let trace = both([Act::Jump, Act::Pass, Act::Pass]).await;
    for result in &trace.results {
        assert!(result.starts_with("Validation"), "{result}");
        assert!(
            result.contains("middleware `a`") && result.contains("can_jump_to = [end]"),
            "{result}"
        );
    }
    assert!(
        !trace.log.iter().any(|l| l.starts_with("before_model:b")),
        "{:?}",
        trace.log
    );
}

#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl HookObserver<ModelRequest> for Seen {
    fn begin(&self, _request: &ModelRequest) {
        self.0.lock().unwrap().push("begin".into());
    }
    fn after(&self, middleware: &Arc<str>, _request: &ModelRequest) {
        self.0.lock().unwrap().push(format!("after {middleware}"));
    }
}

#[tokio::test]
async fn observers_watch_the_synchronous_pass_too() {
    let stack = stack_of(Plain, &[("a", Act::Pass), ("b", Act::Pass)], &Log::default());
    let mut ctx: RunContext = RunContext::new(RunConfig::new("observed"), ());
    let seen = Arc::new(Seen::default());
    observe_hook::<BeforeModel, _>(&ctx, seen.clone());
    stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap();
    assert_eq!(*seen.0.lock().unwrap(), ["begin", "after a", "after b"]);
}

/// An observer installed mid-run (in a run with middleware state, through a
/// branch of it) is seen from the next dispatch on, by the synchronous pass
/// and the async one: the dispatch skips the observer lookup only while the
/// run has installed none.
async fn observed_mid_run<M: Middleware<()> + 'static>(wrap: impl Fn(Step) -> M) -> Vec<String> {
    let stack = stack_of(wrap, &[("a", Act::Pass), ("b", Act::Pass)], &Log::default());
    let mut ctx: RunContext = RunContext::new(RunConfig::new("observed"), ());
    // middleware state, as every real run has
    ctx.locals().local::<std::sync::atomic::AtomicU64>();
    stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap();
    let seen = Arc::new(Seen::default());
    let branch = ctx.fork(());
    observe_hook::<BeforeModel, _>(&branch, seen.clone());
    stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap();

    seen.0.lock().unwrap().clone()
}

#[tokio::test]
async fn an_observer_installed_mid_run_is_seen_from_the_next_dispatch_on() {
    assert_eq!(observed_mid_run(Plain).await, ["begin", "after a", "after b"]);
    assert_eq!(observed_mid_run(Awaited).await, ["begin", "after a", "after b"]);
}

/// A delta hook as a plain fn: the stream takes its synchronous form.
struct PlainDelta(Step);

#[middleware]
impl PlainDelta {
    #[on_model_delta]
    fn delta(&self, ctx: &mut RunContext, _delta: &mut ModelDelta) -> Result<()> {
        self.0.run(ctx, "on_model_delta")
    }

    #[on_error]
    fn failed(&self, error: &TinyAgentsError) -> Result<()> {
        self.0.saw(error)
    }
}

/// The same delta hook as an `async fn`.
struct AwaitedDelta(Step);

#[middleware]
impl AwaitedDelta {
    #[on_model_delta]
    async fn delta(&self, ctx: &mut RunContext, _delta: &mut ModelDelta) -> Result<()> {
        self.0.run(ctx, "on_model_delta")
    }

    #[on_error]
    async fn failed(&self, error: &TinyAgentsError) -> Result<()> {
        self.0.saw(error)
    }
}

async fn delta_scenario<M: Middleware<()> + 'static>(wrap: impl Fn(Step) -> M, b: Act) -> (Vec<String>, String) {
    let log: Log = Arc::default();
    let stack = stack_of(wrap, &[("a", Act::Pass), ("b", b), ("c", Act::Pass)], &log);
    let mut ctx: RunContext = RunContext::new(RunConfig::new("deltas"), ());
    let result = describe(
        stack
            .run_on_model_delta(&mut ctx, &(), &mut ModelDelta::text("x"))
            .await,
    );
    let log = log.lock().unwrap().clone();
    (log, result)
}

/// A delta hook that fails, panics or asks for an undeclared jump stops the
/// pass with a classified error every `on_error` sees, the same whether the
/// hooks are plain fns (one panic guard for the pass) or `async fn`s.
#[tokio::test]
async fn a_delta_hook_that_fails_panics_or_jumps_stops_the_pass_the_same_on_both_paths() {
    for (act, expect) in [
        (Act::Fail, "b refused"),
        (Act::Panic, "b panicked"),
        (Act::Jump, "did not declare it"),
    ] {
        let plain = delta_scenario(PlainDelta, act).await;
        let awaited = delta_scenario(AwaitedDelta, act).await;
        assert_eq!(plain, awaited, "the sync and async delta paths disagree for {act:?}");
        let (log, result) = plain;
        assert!(result.contains(expect), "{act:?}: {result}");
        assert!(!log.contains(&"on_model_delta:c".to_string()), "{act:?}: {log:?}");
        for name in ["a", "b", "c"] {
            assert!(
                log.iter().any(|l| l.starts_with(&format!("on_error:{name}:"))),
                "{act:?}: on_error of {name} did not see the failure: {log:?}"
            );
        }
    }
}

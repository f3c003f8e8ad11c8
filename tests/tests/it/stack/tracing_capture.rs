//! The `tracing` capture of the observability tests (`capture/`) captures
//! what its test emits whatever other threads did first or do meanwhile:
//! `tracing` caches a callsite's interest globally, so a callsite first hit on
//! a thread with no subscriber must not be lost to a capture installed on
//! another (issue 22). Each case below forces one such order; none depends on
//! timing.

use crate::capture;

use std::sync::{Arc, Barrier, Mutex};
use std::thread::ThreadId;

use serde_json::json;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tracing::Instrument;

/// Callsites of their own (a span and an event in it), so each test decides
/// which thread reaches them first.
macro_rules! emitter {
    ($name:ident) => {
        fn $name(tag: &str) {
            let span = tracing::info_span!(stringify!($name), tag);
            let _entered = span.enter();
            tracing::info!(tag, "emitted");
        }
    };
}

emitter!(first_hit_while_captured);
emitter!(first_hit_before_any_capture);
emitter!(two_captures_at_once);

/// The tags of the captured events, and of the captured spans named `name`.
fn tags(captured: &capture::Captured, name: &str) -> (Vec<String>, Vec<String>) {
    let events = captured.events().iter().map(|e| e.fields["tag"].clone()).collect();
    let spans = captured
        .spans_named(name)
        .iter()
        .map(|s| s.fields["tag"].clone())
        .collect();
    (events, spans)
}

fn mine() -> (Vec<String>, Vec<String>) {
    (vec!["mine".to_owned()], vec!["mine".to_owned()])
}

/// Runs `f` to completion on a new thread, which has no capture.
fn on_another_thread(f: impl FnOnce() + Send + 'static) {
    std::thread::spawn(f).join().unwrap();
}

/// The callsites are first reached by another thread while this test's
/// capture is live: with one subscriber per test, `tracing` asks that
/// thread's default (none) and caches "never", and this test would capture
/// nothing, every time.
#[test]
fn a_callsite_first_hit_elsewhere_while_a_capture_is_live_is_captured() {
    let (captured, _guard) = capture::capture();
    on_another_thread(|| first_hit_while_captured("other"));
    assert!(captured.events().is_empty(), "another thread's output leaked in");
    first_hit_while_captured("mine");
    assert_eq!(tags(&captured, "first_hit_while_captured"), mine());
}

/// The order: the callsites are first reached by a thread with no
/// subscriber, and the capture is installed afterwards.
#[test]
fn a_callsite_first_hit_elsewhere_before_any_capture_is_captured() {
    on_another_thread(|| first_hit_before_any_capture("other"));
    let (captured, _guard) = capture::capture();
    first_hit_before_any_capture("mine");
    assert_eq!(tags(&captured, "first_hit_before_any_capture"), mine());
}

/// Two captures live at once on two threads, their emissions interleaved by
/// a barrier: each sees exactly its own.
#[test]
fn captures_on_two_threads_at_once_see_only_their_own() {
    let barrier = Arc::new(Barrier::new(2));
    let run = |tag: &'static str, barrier: Arc<Barrier>| {
        move || {
            let (captured, _guard) = capture::capture();
            for _ in 0..3 {
                barrier.wait();
                two_captures_at_once(tag);
            }
            barrier.wait();
            tags(&captured, "two_captures_at_once")
        }
    };
    let a = std::thread::spawn(run("a", barrier.clone()));
    let b = std::thread::spawn(run("b", barrier));
    let three = |t: &str| vec![t.to_owned(); 3];
    assert_eq!(a.join().unwrap(), (three("a"), three("a")));
    assert_eq!(b.join().unwrap(), (three("b"), three("b")));
}

/// A capture dropped stops capturing; a capture installed inside another
/// takes the thread's output until it drops.
#[test]
fn captures_nest_and_stop_when_dropped() {
    let (outer, outer_guard) = capture::capture();
    tracing::info!(tag = "outer-1", "emitted");
    {
        let (inner, _inner_guard) = capture::capture();
        tracing::info!(tag = "inner", "emitted");
        assert_eq!(tags(&inner, "none").0, ["inner"]);
    }
    tracing::info!(tag = "outer-2", "emitted");
    drop(outer_guard);
    tracing::info!(tag = "after", "emitted");
    assert_eq!(tags(&outer, "none").0, ["outer-1", "outer-2"]);
}

fn observed_agent(tool_threads: Arc<Mutex<Vec<ThreadId>>>) -> Agent<()> {
    let tools = ToolRegistry::new()
        .with(tool_fn("lookup", "Looks up.", move |_cx, _args| {
            let threads = tool_threads.clone();
            async move {
                threads.lock().unwrap().push(std::thread::current().id());
                Ok("result".into())
            }
        }))
        .unwrap();
    let stack = MiddlewareStack::new()
        .with(TracingMiddleware::new())
        .and_then(|s| s.with(LoggingMiddleware::new()))
        .unwrap();
    Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("lookup", json!({})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(tools)
    .with_stack(stack)
}

async fn run(agent: &Agent<()>, run_id: &str) {
    let run = agent
        .run(&mut RunContext::new(RunConfig::new(run_id), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "done");
}

/// The one tool call of the run ran on a thread other than the test's.
fn assert_ran_on_a_worker(tool_threads: &Mutex<Vec<std::thread::ThreadId>>) {
    let threads = tool_threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 1);
    assert_ne!(
        threads[0],
        std::thread::current().id(),
        "the run ran on a worker thread"
    );
}

/// Everything one run of `observed_agent` emits, and no other run's output.
fn assert_one_whole_run(captured: &capture::Captured, run_id: &str) {
    let events = captured.events();
    let lines: Vec<&str> = events
        .iter()
        .filter(|e| e.target == "tinyagents::logging")
        .map(|e| e.message())
        .collect();
    assert_eq!(lines, capture::LOGGING_ONE_TOOL_CALL);
    assert!(
        events
            .iter()
            .all(|e| e.fields.get("run_id").map(String::as_str) == Some(run_id)),
        "only run {run_id}'s events: {events:?}"
    );
    let runs = captured.spans_named("invoke_agent");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].fields["gen_ai.agent.id"], run_id);
    assert_eq!(captured.spans_named("chat").len(), 2);
    assert_eq!(captured.spans_named("execute_tool").len(), 1);
}

/// The `logging` and `tracing` built-ins' callsites, first reached by a run
/// on another thread while this test's capture is live.
#[test]
fn the_builtins_are_captured_after_another_thread_ran_them_first() {
    let (captured, _guard) = capture::capture();
    on_another_thread(|| {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(run(&observed_agent(Default::default()), "elsewhere"));
    });
    assert!(captured.events().is_empty() && captured.spans().is_empty());
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(run(&observed_agent(Default::default()), "here"));
    assert_one_whole_run(&captured, "here");
}

/// A run spawned onto a multi-thread runtime's workers inside a span the test
/// captures: everything under that span is captured, from any thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_worker_threads_inside_a_captured_span_is_captured() {
    let (captured, _guard) = capture::capture();
    let tool_threads = Arc::new(Mutex::new(Vec::new()));
    let agent = observed_agent(tool_threads.clone());
    let root = tracing::info_span!("test_root");
    tokio::spawn(async move { run(&agent, "in-span").await }.instrument(root))
        .await
        .unwrap();
    assert_ran_on_a_worker(&tool_threads);
    assert_one_whole_run(&captured, "in-span");
    assert_eq!(captured.spans_named("test_root").len(), 1);
    assert_eq!(
        captured.spans_named("invoke_agent")[0].parent.as_deref(),
        Some("test_root")
    );
}

/// A run spawned onto a multi-thread runtime's workers with no span around
/// it: the capture follows it by its run id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_worker_threads_is_captured_by_its_run_id() {
    let (captured, _guard) = capture::capture();
    captured.follow_run("followed-run");
    let tool_threads = Arc::new(Mutex::new(Vec::new()));
    let agent = observed_agent(tool_threads.clone());
    tokio::spawn(async move { run(&agent, "followed-run").await })
        .await
        .unwrap();
    assert_ran_on_a_worker(&tool_threads);
    assert_one_whole_run(&captured, "followed-run");
}

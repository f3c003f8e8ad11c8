//! File access is computed from the effective arguments (issue 15, item 7):
//! a review that redirects a call to another file is seen by the reviews
//! after it and by the scheduler; `before_tool` rewrites decide the schedule
//! of a concurrent batch; fn-tools declare which arguments are paths.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::middleware::PreparedToolCall;
use tinyagents::harness::tool::{FileAccess, FileAccessMode};
use tinyagents::middleware::ParallelEditGuardMiddleware;
use tinyagents::prelude::*;
use tinyagents::testing::{assert_valid_transcript, RecordingTool};

type Log = Arc<Mutex<Vec<String>>>;

/// A fn-tool writing `path`: logs its start and end around a few yields, so
/// two calls running concurrently interleave in the log.
fn writer(log: &Log) -> impl Tool + use<> {
    let log = log.clone();
    tool_fn("write", "Writes a file.", move |_cx, args| {
        let log = log.clone();
        async move {
            let path = args["path"].as_str().unwrap_or("?").to_owned();
            log.lock().unwrap().push(format!("start {path}"));
            for _ in 0..3 {
                tokio::task::yield_now().await;
            }
            log.lock().unwrap().push(format!("end {path}"));
            Ok("written".into())
        }
    })
    .with_file_access("path", FileAccessMode::Write)
}

fn two_writes(first: &str, second: &str) -> ScriptedTurn {
    ScriptedTurn::tool_calls(vec![
        ToolCall::new("c1", "write", json!({ "path": first })),
        ToolCall::new("c2", "write", json!({ "path": second })),
    ])
}

/// A batch review that redirects call `c2` to `a.rs` (as a permission hook's
/// updated input or a person's edit would).
struct RedirectInReview;

#[async_trait]
impl Middleware<()> for RedirectInReview {
    fn hooks(&self) -> HookSet {
        HookSet::ON_TOOL_BATCH
    }
    fn info(&self) -> MiddlewareInfo {
        // named like the built-in the guards order themselves after
        MiddlewareInfo::new("external_hooks").with_hooks(HookSet::ON_TOOL_BATCH)
    }
    async fn on_tool_batch(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        let i = batch.calls().iter().position(|p| p.call.id == "c2").unwrap();
        batch.set_arguments(i, json!({ "path": "a.rs" }));
        assert_eq!(
            batch.calls()[i].access,
            [FileAccess {
                path: "a.rs".into(),
                mode: FileAccessMode::Write
            }],
            "the access follows the new arguments"
        );
        Ok(())
    }
}

#[tokio::test]
async fn a_review_rewrite_is_seen_by_parallel_edit_guard_registered_before_it() {
    let log = Log::default();
    // the guard is registered first and needs no ordering: it reviews the
    // prepared calls, after every `on_tool_batch` and `before_tool`
    let stack = MiddlewareStack::empty()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap()
        .with(RedirectInReview)
        .unwrap();
    assert_eq!(stack.names(), ["parallel_edit_guard", "external_hooks"]);
    let agent = Agent::new(ScriptedModel::new([
        two_writes("a.rs", "b.rs"),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(writer(&log)).unwrap())
    .with_stack(stack);
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "edit")
        .await
        .unwrap();
    assert_valid_transcript(&run.messages);
    // the redirected second write to a.rs was refused; only the first ran
    assert_eq!(*log.lock().unwrap(), ["start a.rs", "end a.rs"]);
    let refused = run.messages[3].text().into_owned();
    assert!(refused.contains("a.rs"), "{refused}");
}

/// Redirects call `c2` to `a.rs` in `before_tool` (a `pre_tool_use` hook's updated input would).
struct RedirectBeforeTool;

#[async_trait]
impl Middleware<()> for RedirectBeforeTool {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_TOOL
    }
    async fn before_tool(&self, _: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
        if call.id == "c2" {
            call.arguments = json!({ "path": "a.rs" });
        }
        Ok(())
    }
}

async fn concurrent_log(stack: MiddlewareStack<()>, first: &str, second: &str) -> Vec<String> {
    let log = Log::default();
    let agent = Agent::new(ScriptedModel::new([
        two_writes(first, second),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(writer(&log)).unwrap())
    .with_stack(stack)
    .with_concurrent_tools();
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "edit")
        .await
        .unwrap();
    assert_valid_transcript(&run.messages);

    log.lock().unwrap().clone()
}

#[tokio::test]
async fn writes_to_different_files_run_concurrently() {
    let log = concurrent_log(MiddlewareStack::empty(), "a.rs", "b.rs").await;
    assert_eq!(log, ["start a.rs", "start b.rs", "end a.rs", "end b.rs"]);
}

#[tokio::test]
async fn a_before_tool_redirect_to_the_same_file_is_scheduled_in_order() {
    let stack = MiddlewareStack::empty().with(RedirectBeforeTool).unwrap();
    let log = concurrent_log(stack, "a.rs", "b.rs").await;
    assert_eq!(log, ["start a.rs", "end a.rs", "start a.rs", "end a.rs"]);
}

#[tokio::test]
async fn a_write_under_an_alias_of_the_tool_is_scheduled_with_the_tools_writes() {
    let log = Log::default();
    let tools = ToolRegistry::new()
        .with(writer(&log))
        .unwrap()
        .with_alias("save", "write")
        .unwrap();
    let agent = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("c1", "write", json!({ "path": "a.rs" })),
            ToolCall::new("c2", "save", json!({ "path": "a.rs" })),
            ToolCall::new("c3", "save", json!({ "path": "b.rs" })),
        ]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::empty())
    .with_concurrent_tools();
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "edit")
        .await
        .unwrap();
    assert_valid_transcript(&run.messages);
    // the two writes of a.rs (one under the alias) run one after another, in
    // the model's order; the write of b.rs (under the alias too) alongside them
    let log = log.lock().unwrap().clone();
    let at = |line: &str, nth: usize| {
        log.iter()
            .enumerate()
            .filter(|(_, l)| *l == line)
            .nth(nth)
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("{line} #{nth} in {log:?}"))
    };
    assert_eq!(log.len(), 6, "{log:?}");
    assert!(at("end a.rs", 0) < at("start a.rs", 1), "{log:?}");
    assert!(at("start b.rs", 0) < at("end a.rs", 0), "b.rs ran alongside: {log:?}");
}

/// A review of the batch (in `hook`) that does `f` to the batch it is given.
struct Review {
    hook: HookSet,
    f: fn(&mut PreparedBatch),
}

#[async_trait]
impl Middleware<()> for Review {
    fn hooks(&self) -> HookSet {
        self.hook
    }
    fn name(&self) -> &str {
        "sly_review"
    }
    async fn on_tool_batch(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        (self.f)(batch);
        Ok(())
    }
    async fn on_prepared_tool_calls(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        (self.f)(batch);
        Ok(())
    }
}

/// The batch's calls, `c2` pointed at `/etc/passwd`, in a batch made anew.
fn redirected_anew(batch: &mut PreparedBatch) {
    let calls = batch
        .calls()
        .iter()
        .map(|p| {
            let mut call = p.call.clone();
            if call.id == "c2" {
                call.arguments = json!({ "path": "/etc/passwd" });
            }
            PreparedToolCall::new(call, Vec::new())
        })
        .collect();
    *batch = PreparedBatch::new(calls);
}

/// Runs two writes under `review`; the run's error and what ran.
async fn run_under(review: Review) -> (TinyAgentsError, Vec<String>) {
    let log = Log::default();
    let agent = Agent::new(ScriptedModel::new([
        two_writes("a.rs", "b.rs"),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(writer(&log)).unwrap())
    .with_stack(MiddlewareStack::empty().with(review).unwrap());
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "edit")
        .await
        .expect_err("a review that hands back another batch fails the run");
    let ran = log.lock().unwrap().clone();
    (err, ran)
}

#[tokio::test]
async fn a_rewrite_in_the_review_of_the_prepared_calls_fails_the_run_before_any_call_runs() {
    // after every `before_tool` guard judged the call
    fn rewrite_c2(batch: &mut PreparedBatch) {
        let i = batch.calls().iter().position(|p| p.call.id == "c2").unwrap();
        batch.set_arguments(i, json!({ "path": "/etc/passwd" }));
    }
    let (err, ran) = run_under(Review {
        hook: HookSet::ON_PREPARED_TOOL_CALLS,
        f: rewrite_c2,
    })
    .await;
    assert_eq!(err.kind(), ErrorKind::Middleware, "{err}");
    let text = err.to_string();
    assert!(text.contains("`sly_review`"), "names the implementors: {text}");
    assert!(
        text.contains("rewrite in `on_tool_batch` or `before_tool`"),
        "says the fix: {text}"
    );
    assert!(ran.is_empty(), "no call ran: {ran:?}");
}

#[tokio::test]
async fn a_batch_made_anew_in_the_review_of_the_prepared_calls_fails_the_run_before_any_call_runs() {
    let (err, ran) = run_under(Review {
        hook: HookSet::ON_PREPARED_TOOL_CALLS,
        f: redirected_anew,
    })
    .await;
    assert_eq!(err.kind(), ErrorKind::Middleware, "{err}");
    let text = err.to_string();
    assert!(text.contains("replaced the batch"), "states the rule: {text}");
    assert!(
        text.contains("`on_prepared_tool_calls`") && text.contains("`sly_review`"),
        "{text}"
    );
    assert!(ran.is_empty(), "no call ran: {ran:?}");
}

#[tokio::test]
async fn a_batch_review_cannot_drop_or_add_calls_by_handing_back_another_batch() {
    fn drop_c2(batch: &mut PreparedBatch) {
        let kept = batch.calls().iter().filter(|p| p.call.id != "c2").cloned().collect();
        *batch = PreparedBatch::new(kept);
    }
    fn add_c3(batch: &mut PreparedBatch) {
        let mut calls = batch.calls().to_vec();
        calls.push(PreparedToolCall::new(
            ToolCall::new("c3", "write", json!({ "path": "c.rs" })),
            Vec::new(),
        ));
        *batch = PreparedBatch::new(calls);
    }
    for f in [drop_c2 as fn(&mut PreparedBatch), add_c3, redirected_anew] {
        let (err, ran) = run_under(Review {
            hook: HookSet::ON_TOOL_BATCH,
            f,
        })
        .await;
        assert_eq!(err.kind(), ErrorKind::Middleware, "{err}");
        assert!(err.to_string().contains("`on_tool_batch`"), "{err}");
        assert!(ran.is_empty(), "no call ran: {ran:?}");
    }
}

#[tokio::test]
async fn a_rewritten_clone_put_back_in_the_review_of_the_prepared_calls_is_still_a_rewrite() {
    fn rewrite_a_clone(batch: &mut PreparedBatch) {
        let mut copy = batch.clone();
        let i = copy.calls().iter().position(|p| p.call.id == "c2").unwrap();
        copy.set_arguments(i, json!({ "path": "/etc/passwd" }));
        *batch = copy;
    }
    let (err, ran) = run_under(Review {
        hook: HookSet::ON_PREPARED_TOOL_CALLS,
        f: rewrite_a_clone,
    })
    .await;
    assert!(err.to_string().contains("rewrote a call's arguments"), "{err}");
    assert!(ran.is_empty(), "no call ran: {ran:?}");
}

#[test]
fn fn_tools_declare_paths_by_key_pointer_and_array() {
    let tool = tool_fn("mv", "Moves files.", |_cx, _args| async move { Ok("ok".into()) })
        .with_file_access("from", FileAccessMode::Read)
        .with_file_access("/to/path", FileAccessMode::Write)
        .with_file_access("also", FileAccessMode::Write);
    let access = tool.file_access(&json!({
        "from": "a.rs",
        "to": { "path": "b.rs" },
        "also": ["c.rs", 7, "d.rs"],
    }));
    let got: Vec<(&str, FileAccessMode)> = access.iter().map(|a| (a.path.as_str(), a.mode)).collect();
    assert_eq!(
        got,
        [
            ("a.rs", FileAccessMode::Read),
            ("b.rs", FileAccessMode::Write),
            ("c.rs", FileAccessMode::Write),
            ("d.rs", FileAccessMode::Write),
        ]
    );
    // a tool without declarations touches nothing, and a missing key declares nothing
    assert!(tool.file_access(&json!({})).is_empty());
    let _ = RecordingTool::new("unused");
}

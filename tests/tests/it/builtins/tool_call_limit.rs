//! `ToolCallLimitMiddleware`: per run and per thread, per tool or all, exit
//! behaviours `continue`/`end`/`error`, and every call still gets exactly one
//! result (also with concurrent tools).

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::tool_results_by_id;
use tinyagents::testing::RecordingTool;

fn calls(names: &[&str]) -> Vec<ToolCall> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| ToolCall::new(format!("c{i}"), *n, json!({})))
        .collect()
}

struct Setup {
    agent: Agent<()>,
    search: RecordingTool,
    fetch: RecordingTool,
}

fn setup(stack: MiddlewareStack<()>, turns: Vec<ScriptedTurn>) -> Setup {
    let search = RecordingTool::new("search").returning("found");
    let fetch = RecordingTool::new("fetch").returning("fetched");
    let agent = Agent::new(ScriptedModel::new(turns))
        .with_tools(
            ToolRegistry::new()
                .with(search.clone())
                .unwrap()
                .with(fetch.clone())
                .unwrap(),
        )
        .with_stack(stack);
    Setup { agent, search, fetch }
}

impl Setup {
    /// Runs the agent once (run `r`, input "go").
    async fn run(&self) -> Result<AgentRun> {
        self.run_in(RunConfig::new("r")).await
    }

    /// Runs the agent once with `config`.
    async fn run_in(&self, config: RunConfig) -> Result<AgentRun> {
        self.agent.run(&mut RunContext::new(config, ()), &(), "go").await
    }
}

fn limit(toml: &str) -> ToolCallLimitMiddleware {
    from_toml_str::<ToolCallLimitConfig>(toml).unwrap().build()
}

fn every_call_answered_once(run: &AgentRun) {
    let asked: Vec<String> = run
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let answered: Vec<String> = tool_results_by_id(&run.messages)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(asked, answered, "each call answered exactly once, in order");
}

#[tokio::test]
async fn continue_blocks_the_calls_over_the_limit_and_the_run_goes_on() {
    let s = setup(
        MiddlewareStack::new()
            .with(limit("tool_name = \"search\"\nrun_limit = 2"))
            .unwrap(),
        vec![
            ScriptedTurn::tool_calls(calls(&["search", "fetch", "search", "search"])),
            ScriptedTurn::text("done"),
        ],
    );
    let run = s.run().await.unwrap();
    assert_eq!(run.final_text(), "done");
    every_call_answered_once(&run);
    let r = tool_results_by_id(&run.messages);
    assert_eq!(r[0].1, "found");
    assert_eq!(r[1].1, "fetched", "other tools are not counted");
    assert_eq!(r[2].1, "found");
    assert!(
        r[3].1
            .starts_with("Tool call limit reached for `search`: at most 2 per run"),
        "{}",
        r[3].1
    );
    assert!(r[3]
        .1
        .ends_with("The call to `search` was not run; do not call it again."));
    assert_eq!(s.search.calls().len(), 2);
    assert_eq!(s.fetch.calls().len(), 1);
}

#[tokio::test]
async fn the_limit_spans_the_batches_of_a_run_and_counts_all_tools_by_default() {
    let s = setup(
        MiddlewareStack::new().with(limit("run_limit = 3")).unwrap(),
        vec![
            ScriptedTurn::tool_calls(calls(&["search", "fetch"])),
            ScriptedTurn::tool_calls(calls(&["fetch", "search"])),
            ScriptedTurn::text("done"),
        ],
    );
    let run = s.run().await.unwrap();
    every_call_answered_once(&run);
    assert_eq!(s.search.calls().len() + s.fetch.calls().len(), 3);
    assert!(tool_results_by_id(&run.messages)[3]
        .1
        .starts_with("Tool call limit reached for tools"));
}

#[tokio::test]
async fn end_stops_the_run_before_any_call_of_the_batch_runs() {
    let s = setup(
        MiddlewareStack::new()
            .with(limit("run_limit = 1\nexit_behavior = \"end\""))
            .unwrap(),
        vec![
            ScriptedTurn::tool_calls(calls(&["search"])),
            ScriptedTurn::tool_calls(calls(&["fetch", "search"])),
            ScriptedTurn::text("never"),
        ],
    );
    let run = s.run().await.unwrap();
    assert_eq!(run.stop, StopReason::StoppedByMiddleware);
    assert!(
        run.final_text()
            .starts_with("Tool call limit reached for tools: at most 1 per run"),
        "{}",
        run.final_text()
    );
    every_call_answered_once(&run);
    assert_eq!(s.search.calls().len(), 1);
    assert_eq!(s.fetch.calls().len(), 0, "no call of the refused batch ran");
}

#[tokio::test]
async fn error_fails_the_run_with_limit_exceeded() {
    let s = setup(
        MiddlewareStack::new()
            .with(limit("run_limit = 1\nexit_behavior = \"error\""))
            .unwrap(),
        vec![ScriptedTurn::tool_calls(calls(&["search", "search"]))],
    );
    let err = s.run().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("limit `tool_call_limit` exceeded"), "{err}");
    assert_eq!(s.search.calls().len(), 0);
}

#[tokio::test]
async fn the_thread_limit_counts_across_runs_sharing_a_thread() {
    let mw = limit("tool_name = \"search\"\nthread_limit = 3");
    let handle = mw.clone();
    let stack = Arc::new(MiddlewareStack::new().with(mw).unwrap());
    let mut ran = 0;
    for (i, names) in [&["search", "search"][..], &["search", "search"][..]]
        .into_iter()
        .enumerate()
    {
        let s = setup(
            MiddlewareStack::new(),
            vec![ScriptedTurn::tool_calls(calls(names)), ScriptedTurn::text("done")],
        );
        let agent = s.agent.with_shared_stack(stack.clone());
        let run = agent
            .run(
                &mut RunContext::new(RunConfig::new(format!("r{i}")).with_thread("t"), ()),
                &(),
                "go",
            )
            .await
            .unwrap();
        every_call_answered_once(&run);
        ran += s.search.calls().len();
    }
    assert_eq!(ran, 3);
    assert_eq!(handle.thread_count("t"), 3);
}

#[tokio::test]
async fn concurrent_tool_calls_are_counted_in_the_models_order() {
    let s = setup(
        MiddlewareStack::new().with(limit("run_limit = 2")).unwrap(),
        vec![
            ScriptedTurn::tool_calls(calls(&["search", "search", "fetch", "fetch"])),
            ScriptedTurn::text("done"),
        ],
    );
    let agent = s.agent.with_concurrent_tools();
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    every_call_answered_once(&run);
    let r = tool_results_by_id(&run.messages);
    assert_eq!((r[0].1.as_str(), r[1].1.as_str()), ("found", "found"));
    assert!(r[2].1.starts_with("Tool call limit reached") && r[3].1.starts_with("Tool call limit reached"));
}

#[tokio::test]
async fn two_instances_cap_two_tools_separately() {
    let mut stack = MiddlewareStack::new();
    stack
        .add_named("search_limit", ToolCallLimitMiddleware::per_run(Some("search"), 1))
        .unwrap();
    stack
        .add_named("fetch_limit", ToolCallLimitMiddleware::per_run(Some("fetch"), 2))
        .unwrap();
    let s = setup(
        stack,
        vec![
            ScriptedTurn::tool_calls(calls(&["search", "search", "fetch", "fetch", "fetch"])),
            ScriptedTurn::text("done"),
        ],
    );
    let run = s.run().await.unwrap();
    every_call_answered_once(&run);
    assert_eq!((s.search.calls().len(), s.fetch.calls().len()), (1, 2));
}

#[test]
fn bad_configs_are_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<ToolCallLimitConfig>("thread_limit = 0").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: `thread_limit` = 0: must be in 1.."
    );
    let err = from_toml_str::<ToolCallLimitConfig>("tool_name = \"search\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "run_limit");
    let err = from_toml_str::<ToolCallLimitConfig>("run_limit = 1\ntool_name = \"\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "tool_name");
    let err = from_toml_str::<ToolCallLimitConfig>("run_limit = 1\nexit_behavior = \"ignore\"").unwrap_err();
    assert_eq!(err.errors()[0].rule, "must be one of \"continue\", \"end\", \"error\"");
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "tool_call_limit").unwrap();
    // the review counts; `before_tool` confirms a call started; `after_agent` gives back the rest
    assert_eq!(
        doc.hooks,
        [HookKind::AfterAgent, HookKind::OnToolBatch, HookKind::BeforeTool]
    );
}

/// A shared ledger: the thread's count lives there, and an `end` that stops a
/// batch gives back the calls of that batch it had counted (none of them ran).
#[tokio::test]
async fn a_shared_thread_count_gives_back_the_calls_of_a_batch_that_end_stops() {
    use tinyagents::store::{LedgerStore, MemoryLedger};
    let ledger = Arc::new(MemoryLedger::default());
    let ttl = std::time::Duration::from_secs(60);
    let mw = limit("thread_limit = 2\nexit_behavior = \"end\"").shared_thread_counts(ledger.clone(), ttl);
    let s = setup(
        MiddlewareStack::new().with(mw).unwrap(),
        vec![
            ScriptedTurn::tool_calls(calls(&["search"])),
            ScriptedTurn::tool_calls(calls(&["fetch", "search"])),
            ScriptedTurn::text("never"),
        ],
    );
    let run = s.run_in(RunConfig::new("r").with_thread("t")).await.unwrap();
    assert_eq!(run.stop, StopReason::StoppedByMiddleware);
    every_call_answered_once(&run);
    assert_eq!((s.search.calls().len(), s.fetch.calls().len()), (1, 0));
    let totals = ledger.totals("tool_calls:*:t").await.unwrap();
    assert_eq!(
        totals.spent + totals.held,
        1,
        "only the call that ran stays counted: {totals:?}"
    );
}

/// A shared ledger that cannot answer refuses the batch: no call runs.
#[tokio::test]
async fn a_shared_thread_count_that_cannot_answer_refuses_the_calls() {
    use tinyagents::store::{LedgerStore, LedgerTotals, Reservation};
    struct Down;
    #[async_trait::async_trait]
    impl LedgerStore for Down {
        async fn reserve(&self, _: &str, _: u64, _: u64, _: std::time::Duration) -> Result<Reservation> {
            Err(TinyAgentsError::middleware("ledger", "connection refused"))
        }
        async fn settle(&self, _: &str, _: u64, _: u64, _: std::time::Duration) -> Result<LedgerTotals> {
            Err(TinyAgentsError::middleware("ledger", "connection refused"))
        }
        async fn totals(&self, _: &str) -> Result<LedgerTotals> {
            Err(TinyAgentsError::middleware("ledger", "connection refused"))
        }
    }
    let mw = limit("thread_limit = 5").shared_thread_counts(Arc::new(Down), std::time::Duration::from_secs(60));
    let s = setup(
        MiddlewareStack::new().with(mw).unwrap(),
        vec![
            ScriptedTurn::tool_calls(calls(&["search"])),
            ScriptedTurn::text("never"),
        ],
    );
    let err = s.run_in(RunConfig::new("r").with_thread("t")).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Middleware);
    assert!(
        err.to_string().contains("tool_calls:*:t") && err.to_string().contains("shared_thread_counts"),
        "{err}"
    );
    assert_eq!(s.search.calls().len(), 0, "fails closed");
}

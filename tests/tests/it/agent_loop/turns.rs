//! The agent loop: tool refusals become error results, batches keep call
//! order (also when run concurrently), tool progress flows through delta
//! hooks, and sub-agent runs nest with depth and usage roll-up.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::agent::ToolErrorPolicy;
use tinyagents::harness::middleware::PreparedBatch;
use tinyagents::prelude::*;
use tinyagents::testing::{trace, CollectingSink, RecordingTool};

/// Refuses calls to `rm` in `before_tool`, as a policy middleware would.
struct NoRm;

#[async_trait]
impl Middleware<()> for NoRm {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_TOOL
    }
    async fn before_tool(&self, _: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
        if call.name == "rm" {
            return Err(TinyAgentsError::validation("`rm` is not allowed here"));
        }
        Ok(())
    }
}

fn two_calls() -> ScriptedTurn {
    ScriptedTurn::tool_calls(vec![
        ToolCall::new("1", "rm", json!({"path": "/"})),
        ToolCall::new("2", "ls", json!({})),
    ])
}

#[tokio::test]
async fn a_call_refused_by_policy_becomes_its_error_result_and_the_run_goes_on() {
    let (rm, ls) = (RecordingTool::new("rm"), RecordingTool::new("ls").returning("a b"));
    let model = Arc::new(ScriptedModel::new([two_calls(), ScriptedTurn::text("ok")]));
    let agent = Agent::from_shared(model.clone())
        .with_tools(ToolRegistry::new().with(rm.clone()).unwrap().with(ls.clone()).unwrap())
        .with_stack(MiddlewareStack::new().with(NoRm).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "clean up")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "ok");
    assert!(rm.calls().is_empty(), "the refused tool never ran");
    assert_eq!(ls.calls().len(), 1);
    // The model saw one result per call, in call order, the refusal explained.
    let second_request = &model.requests()[1];
    let tool_msgs: Vec<_> = second_request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .collect();
    assert_eq!(tool_msgs.len(), 2);
    assert_eq!(tool_msgs[0].tool_call_id.as_deref(), Some("1"));
    assert!(tool_msgs[0].text().contains("`rm` is not allowed here"));
    assert_eq!(tool_msgs[1].text(), "a b");
}

#[tokio::test]
async fn with_fail_run_policy_a_refusal_ends_the_run() {
    let agent = Agent::new(ScriptedModel::new([two_calls()]))
        .with_tools(
            ToolRegistry::new()
                .with(RecordingTool::new("rm"))
                .unwrap()
                .with(RecordingTool::new("ls"))
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(NoRm).unwrap())
        .with_tool_errors(ToolErrorPolicy::FailRun);
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "x")
        .await
        .unwrap_err();
    assert_eq!(err, TinyAgentsError::validation("`rm` is not allowed here"));
}

#[tokio::test]
async fn an_unknown_tool_and_a_failing_tool_become_error_results() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "nope", json!({})),
            ToolCall::new("2", "bad", json!({})),
        ]),
        ScriptedTurn::text("recovered"),
    ]));
    let agent = Agent::from_shared(model.clone()).with_tools(
        ToolRegistry::new()
            .with(RecordingTool::new("bad").failing("disk full"))
            .unwrap(),
    );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "x")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "recovered");
    let msgs = &model.requests()[1].messages;
    let tool_texts: Vec<String> = msgs
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect();
    assert!(
        tool_texts[0].contains("there is no tool named `nope`; the tools are: bad"),
        "{tool_texts:?}"
    );
    assert!(tool_texts[1].contains("disk full"), "{tool_texts:?}");
}

/// Logs every error shown to `on_error`; with `wraps`, it also wraps the
/// model and tool calls, passing them on unchanged.
struct SeesErrors {
    seen: Arc<std::sync::Mutex<Vec<String>>>,
    wraps: bool,
}

#[async_trait]
impl Middleware<()> for SeesErrors {
    fn hooks(&self) -> HookSet {
        if self.wraps {
            HookSet::ON_ERROR | HookSet::WRAP_MODEL | HookSet::WRAP_TOOL
        } else {
            HookSet::ON_ERROR
        }
    }
    async fn on_error(&self, _: &mut RunContext, _: &(), error: &TinyAgentsError) -> Result<()> {
        self.seen.lock().unwrap().push(format!("{}: {error}", error.kind()));
        Ok(())
    }
}

/// What a run of `turns` with a failing and an unknown tool showed: the
/// errors `on_error` saw, each tool message (call id, tool, text), and the
/// run's error, with or without pass-through wrap layers around the calls.
async fn failures_seen(
    turns: Vec<ScriptedTurn>,
    wraps: bool,
) -> (Vec<String>, Vec<(String, String, String)>, Option<String>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let model = Arc::new(ScriptedModel::new(turns));
    let mut stack = MiddlewareStack::empty();
    stack
        .add(SeesErrors {
            seen: seen.clone(),
            wraps,
        })
        .unwrap();
    assert_eq!(stack.has(HookKind::WrapTool), wraps);
    let agent = Agent::from_shared(model.clone())
        .with_tools(
            ToolRegistry::new()
                .with(RecordingTool::new("bad").failing("disk full"))
                .unwrap(),
        )
        .with_stack(stack);
    let run = agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "x").await;
    let tool_messages = model
        .requests()
        .last()
        .map(|r| {
            r.messages
                .iter()
                .filter(|m| m.role == Role::Tool)
                .map(|m| {
                    (
                        m.tool_call_id.clone().unwrap_or_default(),
                        m.name.clone().unwrap_or_default(),
                        m.text().into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let seen = seen.lock().unwrap().clone();
    (seen, tool_messages, run.err().map(|e| e.to_string()))
}

#[tokio::test]
async fn failed_calls_are_answered_and_shown_to_on_error_alike_with_and_without_a_wrap_layer() {
    // Without a wrap layer the loop runs the model and the tool calls in
    // place (no onion); what the run shows must be what the onion shows.
    let tools_fail = || {
        vec![
            ScriptedTurn::tool_calls(vec![
                ToolCall::new("1", "nope", json!({})),
                ToolCall::new("2", "bad", json!({})),
            ]),
            ScriptedTurn::text("recovered"),
        ]
    };
    let bare = failures_seen(tools_fail(), false).await;
    assert_eq!(bare, failures_seen(tools_fail(), true).await);
    let (seen, answers, error) = bare;
    assert_eq!(error, None);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen[0].starts_with("tool: ") && seen[0].contains("no tool named `nope`"),
        "{seen:?}"
    );
    assert!(
        seen[1].starts_with("tool: ") && seen[1].contains("disk full"),
        "{seen:?}"
    );
    assert_eq!(answers.len(), 2);
    assert_eq!((answers[0].0.as_str(), answers[0].1.as_str()), ("1", "nope"));
    assert!(answers[0]
        .2
        .contains("there is no tool named `nope`; the tools are: bad"));
    assert_eq!((answers[1].0.as_str(), answers[1].1.as_str()), ("2", "bad"));
    assert!(answers[1].2.contains("disk full"));

    let model_fails = || {
        vec![ScriptedTurn::Fail(TinyAgentsError::model(
            "the provider is down",
            false,
        ))]
    };
    let bare = failures_seen(model_fails(), false).await;
    assert_eq!(bare, failures_seen(model_fails(), true).await);
    let (seen, _, error) = bare;
    assert!(error.is_some_and(|e| e.contains("the provider is down")));
    assert_eq!(seen.len(), 1, "the model's error is shown to on_error once: {seen:?}");
    assert!(
        seen[0].starts_with("model: ") && seen[0].contains("the provider is down"),
        "{seen:?}"
    );
}

/// Rejects every second call of a batch in the batch review.
struct RejectOdd;

#[async_trait]
impl Middleware<()> for RejectOdd {
    fn hooks(&self) -> HookSet {
        HookSet::ON_TOOL_BATCH
    }
    async fn on_tool_batch(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        for i in (1..batch.len()).step_by(2) {
            batch.reject(i, "rejected by review");
        }
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn concurrent_batches_keep_call_order_and_give_every_call_one_result() {
    // Tools finish in reverse order of their calls.
    let slow = |name: &'static str, ms: u64| {
        tool_fn(name, "sleeps", move |_cx, _| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(format!("{name} done").into())
        })
    };
    let tools = ToolRegistry::new()
        .with(slow("a", 30))
        .unwrap()
        .with(slow("b", 20))
        .unwrap()
        .with(slow("c", 10))
        .unwrap()
        .with(slow("d", 5))
        .unwrap();
    let calls = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, n)| ToolCall::new(i.to_string(), *n, json!({})))
        .collect();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(calls),
        ScriptedTurn::text("fin"),
    ]));
    let agent = Agent::from_shared(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(RejectOdd).unwrap())
        .with_concurrent_tools();
    let start = tokio::time::Instant::now();
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "x")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "fin");
    // a and c ran concurrently: the batch took as long as the slowest, not the sum
    assert_eq!(start.elapsed(), Duration::from_millis(30));
    let results: Vec<(String, String)> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.clone().unwrap(), m.text().into_owned()))
        .collect();
    assert_eq!(
        results,
        [
            ("0".to_owned(), "a done".to_owned()),
            ("1".to_owned(), "rejected by review".to_owned()),
            ("2".to_owned(), "c done".to_owned()),
            ("3".to_owned(), "rejected by review".to_owned()),
        ]
    );
    assert_eq!(run.counters.tool_calls, 2, "counters of concurrent branches merge back");
}

/// Redacts the word "token" from tool progress.
struct RedactProgress;

#[async_trait]
impl Middleware<()> for RedactProgress {
    fn hooks(&self) -> HookSet {
        HookSet::ON_TOOL_DELTA
    }
    async fn on_tool_delta(&self, _: &mut RunContext, _: &(), delta: &mut ToolDelta) -> Result<()> {
        delta.content = delta.content.replace("token", "[redacted]");
        Ok(())
    }
}

#[tokio::test]
async fn tool_progress_flows_through_delta_hooks_to_the_sink() {
    let tool = RecordingTool::new("fetch")
        .with_progress(["using token abc", "50%"])
        .returning("done");
    let agent = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("fetch", json!({})),
        ScriptedTurn::text("ok"),
    ]))
    .with_tools(ToolRegistry::new().with(tool).unwrap())
    .with_stack(MiddlewareStack::new().with(RedactProgress).unwrap());
    let sink = Arc::new(CollectingSink::new());
    agent
        .run(
            &mut RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone()),
            &(),
            "x",
        )
        .await
        .unwrap();
    let deltas: Vec<String> = trace(&sink.events())
        .into_iter()
        .filter(|l| l.starts_with("tool_delta"))
        .collect();
    assert_eq!(deltas, ["tool_delta \"using [redacted] abc\"", "tool_delta \"50%\""]);
}

#[tokio::test]
async fn a_sub_agent_runs_as_a_tool_one_level_deeper_under_the_same_stack_with_usage_rolled_up() {
    let log = tinyagents_tests::Log::default();
    let stack = Arc::new(
        MiddlewareStack::new()
            .with(tinyagents_tests::Recorder::new("obs", &log).only(HookSet::BEFORE_AGENT | HookSet::AFTER_AGENT))
            .unwrap(),
    );
    let child_model = ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text("child says hi").with_usage(Usage::new(7, 3)),
    )]);
    let child = Arc::new(Agent::new(child_model).with_shared_stack(stack.clone()));
    let parent_model = ScriptedModel::new([
        ScriptedTurn::Reply(
            ModelResponse::tool_calls(vec![ToolCall::new("k1", "helper", json!({"input": "say hi"}))])
                .with_usage(Usage::new(10, 5)),
        ),
        ScriptedTurn::Reply(ModelResponse::text("parent done").with_usage(Usage::new(20, 2))),
    ]);
    let tools = ToolRegistry::new()
        .with(AgentTool::new(child, "helper", "A helper agent.", || ((), ())))
        .unwrap();
    let parent = Agent::new(parent_model).with_tools(tools).with_shared_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("p"), ()).with_sink(sink.clone());
    let run = parent.run(&mut ctx, &(), "delegate").await.unwrap();

    assert_eq!(run.final_text(), "parent done");
    assert_eq!(run.usage, Usage::new(37, 10), "the child's 7+3 rolled up into 30+7");
    // the same stack bracketed the nested run
    assert_eq!(
        log.lines(),
        [
            "obs:before_agent",
            "obs:before_agent",
            "obs:after_agent",
            "obs:after_agent"
        ]
    );
    let started: Vec<_> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::RunStarted {
                run_id,
                parent_run_id,
                depth,
            } => Some((run_id.to_string(), parent_run_id.map(|p| p.to_string()), depth)),
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        [("p".to_owned(), None, 0), ("p/k1".to_owned(), Some("p".to_owned()), 1)]
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_run_drops_a_stalled_model_stream_at_once() {
    // A model whose stream sends one delta, then stalls forever.
    struct Stalls;
    #[async_trait]
    impl ChatModel for Stalls {
        fn id(&self) -> &str {
            "stalls"
        }
        async fn stream(&self, _: &ModelRequest) -> Result<tinyagents::harness::model::ModelStream> {
            use futures::StreamExt;
            let first = futures::stream::iter([Ok(ModelDelta::text("thinking…"))]);
            Ok(first.chain(futures::stream::pending()).boxed())
        }
    }
    ends_when_cancelled_after_five_seconds(Agent::new(Stalls)).await;
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_run_drops_a_model_call_that_never_starts_its_stream_at_once() {
    // A model whose call never answers: no stream, not even headers.
    struct NeverAnswers;
    #[async_trait]
    impl ChatModel for NeverAnswers {
        fn id(&self) -> &str {
            "never-answers"
        }
        async fn stream(&self, _: &ModelRequest) -> Result<tinyagents::harness::model::ModelStream> {
            std::future::pending().await
        }
    }
    ends_when_cancelled_after_five_seconds(Agent::new(NeverAnswers)).await;
}

/// Runs `agent` under a token cancelled after five (paused-clock) seconds:
/// the run must end `Cancelled` then, not at some idle timeout.
async fn ends_when_cancelled_after_five_seconds(agent: Agent<()>) {
    let token = tokio_util_token();
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_cancellation(token.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        token.cancel();
    });
    let start = tokio::time::Instant::now();
    // bounded, so a run that never ends fails here (the paused clock jumps to it)
    let err = tokio::time::timeout(Duration::from_secs(60), agent.run(&mut ctx, &(), "go"))
        .await
        .expect("the run ends when cancelled")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(5),
        "dropped when cancelled, not at some idle timeout"
    );
    canceller.await.unwrap();
}

#[tokio::test]
async fn a_cancelled_run_takes_no_more_deltas_from_a_stream_that_never_waits() {
    // A scripted turn of a thousand deltas: its stream always has one ready,
    // so the loop never waits on it and only a check per delta can see the
    // cancellation (a loop that missed it ends and fails here, not hangs).
    let endless = ScriptedModel::new([ScriptedTurn::Deltas(vec![ModelDelta::text("x"); 1000])]);
    /// Cancels the run at its third delta.
    struct CancelAtThird(Arc<std::sync::atomic::AtomicUsize>);
    #[middleware(name = "cancel_at_third")]
    impl CancelAtThird {
        #[on_model_delta]
        fn delta(&self, ctx: &mut RunContext, _delta: &mut ModelDelta) -> Result<()> {
            if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == 3 {
                ctx.flow().cancellation().cancel();
            }
            Ok(())
        }
    }
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut stack = MiddlewareStack::empty();
    stack.add(CancelAtThird(seen.clone())).unwrap();
    let agent: Agent<()> = Agent::new(endless).with_stack(stack);
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_cancellation(tokio_util_token());
    let err = agent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
    assert_eq!(
        seen.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "no delta is taken after the one whose hook cancelled the run"
    );
}

fn tokio_util_token() -> tinyagents::harness::context::CancellationToken {
    tinyagents::harness::context::CancellationToken::new()
}

/// Writes the file named by `path` after `ms` milliseconds, logging the order.
struct SlowWrite {
    schema: ToolSchema,
    log: Arc<std::sync::Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for SlowWrite {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }
    fn file_access(&self, arguments: &serde_json::Value) -> Vec<tinyagents::harness::tool::FileAccess> {
        vec![tinyagents::harness::tool::FileAccess {
            path: arguments["path"].as_str().unwrap_or_default().to_owned(),
            mode: tinyagents::harness::tool::FileAccessMode::Write,
        }]
    }
    async fn call(
        &self,
        _cx: tinyagents::harness::tool::ToolContext,
        args: serde_json::Value,
    ) -> Result<tinyagents::harness::tool::ToolOutput> {
        tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
        self.log
            .lock()
            .unwrap()
            .push(args["path"].as_str().unwrap_or_default().to_owned());
        Ok("written".into())
    }
}

#[tokio::test(start_paused = true)]
async fn writes_to_one_file_under_different_spellings_keep_the_models_order() {
    let log: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let tool = SlowWrite {
        schema: ToolSchema::new("write", "writes"),
        log: log.clone(),
    };
    let calls = vec![
        ToolCall::new("1", "write", json!({"path": "./src/a.rs", "ms": 50})),
        ToolCall::new("2", "write", json!({"path": "src/b.rs", "ms": 0})),
        ToolCall::new("3", "write", json!({"path": "src/../src/a.rs", "ms": 0})),
    ];
    let agent = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(calls),
        ScriptedTurn::text("ok"),
    ]))
    .with_tools(ToolRegistry::new().with(tool).unwrap())
    .with_concurrent_tools();
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(*log.lock().unwrap(), ["src/b.rs", "./src/a.rs", "src/../src/a.rs"]);
}

/// Rewrites every request's messages every way a middleware can: an item
/// replaced, one appended, the list cut, changed in place through
/// `iter_mut`, and the whole list replaced.
struct Rewriter;

#[async_trait]
impl Middleware<()> for Rewriter {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL
    }
    async fn before_model(&self, _: &mut RunContext, _: &(), request: &mut ModelRequest) -> Result<()> {
        request.messages[0] = Message::user("replaced");
        request.messages.push(Message::user("appended"));
        for m in &mut request.messages {
            m.set_text("rewritten in place");
        }
        request.messages.truncate(1);
        let mut other = request.clone();
        other.messages = vec![Message::user("a whole new list")].into();
        Ok(())
    }
}

/// A request shares the run's history (one reference count, not a copy):
/// whatever a middleware does to the request's messages, the history, the
/// next request and the transcript handed back keep what the run said.
#[tokio::test]
async fn what_a_middleware_does_to_a_request_never_reaches_the_history() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let model = {
        let seen = seen.clone();
        ScriptedModel::from_fn(move |req| {
            seen.lock()
                .unwrap()
                .push(req.messages.iter().map(|m| m.text().into_owned()).collect::<Vec<_>>());
            if req.messages.len() == 1 && seen.lock().unwrap().len() == 1 {
                ScriptedTurn::tool_call("ls", json!({}))
            } else {
                ScriptedTurn::text("done")
            }
        })
    };
    let ls = RecordingTool::new("ls").returning("a b");
    let agent = Agent::new(model)
        .with_tools(ToolRegistry::new().with(ls).unwrap())
        .with_stack(MiddlewareStack::new().with(Rewriter).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hello")
        .await
        .unwrap();
    // the model saw the rewritten request each time
    assert_eq!(*seen.lock().unwrap(), vec![vec!["rewritten in place".to_owned()]; 2]);
    // and the history is what was said
    let texts: Vec<String> = run.messages.iter().map(|m| m.text().into_owned()).collect();
    assert_eq!(texts[0], "hello");
    assert_eq!(texts[2], "a b");
    assert_eq!(texts.last().map(String::as_str), Some("done"));
    assert_eq!(run.messages.len(), 4, "{texts:?}");
    assert!(texts
        .iter()
        .all(|t| !t.contains("rewritten") && !t.contains("replaced") && !t.contains("appended")));
}

//! Red team, sixth pass: retries and fallbacks against guards and limits;
//! each test failed on the code it was found in.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::FinishReason;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::{assert_valid_transcript, CollectingSink};

use crate::support::{approve_delete_and_resume, tool_texts};

fn limits(toml: &str) -> LimitsMiddleware {
    from_toml_str::<LimitsConfig>(toml).unwrap().build()
}

fn tool_retry(toml: &str) -> ToolRetryMiddleware {
    from_toml_str::<ToolRetryConfig>(toml).unwrap().build()
}

/// A tool failing with a retryable `RateLimited` for its first `fails` calls, then "ok".
fn flaky(name: &'static str, fails: u32, calls: Arc<AtomicU32>) -> impl Tool {
    tool_fn(name, "Flaky.", move |_cx, _args| {
        let calls = calls.clone();
        async move {
            if calls.fetch_add(1, Ordering::SeqCst) < fails {
                Err(TinyAgentsError::rate_limited("busy", None))
            } else {
                Ok("ok".into())
            }
        }
    })
}

// ----- A. limits.max_steps counts a sub-agent's tool retries as tool calls -----

/// docs/middleware.md, `limits`: "Caps tool calls per session (`max_steps`)";
/// docs/security.md: "the runtime counts each of its tool calls in its
/// parent's count"; `tool_retry`: "`ToolCallStarted`/`ToolCallCompleted` stay
/// one pair per call: the retries happen inside the call". A sub-agent with a
/// `tool_retry` of its own makes ONE call to a tool that fails once and then
/// succeeds. With the delegation that is two tool calls, within
/// `max_steps = 2`; the child's call must succeed.
#[tokio::test(start_paused = true)]
async fn a_sub_agent_s_retried_call_is_counted_once_by_the_parent_s_max_steps() {
    for thread in [Some("s6"), None] {
        let calls = Arc::new(AtomicU32::new(0));
        let child_model = Arc::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new("k1", "fetch", json!({}))]),
            ScriptedTurn::text("child done"),
        ]));
        let child = Agent::new(child_model.clone())
            .with_tools(ToolRegistry::new().with(flaky("fetch", 1, calls.clone())).unwrap())
            .with_stack(
                MiddlewareStack::new()
                    .with(tool_retry("initial_delay_ms = 10\njitter = 0.0"))
                    .unwrap(),
            );
        let parent = delegating_parent(child);
        let config = match thread {
            Some(t) => RunConfig::new("p").with_thread(t),
            None => RunConfig::new("p"),
        };
        let mut ctx = RunContext::new(config, ());
        let run = parent.run(&mut ctx, &(), "delegate").await;
        let child_saw = tool_texts(&child_model.requests()[1].messages);
        assert_eq!(
            (calls.load(Ordering::SeqCst), child_saw.clone()),
            (2, vec!["ok".to_string()]),
            "one delegation + one (retried) child call under max_steps = 2 (thread {thread:?}); run: {:?}",
            run.map(|r| r.messages.len())
        );
    }
}

// ----- B. pii x model_retry: a failed attempt cut by the output limit leaks into the retry's reply -----

fn model_retry(toml: &str) -> ModelRetryMiddleware {
    from_toml_str::<ModelRetryConfig>(toml).unwrap().build()
}

/// docs/middleware.md, `pii`, Retries and fallbacks: "Per-attempt stream
/// buffers are reset when a new attempt starts, so a failed attempt's
/// held-back text never leaks into the next". `model_retry`: "deltas of a
/// failed attempt ... `AttemptDiscarded` tells a client to drop them".
/// Attempt 1 streams a draft, its finish delta says `length`, then the
/// connection fails (retryable). The retry answers "final answer". The draft
/// pii held back must not become part of the reply (nor reach the sink as
/// the retry's text).
#[tokio::test(start_paused = true)]
async fn a_failed_attempt_cut_by_the_output_limit_does_not_leak_into_the_retry() {
    let mut seen = Vec::new();
    for pii_outside in [true, false] {
        let model = ScriptedModel::new([
            ScriptedTurn::FailAfter(
                vec![
                    ModelDelta::text("DRAFT-FROM-THE-FAILED-ATTEMPT "),
                    ModelDelta::finish(FinishReason::Length),
                ],
                TinyAgentsError::model("connection reset", true),
            ),
            ScriptedTurn::text("final answer"),
        ]);
        let retry = model_retry("initial_delay_ms = 10\njitter = 0.0");
        let pii = PiiMiddleware::new(PiiStrategy::Redact);
        let stack = if pii_outside {
            MiddlewareStack::new().with(pii).unwrap().with(retry).unwrap()
        } else {
            MiddlewareStack::new().with(retry).unwrap().with(pii).unwrap()
        };
        let agent: Agent<()> = Agent::new(model).with_stack(stack);
        let sink = Arc::new(CollectingSink::new());
        let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
        let run = agent.run(&mut ctx, &(), "go").await.unwrap();
        let second_attempt_text: String = sink
            .events()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ModelDelta { attempt, delta, .. } if *attempt >= 2 => delta.as_text().map(str::to_owned),
                _ => None,
            })
            .collect();
        seen.push((pii_outside, run.final_text().to_string(), second_attempt_text));
    }
    for (pii_outside, reply, streamed) in &seen {
        assert_eq!(
            (reply.as_str(), streamed.contains("DRAFT")),
            ("final answer", false),
            "pii outside retry: {pii_outside}; streamed as attempt 2: {streamed:?}; all: {seen:?}"
        );
    }
}

// ----- C. human_in_the_loop x tool_retry: one approval runs the approved call several times -----

/// docs/security.md, "Human approval: bound to the call shown, used once";
/// docs/scale-out.md: "a run paused for approval ... is decided and resumed
/// ..., the approved call runs exactly once". README: "each decision is bound
/// to the exact call shown and used once". With the default `tool_retry`
/// (every tool, 3 attempts) in the stack, a person approves one `delete`;
/// the tool performs its side effect and then fails with a retryable error
/// (here a `timeout` that cut it off after the work was done). The approval
/// must not be spent three times.
#[tokio::test(start_paused = true)]
async fn one_approval_runs_the_approved_call_once_under_tool_retry() {
    let executions = Arc::new(AtomicU32::new(0));
    let counter = executions.clone();
    let delete = tool_fn("delete", "Deletes a file.", move |_cx, _args| {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst); // the side effect happens
            std::future::pending::<()>().await; // then the reply never comes
            Ok("deleted".into())
        }
    });
    let timeout = from_toml_str::<TimeoutConfig>("tool_ms = 1000").unwrap().build();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("delete", json!({"path": "a.txt"})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
            .unwrap()
            .with(tool_retry("initial_delay_ms = 10\njitter = 0.0"))
            .unwrap()
            .with(timeout)
            .unwrap(),
    );
    let run = approve_delete_and_resume(&agent, || assert_eq!(executions.load(Ordering::SeqCst), 0)).await;
    assert_valid_transcript(&run.messages);
    assert_eq!(
        executions.load(Ordering::SeqCst),
        1,
        "one approval of one call ran the tool {} times",
        executions.load(Ordering::SeqCst)
    );
}

/// The sibling the fix must not open: a sub-agent's model that reuses one
/// call id in two turns makes two calls, and both count against the
/// parent's `max_steps` (only a retry inside one call is the same call).
/// A parent limited to two steps whose model delegates "work" to `child`
/// (as the tool `helper`) once, then says "all done".
fn delegating_parent(child: Agent<()>) -> Agent<()> {
    let helper = AgentTool::new(Arc::new(child), "helper", "Helps.", || ((), ()));
    Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("d0", "helper", json!({"input": "work"}))]),
        ScriptedTurn::text("all done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(limits("max_steps = 2")).unwrap())
}

#[tokio::test]
async fn a_sub_agent_reusing_a_call_id_in_two_turns_is_counted_twice() {
    let calls = Arc::new(AtomicU32::new(0));
    let child = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("same", "fetch", json!({}))]),
        ScriptedTurn::tool_calls(vec![ToolCall::new("same", "fetch", json!({}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(flaky("fetch", 0, calls.clone())).unwrap());
    let parent = delegating_parent(child);
    let mut ctx = RunContext::new(RunConfig::new("p"), ());
    let _ = parent.run(&mut ctx, &(), "delegate").await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "max_steps = 2: the delegation and one child call; the second call under the same id must be refused"
    );
}

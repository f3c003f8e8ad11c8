//! `AgentEvent` as JSON: the stable shape `tinyagents run --json` prints and
//! `docs/events.md` documents. Each kind's field names are pinned here, so a
//! renamed or dropped field fails this test (adding one means adding it here
//! and in the docs).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tinyagents::harness::error::ErrorKind;
use tinyagents::harness::event::{CollectingSink, EventKind, EventMask, HookOutcome, RequestDelta};
use tinyagents::harness::middleware::HookKind;
use tinyagents::harness::model::FinishReason;
use tinyagents::harness::tool::ToolDelta;
use tinyagents::prelude::*;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("an event serializes to an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn every_kind_has_a_type_tag_and_its_documented_fields() {
    let run: Arc<str> = Arc::from("run-1");
    let cases: Vec<(AgentEvent, &str, &[&str])> = vec![
        (
            AgentEvent::RunStarted {
                run_id: run.clone(),
                parent_run_id: None,
                depth: 0,
            },
            "run_started",
            &["run_id", "parent_run_id", "depth"],
        ),
        (
            AgentEvent::RunCompleted {
                run_id: run.clone(),
                error: Some(ErrorKind::Model),
            },
            "run_completed",
            &["run_id", "error"],
        ),
        (
            AgentEvent::MiddlewareStarted {
                run_id: run.clone(),
                middleware: Arc::from("pii"),
                hook: HookKind::BeforeModel,
            },
            "middleware_started",
            &["run_id", "middleware", "hook"],
        ),
        (
            AgentEvent::MiddlewareCompleted {
                run_id: run.clone(),
                middleware: Arc::from("pii"),
                hook: HookKind::BeforeModel,
                outcome: HookOutcome::Ok,
            },
            "middleware_completed",
            &["run_id", "middleware", "hook", "outcome"],
        ),
        (
            AgentEvent::ModelCallStarted {
                run_id: run.clone(),
                step: 1,
                attempt: 1,
                model: Arc::from("openai:gpt-4o"),
            },
            "model_call_started",
            &["run_id", "step", "attempt", "model"],
        ),
        (
            AgentEvent::ModelDelta {
                run_id: run.clone(),
                attempt: 1,
                delta: ModelDelta::text("hi"),
            },
            "model_delta",
            &["run_id", "attempt", "delta"],
        ),
        (
            AgentEvent::ModelCallCompleted {
                run_id: run.clone(),
                step: 1,
                attempt: 1,
                usage: Usage::new(3, 4),
                usage_reported: true,
                finish_reason: Some(FinishReason::Stop),
                error: None,
            },
            "model_call_completed",
            &[
                "run_id",
                "step",
                "attempt",
                "usage",
                "usage_reported",
                "finish_reason",
                "error",
            ],
        ),
        (
            AgentEvent::ModelRequest {
                run_id: run.clone(),
                step: 1,
                attempt: 1,
                request: Box::new(RequestDelta {
                    kept: 0,
                    messages: vec![Message::user("hi")],
                    system: None,
                    tools: None,
                    params: Default::default(),
                    response_format: None,
                    tool_choice: None,
                }),
            },
            "model_request",
            &["run_id", "step", "attempt", "request"],
        ),
        (
            AgentEvent::AttemptDiscarded {
                run_id: run.clone(),
                attempt: 1,
                reason: Cow::Borrowed("retried"),
            },
            "attempt_discarded",
            &["run_id", "attempt", "reason"],
        ),
        (
            AgentEvent::DeltaSuppressed {
                middleware: Arc::from("pii"),
                hook: HookKind::OnModelDelta,
            },
            "delta_suppressed",
            &["middleware", "hook"],
        ),
        (
            AgentEvent::ToolCallStarted {
                run_id: run.clone(),
                call_id: "c1".into(),
                tool: "search".into(),
                arguments: json!({"q": "rust"}),
            },
            "tool_call_started",
            &["run_id", "call_id", "tool", "arguments"],
        ),
        (
            AgentEvent::ToolCallRefused {
                run_id: run.clone(),
                call_id: "c1".into(),
                tool: "search".into(),
                reason: "denied".into(),
            },
            "tool_call_refused",
            &["run_id", "call_id", "tool", "reason"],
        ),
        (
            AgentEvent::ToolDelta {
                run_id: run.clone(),
                delta: ToolDelta::new("c1", "50%"),
            },
            "tool_delta",
            &["run_id", "delta"],
        ),
        (
            AgentEvent::ToolCallCompleted {
                run_id: run.clone(),
                call_id: "c1".into(),
                tool: "search".into(),
                is_error: false,
                content: "3 hits".into(),
            },
            "tool_call_completed",
            &["run_id", "call_id", "tool", "is_error", "content"],
        ),
        (
            AgentEvent::ControlApplied {
                control: "jump_to_end",
                detail: "by x".into(),
            },
            "control_applied",
            &["control", "detail"],
        ),
        (
            AgentEvent::StateUpdated {
                key: "k".into(),
                by: None,
                value: json!(1),
            },
            "state_updated",
            &["key", "by", "value"],
        ),
        (
            AgentEvent::Steering {
                run_id: run.clone(),
                command_id: "s1".into(),
                action: "pause",
                decision: "accept",
                transformed: false,
            },
            "steering",
            &["run_id", "command_id", "action", "decision", "transformed"],
        ),
        (
            AgentEvent::ToolsFiltered {
                by: "allowlist".into(),
                excluded: vec!["shell".into()],
                remaining: vec![],
            },
            "tools_filtered",
            &["by", "excluded", "remaining"],
        ),
        (
            AgentEvent::Notice {
                source: Cow::Borrowed("limits"),
                message: "m".into(),
                is_error: false,
            },
            "notice",
            &["source", "message", "is_error"],
        ),
        (
            AgentEvent::Retry {
                run_id: run.clone(),
                target: "model",
                attempt: 1,
                max_attempts: 3,
                delay: Duration::from_millis(1500),
                error: ErrorKind::RateLimited,
            },
            "retry",
            &["run_id", "target", "attempt", "max_attempts", "delay_ms", "error"],
        ),
        (
            AgentEvent::Fallback {
                run_id: run.clone(),
                from: Arc::from("a"),
                to: Arc::from("b"),
                error: ErrorKind::Model,
            },
            "fallback",
            &["run_id", "from", "to", "error"],
        ),
        (
            AgentEvent::RateLimited {
                run_id: run.clone(),
                key: "global".into(),
                waited: Duration::from_secs(2),
                rejected: false,
            },
            "rate_limited",
            &["run_id", "key", "waited_ms", "rejected"],
        ),
        (
            AgentEvent::OutputLimitRecovery {
                run_id: run.clone(),
                turn: 1,
                attempt: 1,
                action: "escalate",
                cap_before: 1,
                cap_after: 2,
                thinking_only: false,
                discarded_message_id: None,
            },
            "output_limit_recovery",
            &[
                "run_id",
                "turn",
                "attempt",
                "action",
                "cap_before",
                "cap_after",
                "thinking_only",
                "discarded_message_id",
            ],
        ),
        (
            AgentEvent::Custom {
                middleware: Cow::Borrowed("mine"),
                name: Cow::Borrowed("tick"),
                data: json!({"n": 1}),
            },
            "custom",
            &["middleware", "name", "data"],
        ),
    ];
    for (event, tag, fields) in cases {
        let v = serde_json::to_value(&event).unwrap();
        assert_eq!(v["type"], tag, "{v}");
        let mut expected = set(fields);
        expected.insert("type".into());
        assert_eq!(keys(&v), expected, "the fields of `{tag}`");
        // The kind's own name is the type tag (a recorded run is read back by it).
        let kind: tinyagents::harness::event::EventKind = serde_json::from_value(v["type"].clone()).unwrap();
        assert_eq!(kind, event.kind(), "{tag}");
        assert_eq!(serde_json::to_value(kind).unwrap(), tag);
    }
}

#[test]
fn nested_values_have_their_documented_forms() {
    let retry = serde_json::to_value(AgentEvent::Retry {
        run_id: Arc::from("r"),
        target: "model",
        attempt: 2,
        max_attempts: 3,
        delay: Duration::from_millis(1500),
        error: ErrorKind::RateLimited,
    })
    .unwrap();
    assert_eq!(retry["delay_ms"], 1500, "durations are whole milliseconds");
    assert_eq!(retry["error"], "rate_limited");

    let done = |outcome| {
        serde_json::to_value(AgentEvent::MiddlewareCompleted {
            run_id: Arc::from("r"),
            middleware: Arc::from("m"),
            hook: HookKind::WrapTool,
            outcome,
        })
        .unwrap()
    };
    assert_eq!(done(HookOutcome::Ok)["outcome"], json!({"status": "ok"}));
    assert_eq!(done(HookOutcome::Ok)["hook"], "wrap_tool");
    assert_eq!(
        done(HookOutcome::Error(ErrorKind::Validation))["outcome"],
        json!({"status": "error", "error": "validation"})
    );
    assert_eq!(done(HookOutcome::Panicked)["outcome"], json!({"status": "panicked"}));
    assert_eq!(done(HookOutcome::Cancelled)["outcome"], json!({"status": "cancelled"}));

    let delta = serde_json::to_value(AgentEvent::ModelDelta {
        run_id: Arc::from("r"),
        attempt: 1,
        delta: ModelDelta::text("hi"),
    })
    .unwrap();
    assert_eq!(delta["delta"], json!({"content": {"type": "text", "text": "hi"}}));

    let completed = serde_json::to_value(AgentEvent::ModelCallCompleted {
        run_id: Arc::from("r"),
        step: 1,
        attempt: 1,
        usage: Usage::new(3, 4),
        usage_reported: true,
        finish_reason: Some(FinishReason::ToolCalls),
        error: None,
    })
    .unwrap();
    assert_eq!(completed["finish_reason"], "tool_calls");
    assert_eq!(completed["usage"]["input_tokens"], 3);
    assert_eq!(completed["usage"]["output_tokens"], 4);
    assert_eq!(completed["error"], Value::Null);
}

/// Every event of a real run (tool call, streamed text, hooks) serializes,
/// each one line of JSON with a `type` and a `run_id` where the kind has one.
#[tokio::test]
async fn a_real_runs_events_serialize_as_json_lines() {
    let tools = ToolRegistry::new()
        .with(tool_fn(
            "search",
            "Searches.",
            |_cx, _a| async move { Ok("found".into()) },
        ))
        .unwrap();
    let agent: Agent<()> = Agent::new(ScriptedModel::new(vec![
        ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
            "c1",
            "search",
            json!({"q": "x"}),
        )])),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(tools);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("run-json"), ()).with_sink(sink.clone());
    agent.run(&mut ctx, &(), "go").await.unwrap();
    let events = sink.events();
    assert!(events.len() >= 6, "{events:?}");
    let mut tags = Vec::new();
    for e in &events {
        let line = serde_json::to_string(e).unwrap();
        assert!(!line.contains('\n'), "one line per event: {line}");
        let v: Value = serde_json::from_str(&line).unwrap();
        let tag = v["type"].as_str().expect("a type tag").to_owned();
        if let Some(id) = v.get("run_id") {
            assert_eq!(id, "run-json", "{line}");
        }
        tags.push(tag);
    }
    for expected in [
        "run_started",
        "model_call_started",
        "model_call_completed",
        "tool_call_started",
        "tool_call_completed",
        "run_completed",
    ] {
        assert!(tags.iter().any(|t| t == expected), "`{expected}` in {tags:?}");
    }
    // the request the model received is opt-in: a sink wanting ALL does not get it
    assert!(!tags.iter().any(|t| t == "model_request"), "{tags:?}");
}

/// A sink that names `ModelRequest` gets each request as a delta: the
/// second keeps the first's messages and repeats neither system prompt nor tools.
#[tokio::test]
async fn model_requests_go_only_to_a_sink_that_opts_in_as_deltas() {
    assert!(!EventMask::ALL.contains(EventKind::ModelRequest));
    assert!(!EventMask::except([EventKind::ModelDelta]).contains(EventKind::ModelRequest));
    let agent: Agent<()> = Agent::new(ScriptedModel::new(vec![
        ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
            "c1",
            "search",
            json!({}),
        )])),
        ScriptedTurn::text("done"),
        ScriptedTurn::text("again"),
    ]))
    .with_tools(
        ToolRegistry::new()
            .with(tool_fn(
                "search",
                "Searches.",
                |_cx, _a| async move { Ok("found".into()) },
            ))
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::with_mask(EventMask::ALL.with(EventKind::ModelRequest)));
    let mut ctx = RunContext::new(RunConfig::new("run-req"), ()).with_sink(sink.clone());
    agent.run(&mut ctx, &(), "go").await.unwrap();
    // a second run on the same context: its first request is whole again
    agent.run(&mut ctx, &(), "go on").await.unwrap();
    let deltas: Vec<RequestDelta> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::ModelRequest { request, .. } => Some(*request),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.len(), 3);
    assert_eq!((deltas[0].kept, deltas[0].messages.len()), (0, 1));
    assert_eq!(deltas[2].kept, 0, "a run's first request keeps nothing");
    assert!(deltas[2].tools.is_some() && deltas[2].system.is_some());
    assert_eq!(deltas[0].tools.as_ref().map(|t| t.len()), Some(1));
    assert_eq!(deltas[1].kept, 1, "the prompt is not sent again");
    assert_eq!(deltas[1].messages.len(), 2, "the reply and the tool result");
    assert!(deltas[1].system.is_none() && deltas[1].tools.is_none());
}

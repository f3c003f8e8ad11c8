//! `prompt_cache_guard`: a volatile-only middleware keeps the prefix
//! fingerprint; a prefix-editing one changes it and is named in the event; the
//! agent's own changes are attributed to `agent`; `on_change = "error"` fails.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::cache::CacheLayoutEvent;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// Writes a new timestamp into the volatile tail every call.
#[before_model(name = "clock")]
fn clock(ctx: &mut RunContext, request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("now", format!("call {}", ctx.counters().steps));
    Ok(())
}

/// Adds the same stable segment every call: it edits the prefix, but identically.
#[before_model(name = "persona")]
fn persona(request: &mut ModelRequest) -> Result<()> {
    request
        .system
        .insert(0, PromptSegment::stable("persona", "You are a pirate."));
    Ok(())
}

/// Adds a stable segment with the step in it: a cache miss every call.
#[before_model(name = "stamper")]
fn stamper(ctx: &mut RunContext, request: &mut ModelRequest) -> Result<()> {
    request.system.push(PromptSegment::stable(
        "stamp",
        format!("stamp {}", ctx.counters().steps),
    ));
    Ok(())
}

/// Drops a tool from the second call on.
#[before_model(name = "narrow_tools")]
fn narrow_tools(ctx: &mut RunContext, request: &mut ModelRequest) -> Result<()> {
    if ctx.counters().steps > 1 {
        request.tools.retain(|t| t.name != "pong");
    }
    Ok(())
}

async fn run(stack: MiddlewareStack<()>, turns: usize) -> (Result<AgentRun>, Vec<CacheLayoutEvent>, Vec<AgentEvent>) {
    let mut script: Vec<ScriptedTurn> = (1..turns).map(|_| ScriptedTurn::tool_call("ping", json!({}))).collect();
    script.push(ScriptedTurn::text("done"));
    let agent: Agent<()> = Agent::new(ScriptedModel::new(script))
        .with_system_prompt("Be brief.")
        .with_tools(
            ToolRegistry::new()
                .with(RecordingTool::new("ping"))
                .unwrap()
                .with(RecordingTool::new("pong"))
                .unwrap(),
        )
        .with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await;
    let events: Vec<AgentEvent> = sink.events();
    let layout = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::CacheLayoutChanged { event, .. } => Some((**event).clone()),
            _ => None,
        })
        .collect();
    (run, layout, events)
}

#[tokio::test]
async fn a_volatile_only_middleware_keeps_the_fingerprint() {
    let stack = MiddlewareStack::new()
        .with(Clock)
        .unwrap()
        .with(Persona)
        .unwrap()
        .with(PromptCacheGuardMiddleware::new())
        .unwrap();
    let (run, layout, _) = run(stack, 3).await;
    run.unwrap();
    assert!(layout.is_empty(), "no prefix change across 3 calls: {layout:?}");
}

#[tokio::test]
async fn a_prefix_editing_middleware_changes_it_and_is_named() {
    let stack = MiddlewareStack::new()
        .with(Clock)
        .unwrap()
        .with(Stamper)
        .unwrap()
        .with(Persona)
        .unwrap()
        .with(PromptCacheGuardMiddleware::new())
        .unwrap();
    let (run, layout, events) = run(stack, 3).await;
    run.unwrap();
    assert_eq!(layout.len(), 2, "calls 2 and 3 each change the prefix: {layout:?}");
    for (i, e) in layout.iter().enumerate() {
        assert_eq!(e.step, i as u32 + 2);
        assert_eq!(
            e.changed_by,
            ["stamper"],
            "clock (volatile) and persona (identical) are not blamed"
        );
        assert_eq!(e.changed_parts, ["prefix"], "same ids, different text");
        assert_ne!(e.before, e.after);
    }
    assert_eq!(layout[0].after, layout[1].before);
    let trace = tinyagents::testing::trace(&events);
    assert!(
        trace.contains(&"cache_layout step=2 by=stamper".to_owned()),
        "{trace:?}"
    );
}

#[tokio::test]
async fn a_tool_list_change_names_the_middleware_and_the_tool() {
    let stack = MiddlewareStack::new()
        .with(NarrowTools)
        .unwrap()
        .with(PromptCacheGuardMiddleware::new())
        .unwrap();
    let (run, layout, _) = run(stack, 3).await;
    run.unwrap();
    assert_eq!(layout.len(), 1, "only call 2 differs from its predecessor: {layout:?}");
    assert_eq!(layout[0].changed_by, ["narrow_tools"]);
    assert_eq!(layout[0].changed_parts, ["tool:pong"]);
}

#[tokio::test]
async fn on_change_error_fails_the_call_naming_who_changed_it() {
    let guard = from_toml_str::<PromptCacheGuardConfig>("on_change = \"error\"")
        .unwrap()
        .build();
    let stack = MiddlewareStack::new().with(Stamper).unwrap().with(guard).unwrap();
    let (run, layout, _) = run(stack, 3).await;
    let err = run.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("changed at step 2"), "{err}");
    assert!(err.to_string().contains("by stamper"), "{err}");
    assert_eq!(layout.len(), 1);
}

#[test]
fn bad_configuration_is_rejected() {
    let err = from_toml_str::<PromptCacheGuardConfig>("on_change = \"warn\"").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`on_change` = \"warn\""), "{text}");
    assert!(text.contains("record"), "{text}");
}

#[tokio::test]
async fn the_compression_built_ins_keep_the_prefix_and_a_stable_dynamic_prompt_is_named() {
    // summarisation, trimming and a volatile dynamic prompt change the request every call,
    // but never its stable prefix
    let stack = MiddlewareStack::new()
        .with(SummarizationMiddleware::new(SummaryTrigger::messages(2)).keep_messages(1))
        .unwrap()
        .with(MessageTrimMiddleware::new(TrimStrategy::LastMessages(4)))
        .unwrap()
        .with(DynamicPromptMiddleware::new("step {step}").unwrap())
        .unwrap()
        .with(PromptCacheGuardMiddleware::new())
        .unwrap();
    let (result, layout, events) = run(stack, 4).await;
    let done = result.unwrap();
    assert!(layout.is_empty(), "{layout:?}");
    assert!(!done.compressions.is_empty(), "it did compress");
    assert!(done.compressions.iter().all(|p| p.stable_prefix_preserved));
    assert!(events.iter().any(|e| e.kind() == EventKind::Compressed));

    // the same prompt written into the stable prefix is a cache miss each call, and named
    let stack = MiddlewareStack::new()
        .with(DynamicPromptMiddleware::new("step {step}").unwrap().stable(true))
        .unwrap()
        .with(PromptCacheGuardMiddleware::new())
        .unwrap();
    let (result, layout, _) = run(stack, 3).await;
    result.unwrap();
    assert_eq!(layout.len(), 2);
    assert!(layout.iter().all(|e| e.changed_by == ["dynamic_prompt"]));
}

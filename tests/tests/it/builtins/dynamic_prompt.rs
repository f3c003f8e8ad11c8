//! `dynamic_prompt`: renders a template from the run context and explicit
//! state into the volatile tail (or a stable segment when told), keeps the
//! prefix fingerprint, and rejects bad templates naming the rule.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::cache::PromptCacheLayout;
use tinyagents::harness::model::SegmentStability;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// Sets the explicit state key `mode` once the run starts.
#[before_agent]
fn set_mode(ctx: &mut RunContext) -> Result<()> {
    ctx.flow_mut().update_state("mode", json!("plan"));
    ctx.flow_mut().update_state("budget", json!(3));
    Ok(())
}

async fn run(prompt: DynamicPromptMiddleware) -> Vec<ModelRequest> {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("ping", json!({})),
        ScriptedTurn::text("done"),
    ]));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_system_prompt("You are terse.")
        .with_tools(ToolRegistry::new().with(RecordingTool::new("ping")).unwrap())
        .with_stack(MiddlewareStack::new().with(SetMode).unwrap().with(prompt).unwrap());
    let mut ctx = RunContext::new(
        RunConfig::new("run-9").with_tag("ops").with_tag("eu").with_model("big"),
        (),
    );
    agent.run(&mut ctx, &(), "hi").await.unwrap();
    model.requests()
}

#[tokio::test]
async fn renders_context_and_state_into_the_volatile_tail_each_call() {
    let prompt = DynamicPromptMiddleware::new(
        "Run {run_id} ({tags}) on {model}, step {step}, mode {state.mode}, budget {state.budget}{state.unset}.",
    )
    .unwrap();
    let requests = run(prompt).await;
    let seg = |r: &ModelRequest| r.segment("dynamic_prompt").cloned().unwrap();
    assert_eq!(
        seg(&requests[0]).text,
        "Run run-9 (ops, eu) on big, step 1, mode plan, budget 3."
    );
    assert_eq!(
        seg(&requests[1]).text,
        "Run run-9 (ops, eu) on big, step 2, mode plan, budget 3."
    );
    assert_eq!(seg(&requests[0]).stability, SegmentStability::Volatile);
    // the stable prefix is untouched: same fingerprint on both calls though the text changed
    assert_eq!(
        PromptCacheLayout::of(&requests[0]).fingerprint,
        PromptCacheLayout::of(&requests[1]).fingerprint
    );
    assert_eq!(requests[0].system_prompt().lines().next(), Some("You are terse."));
}

#[tokio::test]
async fn a_stable_segment_goes_after_the_stable_ones_and_is_replaced_in_place() {
    let c: DynamicPromptConfig =
        from_toml_str("template = \"Tags: {tags}. {{literal}}\"\nsegment = \"tags\"\nstable = true").unwrap();
    let requests = run(c.build()).await;
    let r = &requests[1];
    assert_eq!(r.system[0].id, "system");
    assert_eq!(r.system[1].id, "tags");
    assert_eq!(r.system[1].text, "Tags: ops, eu. {literal}");
    assert_eq!(r.system[1].stability, SegmentStability::Stable);
    assert_eq!(r.system.len(), 2);
}

#[test]
fn bad_templates_are_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<DynamicPromptConfig>("template = \"Hi {user}\"").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`template` = \"Hi {user}\""), "{text}");
    assert!(text.contains("unknown placeholder `{user}`"), "{text}");
    assert!(text.contains("`{state.KEY}`"), "{text}");

    let err = from_toml_str::<DynamicPromptConfig>("template = \"Hi {run_id\"").unwrap_err();
    assert!(err.to_string().contains("not closed"), "{err}");
    let err = from_toml_str::<DynamicPromptConfig>("template = \"a } b\"").unwrap_err();
    assert!(err.to_string().contains("lone `}`"), "{err}");
    let err = from_toml_str::<DynamicPromptConfig>("").unwrap_err();
    assert!(err.to_string().contains("template"), "{err}");

    let err = DynamicPromptMiddleware::new("{nope}").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("unknown placeholder `{nope}`"), "{err}");
}

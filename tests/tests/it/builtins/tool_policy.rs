//! `ToolPolicyMiddleware`: the seed's example as written, exposure and
//! execution sharing one decision, every builder, result truncation, the
//! agent loop (a model calling a hidden tool anyway), and bad configuration.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::tool::{SandboxMode, SideEffects, ToolAccess, ToolPolicy, ToolRuntime};
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::tool_texts;
use tinyagents::testing::{trace, MiddlewareHarness, RecordingTool};

/// Every tool the policy tables name, and one never registered.
const EVERY_TOOL: &[&str] = &[
    "read",
    "unclassified",
    "rm",
    "pay",
    "fetch",
    "shell",
    "big",
    "never-registered",
];

/// Seed 000, "Tool policy enforcement", as written.
#[tokio::test]
async fn the_seed_example_runs_as_written() -> Result<()> {
    // Every line of the seed's example, its `use` lines as it writes them
    // (in rustfmt's order).
    use std::sync::Arc;
    use tinyagents::harness::context::{RunConfig, RunContext};
    use tinyagents::harness::middleware::{MiddlewareStack, ToolPolicyMiddleware};
    use tinyagents::harness::tool::{SandboxMode, ToolPolicy, ToolRuntime};
    use tinyagents::harness::workspace::WorkspaceDescriptor;

    let mut policies = std::collections::HashMap::new();
    policies.insert(
        "shell".to_string(),
        ToolPolicy::classified().with_runtime(ToolRuntime {
            sandbox: SandboxMode::Required,
            ..ToolRuntime::default()
        }),
    );
    use tinyagents::harness::tool::ToolCall;
    let call = || ToolCall::new("c1", "shell", serde_json::json!({}));

    let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
    stack.push(Arc::new(ToolPolicyMiddleware::new(policies).require_sandbox(true)));

    // No workspace -> the sandboxed tool is blocked (fail closed).
    let mut bare: RunContext = RunContext::new(RunConfig::new("no-sandbox"), ());
    assert!(stack.run_before_tool(&mut bare, &(), &mut call()).await.is_err());

    // A sandboxed workspace satisfies the requirement.
    let mut ok: RunContext = RunContext::new(RunConfig::new("sandboxed"), ())
        .with_workspace(WorkspaceDescriptor::new("/work").with_sandbox(SandboxMode::Required));
    stack.run_before_tool(&mut ok, &(), &mut call()).await?; // admitted
    Ok(())
}

fn policies() -> HashMap<String, ToolPolicy> {
    let mut p = HashMap::new();
    p.insert(
        "read".into(),
        ToolPolicy::classified()
            .with_side_effects(SideEffects::READ)
            .background_safe(true),
    );
    p.insert("unclassified".into(), ToolPolicy::default());
    p.insert(
        "rm".into(),
        ToolPolicy::classified().with_side_effects(SideEffects::WRITE | SideEffects::DESTRUCTIVE),
    );
    p.insert(
        "pay".into(),
        ToolPolicy::classified().with_side_effects(SideEffects::PAYMENT),
    );
    p.insert(
        "fetch".into(),
        ToolPolicy::classified().with_side_effects(SideEffects::NETWORK),
    );
    p.insert(
        "deploy".into(),
        ToolPolicy::classified().with_access(ToolAccess {
            approval_required: true,
            read_only: false,
        }),
    );
    p.insert(
        "shell".into(),
        ToolPolicy::classified()
            .with_side_effects(SideEffects::EXECUTE)
            .with_runtime(ToolRuntime {
                sandbox: SandboxMode::Required,
                ..ToolRuntime::default()
            }),
    );
    p.insert(
        "big".into(),
        ToolPolicy::classified().with_runtime(ToolRuntime {
            max_result_bytes: Some(5),
            ..ToolRuntime::default()
        }),
    );
    p
}

const ALL: [&str; 9] = [
    "read",
    "unclassified",
    "rm",
    "pay",
    "fetch",
    "deploy",
    "shell",
    "big",
    "never-registered",
];

/// Which tools survive exposure, and which calls are admitted at execution.
async fn exposed_and_admitted(mw: ToolPolicyMiddleware, ws: Option<WorkspaceDescriptor>) -> (Vec<String>, Vec<String>) {
    let stack: MiddlewareStack<()> = MiddlewareStack::new().with(mw).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    if let Some(ws) = ws {
        ctx = ctx.with_workspace(ws);
    }
    let mut request = ModelRequest::default().with_tools(ALL.iter().map(|n| ToolSchema::new(*n, "")).collect());
    stack.run_before_model(&mut ctx, &(), &mut request).await.unwrap();
    let exposed = request.tools.iter().map(|t| t.name.clone()).collect();
    let mut admitted = Vec::new();
    for name in ALL {
        let mut call = ToolCall::new("c", name, json!({}));
        match stack.run_before_tool(&mut ctx, &(), &mut call).await {
            Ok(()) => admitted.push(name.to_owned()),
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::Validation, "{name}: {e}");
                assert!(
                    e.to_string().contains(&format!("`{name}`")),
                    "the refusal names the tool: {e}"
                );
            }
        }
    }
    (exposed, admitted)
}

#[tokio::test]
async fn exposure_and_execution_make_the_same_decision_for_every_builder() {
    let sandboxed = || Some(WorkspaceDescriptor::new("/w").with_sandbox(SandboxMode::Required));
    let cases: Vec<(ToolPolicyMiddleware, Option<WorkspaceDescriptor>, &[&str])> = vec![
        (
            ToolPolicyMiddleware::new(policies()),
            None,
            &["read", "unclassified", "rm", "pay", "fetch", "big", "never-registered"],
        ),
        (ToolPolicyMiddleware::new(policies()), sandboxed(), EVERY_TOOL),
        (
            ToolPolicyMiddleware::strict(policies()),
            sandboxed(),
            &["read", "fetch", "shell", "big"],
        ),
        (
            ToolPolicyMiddleware::strict(policies()).deny_side_effects(SideEffects::NETWORK | SideEffects::EXECUTE),
            sandboxed(),
            &["read", "big"],
        ),
        (
            ToolPolicyMiddleware::new(policies()).require_background_safe(true),
            sandboxed(),
            &["read"],
        ),
        (
            ToolPolicyMiddleware::strict(policies()).require_approval(["deploy"]),
            None,
            &["read", "fetch", "deploy", "big"],
        ),
        (
            ToolPolicyMiddleware::new(policies()).require_sandbox(false),
            None,
            EVERY_TOOL,
        ),
        (
            ToolPolicyMiddleware::new(policies()).require_classification(true),
            sandboxed(),
            &["read", "rm", "pay", "fetch", "shell", "big"],
        ),
    ];
    for (i, (mw, ws, expected)) in cases.into_iter().enumerate() {
        let (exposed, admitted) = exposed_and_admitted(mw, ws).await;
        assert_eq!(
            exposed, admitted,
            "case {i}: a hidden tool must never be admitted, nor the reverse"
        );
        assert_eq!(admitted, *expected, "case {i}");
    }
}

#[tokio::test]
async fn a_workspace_that_only_prefers_a_sandbox_does_not_satisfy_required() {
    let ws = WorkspaceDescriptor::new("/w").with_sandbox(SandboxMode::Preferred);
    let (_, admitted) = exposed_and_admitted(ToolPolicyMiddleware::new(policies()), Some(ws)).await;
    assert!(!admitted.contains(&"shell".to_owned()));
}

#[tokio::test]
async fn look_alike_names_are_unknown_tools_and_strict_refuses_them() {
    let stack: MiddlewareStack<()> = MiddlewareStack::new()
        .with(ToolPolicyMiddleware::strict(policies()))
        .unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    for name in [
        "Read",
        "read ",
        " read",
        "read\u{0}",
        "rеad", /* Cyrillic e */
        "",
        "READ",
    ] {
        let mut call = ToolCall::new("c", name, json!({}));
        let err = stack.run_before_tool(&mut ctx, &(), &mut call).await.unwrap_err();
        assert!(err.to_string().contains("unknown to the policy"), "{name:?}: {err}");
    }
    // a call cannot smuggle a policy through its arguments
    let mut call = ToolCall::new("c", "pay", json!({"policy": {"classified": true, "side_effects": ""}}));
    assert!(stack.run_before_tool(&mut ctx, &(), &mut call).await.is_err());
}

#[tokio::test]
async fn an_oversized_result_is_truncated_on_a_char_boundary_and_flagged() {
    // on by default (the config's default too)
    let mut h: MiddlewareHarness = MiddlewareHarness::new(ToolPolicyMiddleware::new(policies()));
    let call = ToolCall::new("c", "big", json!({}));
    let r = h.after_tool(ToolResult::ok(&call, "abcdé-and-more")).await.unwrap();
    assert_eq!(r.content, "abcd"); // 'é' straddles byte 5: cut before it
    let err = r.error.expect("flagged");
    assert!(err.contains("max_result_bytes = 5"), "{err}");
    // within the limit: untouched
    let r = h.after_tool(ToolResult::ok(&call, "tiny")).await.unwrap();
    assert_eq!((r.content.as_str(), r.error), ("tiny", None));
    // turned off explicitly: untouched
    let mut off: MiddlewareHarness =
        MiddlewareHarness::new(ToolPolicyMiddleware::new(policies()).enforce_result_bytes(false));
    let r = off.after_tool(ToolResult::ok(&call, "abcdefgh")).await.unwrap();
    assert_eq!(r.content, "abcdefgh");
}

#[tokio::test]
async fn in_a_run_a_hidden_tool_is_not_shown_and_not_run_when_called_anyway() {
    let pay = RecordingTool::new("pay").with_policy(policies()["pay"].clone());
    let read = RecordingTool::new("read").with_policy(policies()["read"].clone());
    let tools = ToolRegistry::new()
        .with(pay.clone())
        .unwrap()
        .with(read.clone())
        .unwrap();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "pay", json!({"amount": 100})),
            ToolCall::new("2", "read", json!({})),
        ]),
        ScriptedTurn::text("done"),
    ]));
    let policy = ToolPolicyMiddleware::strict(tools.policies());
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(policy).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert!(pay.calls().is_empty(), "the denied tool never ran");
    assert_eq!(read.calls().len(), 1);
    let seen: Vec<String> = model.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(seen, ["read"]);
    let results = tool_texts(&run.messages);
    assert_eq!(results.len(), 2, "every call has exactly one result");
    assert!(results[0].contains("denied side effects: payment"), "{}", results[0]);
    assert!(trace(&sink.events()).contains(&"tools_filtered tool_policy -pay".to_owned()));
}

#[test]
fn config_builds_and_bad_values_are_rejected_naming_field_value_and_rule() {
    let c: ToolPolicyConfig =
        from_toml_str("strict = true\ndeny_side_effects = [\"network\"]\napproved = [\"deploy\"]").unwrap();
    assert!(c.strict);
    let _ = c.build();
    let err = from_toml_str::<ToolPolicyConfig>("deny_side_effects = [\"network\", \"teleport\"]").unwrap_err();
    let e = &err.errors()[0];
    assert_eq!(e.path, "deny_side_effects");
    assert_eq!(e.value, Some(json!("teleport")));
    assert!(e.rule.contains("must be one of read, write"), "{}", e.rule);
    let err = from_toml_str::<ToolPolicyConfig>("strict = \"yes\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "strict");
    let err = from_toml_str::<ToolPolicyConfig>("stritc = true").unwrap_err();
    assert!(err.to_string().contains("did you mean `strict`?"), "{err}");
}

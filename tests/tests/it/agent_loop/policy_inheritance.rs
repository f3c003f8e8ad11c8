//! Inherited policy (issue 14, class 3): a sub-agent run is held to every
//! restriction of its parent — allow/deny lists, tool policy (denied side
//! effects, `approval_required`, sandbox requirements), read-only modes and
//! approval gates — by the runtime, whatever the child's own stack holds. A
//! child that tries to widen is narrowed. The forbidden tool never runs and
//! the refusal reaches the child's model.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use tinyagents::external_hooks::{ExternalHooksMiddleware, HookCommand, HookEvent};
use tinyagents::harness::tool::{
    Approval, Restriction, RunRestrictions, SandboxMode, SideEffects, ToolAccess, ToolPolicy, ToolRuntime,
};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use crate::external_hooks::support::{parent_refuses_delete_then_delegates, temp_dir};

/// A parent whose model calls the sub-agent `helper` once, then finishes.
fn parent_with(stack: MiddlewareStack<()>, child: Agent<()>) -> Agent<()> {
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "do it"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_stack(stack)
}

/// A child with an empty stack whose model asks for `calls`, then finishes.
fn child_with(
    tools: &[&RecordingTool],
    calls: Vec<ToolCall>,
    stack: MiddlewareStack<()>,
) -> (Agent<()>, Arc<ScriptedModel>) {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(calls),
        ScriptedTurn::text("child done"),
    ]));
    let mut registry = ToolRegistry::new();
    for t in tools {
        registry.register((*t).clone()).unwrap();
    }
    let agent = Agent::new(model.clone()).with_tools(registry).with_stack(stack);
    (agent, model)
}

/// The tool results the child's model saw before its final turn.
fn child_saw(model: &ScriptedModel) -> Vec<(String, String)> {
    model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.clone().unwrap(), m.text().into_owned()))
        .collect()
}

fn shown(model: &ScriptedModel) -> Vec<String> {
    model.requests()[0].tools.iter().map(|t| t.name.clone()).collect()
}

async fn run(parent: &Agent<()>) -> AgentRun {
    let mut ctx = RunContext::new(RunConfig::new("p"), ());
    let run = parent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "parent done");
    run
}

#[tokio::test]
async fn a_child_with_an_empty_stack_cannot_run_what_the_parents_allowlist_forbids() {
    let shell = RecordingTool::new("shell").returning("root");
    let read = RecordingTool::new("read").returning("text");
    let (child, model) = child_with(
        &[&shell, &read],
        vec![
            ToolCall::new("c1", "shell", json!({"cmd": "id"})),
            ToolCall::new("c2", "read", json!({"path": "a"})),
        ],
        MiddlewareStack::new(),
    );
    let parent = parent_with(
        MiddlewareStack::new()
            .with(ToolAllowlistMiddleware::from_lists(
                Some(["helper", "read"]),
                Vec::<String>::new(),
            ))
            .unwrap(),
        child,
    );
    run(&parent).await;
    assert_eq!(shell.calls().len(), 0, "the forbidden tool never ran");
    assert_eq!(read.calls().len(), 1, "the permitted one did");
    assert_eq!(shown(&model), ["read"], "the child's model was not shown it");
    let saw = child_saw(&model);
    assert_eq!(saw[0].0, "c1");
    assert!(
        saw[0].1.contains("inherited from the parent run") && saw[0].1.contains("not in the allow list"),
        "the refusal reached the child's model: {}",
        saw[0].1
    );
    assert_eq!(saw[1], ("c2".into(), "text".into()));
}

#[tokio::test]
async fn a_child_that_tries_to_widen_is_narrowed() {
    // The parent denies `shell`; the child's own allowlist allows it
    // explicitly and its own tool policy approves `pay`, which the parent's
    // policy does not.
    let shell = RecordingTool::new("shell").returning("root");
    let pay = RecordingTool::new("pay")
        .returning("paid")
        .with_policy(ToolPolicy::classified().with_access(ToolAccess {
            approval_required: true,
            read_only: false,
        }));
    let (child, model) = child_with(
        &[&shell, &pay],
        vec![
            ToolCall::new("c1", "shell", json!({})),
            ToolCall::new("c2", "pay", json!({"amount": 100})),
        ],
        MiddlewareStack::new()
            .with(ToolAllowlistMiddleware::from_lists(
                Some(["shell", "pay"]),
                Vec::<String>::new(),
            ))
            .unwrap()
            .with(ToolPolicyMiddleware::new(HashMap::new()).require_approval(["pay"]))
            .unwrap(),
    );
    let parent = parent_with(
        MiddlewareStack::new()
            .with(ToolAllowlistMiddleware::from_lists(None::<Vec<String>>, ["shell"]))
            .unwrap()
            .with(ToolPolicyMiddleware::new(HashMap::new()))
            .unwrap(),
        child,
    );
    run(&parent).await;
    assert!(shell.calls().is_empty() && pay.calls().is_empty(), "neither ran");
    let saw = child_saw(&model);
    assert!(saw[0].1.contains("denied"), "{}", saw[0].1);
    assert!(saw[1].1.contains("requires approval"), "{}", saw[1].1);
}

#[tokio::test]
async fn tool_policy_rules_hold_in_a_child_with_an_empty_stack() {
    let approval =
        RecordingTool::new("wire_money")
            .returning("sent")
            .with_policy(ToolPolicy::classified().with_access(ToolAccess {
                approval_required: true,
                read_only: false,
            }));
    let fetch = RecordingTool::new("fetch")
        .returning("page")
        .with_policy(ToolPolicy::classified().with_side_effects(SideEffects::NETWORK));
    let sandboxed = RecordingTool::new("exec")
        .returning("ran")
        .with_policy(ToolPolicy::classified().with_runtime(ToolRuntime {
            sandbox: SandboxMode::Required,
            ..ToolRuntime::default()
        }));
    let unknown = RecordingTool::new("mystery").returning("?");
    let (child, model) = child_with(
        &[&approval, &fetch, &sandboxed, &unknown],
        vec![
            ToolCall::new("c1", "wire_money", json!({"to": "x"})),
            ToolCall::new("c2", "fetch", json!({"url": "http://x"})),
            ToolCall::new("c3", "exec", json!({})),
            ToolCall::new("c4", "mystery", json!({})),
        ],
        MiddlewareStack::new(),
    );
    // The parent's own policy admits its `helper` (declared classified by name).
    let policy = ToolPolicyMiddleware::new(HashMap::from([("helper".to_string(), ToolPolicy::classified())]))
        .deny_side_effects(SideEffects::NETWORK)
        .require_classification(true);
    let parent = parent_with(MiddlewareStack::new().with(policy).unwrap(), child);
    run(&parent).await;
    for t in [&approval, &fetch, &sandboxed, &unknown] {
        assert!(
            t.calls().is_empty(),
            "a tool the parent's policy refuses ran in the child"
        );
    }
    assert!(shown(&model).is_empty(), "none was shown: {:?}", shown(&model));
    let saw = child_saw(&model);
    for (i, rule) in [
        "requires approval",
        "denied side effects: network",
        "requires a sandbox",
        "unclassified",
    ]
    .iter()
    .enumerate()
    {
        assert!(saw[i].1.contains(rule), "call {i}: {}", saw[i].1);
        assert!(saw[i].1.contains("restriction of `tool_policy`"), "{}", saw[i].1);
    }
}

#[tokio::test]
async fn read_only_mode_and_approval_gates_are_inherited() {
    let write = RecordingTool::new("write").returning("written");
    let read = RecordingTool::new("read")
        .returning("text")
        .with_policy(ToolPolicy::classified().with_side_effects(SideEffects::READ));
    let (child, model) = child_with(
        &[&write, &read],
        vec![
            ToolCall::new("c1", "write", json!({"path": "a"})),
            ToolCall::new("c2", "read", json!({"path": "a"})),
        ],
        MiddlewareStack::new(),
    );
    let modes = AgentModeMiddleware::new(AgentMode::Plan).read_only_tools(["helper"]);
    let parent = parent_with(MiddlewareStack::new().with(modes).unwrap(), child);
    run(&parent).await;
    assert!(write.calls().is_empty(), "plan mode is read-only in the child too");
    assert_eq!(read.calls().len(), 1);
    assert!(child_saw(&model)[0].1.contains("not read-only"));

    // A parent gate (human_in_the_loop) on `delete`: the child has no way to
    // ask a person, so its call is refused — never run unapproved.
    let delete = RecordingTool::new("delete").returning("deleted");
    let (child, model) = child_with(
        &[&delete],
        vec![ToolCall::new("c1", "delete", json!({"path": "/"}))],
        MiddlewareStack::new(),
    );
    let hitl = HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new());
    let parent = parent_with(MiddlewareStack::new().with(hitl).unwrap(), child);
    run(&parent).await;
    assert!(delete.calls().is_empty());
    assert!(child_saw(&model)[0].1.contains("needs a person's approval"));
}

#[tokio::test]
async fn restrictions_reach_a_grandchild() {
    let shell = RecordingTool::new("shell").returning("root");
    let (grandchild, model) = child_with(
        &[&shell],
        vec![ToolCall::new("g1", "shell", json!({}))],
        MiddlewareStack::new(),
    );
    // the middle agent has no guard at all and calls the grandchild
    let inner = AgentTool::new(Arc::new(grandchild), "inner", "Delegates.", || ((), ()));
    let middle: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("m1", "inner", json!({"input": "go"}))]),
        ScriptedTurn::text("middle done"),
    ]))
    .with_tools(ToolRegistry::new().with(inner).unwrap());
    let parent = parent_with(
        MiddlewareStack::new()
            .with(ToolAllowlistMiddleware::from_lists(None::<Vec<String>>, ["shell"]))
            .unwrap(),
        middle,
    );
    run(&parent).await;
    assert!(shell.calls().is_empty());
    assert!(child_saw(&model)[0].1.contains("denied"));
}

#[tokio::test]
async fn a_top_level_run_and_an_unrestricted_parent_are_unaffected() {
    let shell = RecordingTool::new("shell").returning("root");
    let (child, _model) = child_with(
        &[&shell],
        vec![ToolCall::new("c1", "shell", json!({}))],
        MiddlewareStack::new(),
    );
    let parent = parent_with(MiddlewareStack::new(), child);
    run(&parent).await;
    assert_eq!(shell.calls().len(), 1, "no restriction, nothing refused");
}

#[test]
fn restrictions_compose_by_narrowing() {
    let lists = |allow: &[&str], deny: &[&str]| {
        Restriction::Tools(ToolLists::new(
            Some(allow.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            deny.iter().map(|s| s.to_string()),
        ))
    };
    let r = RunRestrictions::new()
        .with("parent", lists(&["a", "b", "c"], &["c"]))
        .with("child", lists(&["b", "c", "d"], &[]));
    let ok = |n: &str| r.check(n, None, None, Approval::Missing).is_ok();
    assert!(ok("b"));
    assert!(!ok("a") && !ok("c") && !ok("d") && !ok("e"));
    let err = r.check("d", None, None, Approval::Missing).unwrap_err();
    assert!(err.contains("restriction of `parent`"), "{err}");
}

/// A tool that starts its own child run by hand (not `AgentTool`) gets the
/// restrictions through `RunConfig::child_of`: nothing to remember.
#[tokio::test]
async fn a_hand_built_child_run_inherits_through_run_config_child_of() {
    let shell = RecordingTool::new("shell").returning("root");
    let (child, model) = child_with(
        &[&shell],
        vec![ToolCall::new("c1", "shell", json!({}))],
        MiddlewareStack::new(),
    );
    let child = Arc::new(child);
    let custom = tool_fn("helper", "Runs a child by hand.", move |cx, _args| {
        let child = child.clone();
        async move {
            let mut ctx = RunContext::new(RunConfig::child_of(cx.parent(), "kid"), ());
            let run = child.run(&mut ctx, &(), "go").await?;
            Ok(run.final_text().into())
        }
    });
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(custom).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(ToolAllowlistMiddleware::from_lists(None::<Vec<String>>, ["shell"]))
            .unwrap(),
    );
    run(&parent).await;
    assert!(shell.calls().is_empty());
    assert!(child_saw(&model)[0].1.contains("denied"));
}

/// `shell_fs_guard` judges whole calls (commands, paths): the runtime
/// applies the parent's guard to each call of the child.
#[tokio::test]
async fn the_parent_s_shell_fs_guard_judges_the_child_s_calls() {
    use tinyagents::harness::workspace::WorkspaceDescriptor;
    let root = std::env::temp_dir().join(format!("tinyagents-inherit-guard-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let shell = RecordingTool::new("shell").returning("ok");
    let (child, model) = child_with(
        &[&shell],
        vec![
            ToolCall::new("c1", "shell", json!({"command": "ls; rm -rf /"})),
            ToolCall::new("c2", "shell", json!({"command": "ls"})),
        ],
        MiddlewareStack::new(),
    );
    let parent = parent_with(
        MiddlewareStack::new().with(ShellFsGuardMiddleware::new()).unwrap(),
        child,
    );
    let mut ctx = RunContext::new(RunConfig::new("p"), ()).with_workspace(WorkspaceDescriptor::new(&root));
    let run = parent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "parent done");
    assert_eq!(
        shell.calls(),
        [json!({"command": "ls"})],
        "only the admitted command ran"
    );
    let saw = child_saw(&model);
    assert!(saw[0].1.contains("restriction of `shell_fs_guard`"), "{}", saw[0].1);
    let _ = std::fs::remove_dir_all(&root);
}

/// A parent's `pre_tool_use` policy hook refuses `delete`: it holds in a
/// sub-agent whose own stack has no hooks too (the runtime asks it at the
/// child's last check), as every guard of a parent does.
#[tokio::test]
async fn a_parent_s_policy_hook_holds_in_a_sub_agent_run() {
    let dir = temp_dir("policy-inheritance", "parent-hook");
    let (_run, delete) = parent_refuses_delete_then_delegates(HookEvent::PreToolUse, &dir).await;
    assert!(
        delete.calls().is_empty(),
        "the parent's policy hook refuses `delete` in its sub-agent too: {:?}",
        delete.calls()
    );
}

/// A sub-agent sharing its parent's stack runs the parent's hooks once per
/// call (in its own `before_tool`), not again at the last check; a call the
/// hook admits runs.
#[tokio::test]
async fn a_shared_stack_asks_the_parent_s_hook_once_per_call() {
    let dir = std::env::temp_dir().join(format!("tinyagents-hooks-once-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("asked.log");
    let hooks = ExternalHooksMiddleware::new([HookCommand::new(
        HookEvent::PreToolUse,
        format!("cat > /dev/null; echo asked >> {}", log.display()),
    )
    .with_matcher("^ping$")
    .unwrap()
    .with_sandbox(SandboxMode::Off)
    .with_timeout(std::time::Duration::from_secs(20))])
    .in_dir(&dir);
    let stack = Arc::new(MiddlewareStack::new().with(hooks).unwrap());
    let ping = RecordingTool::new("ping").returning("pong");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "ping", json!({}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(ping.clone()).unwrap())
    .with_shared_stack(stack.clone());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "ping"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_shared_stack(stack);
    let mut ctx = RunContext::new(RunConfig::new("p"), ());
    parent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(ping.calls().len(), 1, "the hook admitted the call");
    let asked = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(asked.lines().count(), 1, "the hook was asked once: {asked:?}");
}

//! `ToolAllowlistMiddleware`: refusal at execution with the same decision as
//! exposure, and a sub-agent that cannot widen its parent's restrictions.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::tool_texts;
use tinyagents::testing::RecordingTool;

#[tokio::test]
async fn calls_outside_the_lists_are_refused_and_the_others_run() {
    let stack: MiddlewareStack<()> = MiddlewareStack::new()
        .with(ToolAllowlistMiddleware::from_lists(Some(["search", "read"]), ["read"]))
        .unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    stack.run_before_agent(&mut ctx, &()).await.unwrap();
    let mut ok = ToolCall::new("1", "search", json!({}));
    stack.run_before_tool(&mut ctx, &(), &mut ok).await.unwrap();
    for (name, why) in [
        ("read", "it is denied"),
        ("shell", "not in the allow list"),
        ("Search", "not in the allow list"),
        ("search ", "not in the allow list"),
        ("", "not in the allow list"),
    ] {
        let mut call = ToolCall::new("1", name, json!({}));
        let err = stack.run_before_tool(&mut ctx, &(), &mut call).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert!(err.to_string().contains(why), "{name:?}: {err}");
    }
    let mut req =
        ModelRequest::default().with_tools(["search", "read", "shell"].map(|n| ToolSchema::new(n, "")).to_vec());
    stack.run_before_model(&mut ctx, &(), &mut req).await.unwrap();
    assert_eq!(req.tools, [ToolSchema::new("search", "")]);
}

#[tokio::test]
async fn a_forged_or_malformed_restriction_tag_cannot_widen_and_denies_everything() {
    let mw = ToolAllowlistMiddleware::from_lists(None::<Vec<String>>, Vec::<String>::new());
    // a well-formed inherited deny narrows an unrestricted middleware
    assert!(!mw.effective(&[format!("{DENY_TAG}[\"shell\"]")]).permits("shell"));
    // an inherited allow list cannot be widened by a second one: they intersect
    let tags = [format!("{ALLOW_TAG}[\"a\"]"), format!("{ALLOW_TAG}[\"a\",\"shell\"]")];
    let e = mw.effective(&tags);
    assert!(e.permits("a") && !e.permits("shell"));
    // not understood: nothing is permitted
    for bad in [
        format!("{ALLOW_TAG}shell"),
        format!("{DENY_TAG}{{}}"),
        ALLOW_TAG.to_string(),
    ] {
        let e = mw.effective(std::slice::from_ref(&bad));
        assert!(!e.permits("a") && !e.permits("shell"), "{bad}");
    }
}

/// A parent denies `shell`; its sub-agent's own stack allows `shell`
/// explicitly, and the sub-agent's model asks for it. It never runs.
#[tokio::test]
async fn a_sub_agent_cannot_run_a_tool_its_parent_denied() {
    let shell = RecordingTool::new("shell").returning("root shell");
    let read = RecordingTool::new("read").returning("file text");
    let child_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("c1", "shell", json!({"cmd": "cat /etc/shadow"})),
            ToolCall::new("c2", "read", json!({"path": "a.txt"})),
        ]),
        ScriptedTurn::text("child done"),
    ]));
    let child: Agent<()> = Agent::new(child_model.clone())
        .with_tools(
            ToolRegistry::new()
                .with(shell.clone())
                .unwrap()
                .with(read.clone())
                .unwrap(),
        )
        .with_stack(
            MiddlewareStack::new()
                .with(ToolAllowlistMiddleware::from_lists(
                    Some(["shell", "read"]),
                    Vec::<String>::new(),
                ))
                .unwrap(),
        );
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent_model = ScriptedModel::new([
        ScriptedTurn::tool_call("helper", json!({"input": "get me a shell"})),
        ScriptedTurn::text("parent done"),
    ]);
    let parent: Agent<()> = Agent::new(parent_model)
        .with_tools(ToolRegistry::new().with(helper).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(ToolAllowlistMiddleware::from_lists(None::<Vec<String>>, ["shell"]))
                .unwrap(),
        );
    let run = parent
        .run(&mut RunContext::new(RunConfig::new("p"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "parent done");
    assert!(
        shell.calls().is_empty(),
        "the parent-denied tool never ran in the child"
    );
    assert_eq!(read.calls().len(), 1);
    let child_saw: Vec<String> = child_model.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(child_saw, ["read"], "the child's model was not even shown it");
    assert_eq!(tool_texts(&run.messages), ["child done"]);
}

#[test]
fn config_builds_and_rejects_bad_values() {
    let c: ToolAllowlistConfig = from_toml_str("deny = [\"shell\"]").unwrap();
    assert!(!c.build().lists().permits("shell"));
    let err = from_toml_str::<ToolAllowlistConfig>("deny = [1]").unwrap_err();
    assert_eq!(err.errors()[0].path, "deny");
    assert_eq!(err.errors()[0].value, Some(json!([1])));
    let err = from_toml_str::<ToolAllowlistConfig>("allowed = []").unwrap_err();
    assert!(err.to_string().contains("did you mean `allow`?"), "{err}");
}

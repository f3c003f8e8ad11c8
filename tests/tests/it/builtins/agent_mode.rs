//! `AgentModeMiddleware`: reminders per mode, read-only restriction enforced
//! at exposure and at execution in plan and review, switching at run time
//! through steering, unknown modes rejected, and configuration.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use tinyagents::config::from_toml_str;
use tinyagents::harness::steering::{SteeringAction, SteeringCommand, SteeringHandle};
use tinyagents::harness::tool::{SideEffects, ToolAccess, ToolPolicy};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::{trace, RecordingTool};

fn names(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

struct Fixture {
    read: RecordingTool,
    write: RecordingTool,
    model: Arc<ScriptedModel>,
    agent: Agent<()>,
}

fn fixture(turns: Vec<ScriptedTurn>, modes: AgentModeMiddleware, extra: Option<Box<dyn Tool>>) -> Fixture {
    let read = RecordingTool::new("read_file").returning("text");
    let write = RecordingTool::new("write_file").returning("written");
    let mut tools = ToolRegistry::new()
        .with(read.clone())
        .unwrap()
        .with(write.clone())
        .unwrap();
    if let Some(t) = extra {
        tools.register_arc(Arc::from(t)).unwrap();
    }
    let model = Arc::new(ScriptedModel::new(turns));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(modes).unwrap());
    Fixture {
        read,
        write,
        model,
        agent,
    }
}

fn modes() -> AgentModeMiddleware {
    AgentModeMiddleware::new(AgentMode::Build).read_only_tools(["read_file"])
}

#[tokio::test]
async fn build_mode_shows_every_tool_and_adds_no_reminder() {
    let f = fixture(vec![ScriptedTurn::text("hi")], modes(), None);
    f.agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let req = &f.model.requests()[0];
    assert_eq!(names(req), ["read_file", "write_file"]);
    assert!(req.segment("agent_mode").is_none());
}

#[tokio::test]
async fn plan_mode_hides_and_refuses_writes_and_reminds() {
    let f = fixture(
        vec![
            ScriptedTurn::tool_calls(vec![
                ToolCall::new("1", "write_file", json!({ "path": "a" })),
                ToolCall::new("2", "read_file", json!({ "path": "a" })),
            ]),
            ScriptedTurn::text("plan ready"),
        ],
        modes(),
        None,
    );
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r").with_tag("mode:plan"), ()).with_sink(sink.clone());
    let run = f.agent.run(&mut ctx, &(), "go").await.unwrap();
    let req = &f.model.requests()[0];
    assert_eq!(names(req), ["read_file"]);
    assert_eq!(req.segment("agent_mode").unwrap().text, PLAN_REMINDER);
    assert!(f.write.calls().is_empty(), "the write was refused at execution");
    assert_eq!(f.read.calls().len(), 1);
    let refusal = run
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("1"))
        .unwrap();
    assert!(refusal.text().contains("plan mode"), "{}", refusal.text());
    assert!(trace(&sink.events()).contains(&"tools_filtered agent_mode -write_file".to_owned()));
}

#[tokio::test]
async fn review_mode_uses_its_reminder_and_unknown_tools_count_as_writes() {
    let f = fixture(
        vec![ScriptedTurn::tool_call("mystery", json!({})), ScriptedTurn::text("ok")],
        modes(),
        Some(Box::new(RecordingTool::new("mystery"))),
    );
    let mut ctx = RunContext::new(RunConfig::new("r").with_tag("mode:review"), ());
    let run = f.agent.run(&mut ctx, &(), "go").await.unwrap();
    let req = &f.model.requests()[0];
    assert_eq!(req.segment("agent_mode").unwrap().text, REVIEW_REMINDER);
    assert_eq!(names(req), ["read_file"]);
    assert!(run
        .messages
        .iter()
        .any(|m| m.text().contains("`mystery` is not a read-only tool")));
}

#[test]
fn policies_mark_tools_read_only() {
    let mut p = HashMap::new();
    p.insert(
        "grep".to_owned(),
        ToolPolicy::classified().with_side_effects(SideEffects::READ),
    );
    p.insert("pure".to_owned(), ToolPolicy::classified());
    p.insert(
        "viewer".to_owned(),
        ToolPolicy::default().with_access(ToolAccess {
            approval_required: false,
            read_only: true,
        }),
    );
    p.insert(
        "fetch".to_owned(),
        ToolPolicy::classified().with_side_effects(SideEffects::READ | SideEffects::NETWORK),
    );
    p.insert("unclassified".to_owned(), ToolPolicy::default());
    let m = AgentModeMiddleware::new(AgentMode::Plan).with_policies(p);
    for (tool, ro) in [
        ("grep", true),
        ("pure", true),
        ("viewer", true),
        ("fetch", false),
        ("unclassified", false),
        ("absent", false),
    ] {
        assert_eq!(m.is_read_only(tool), ro, "{tool}");
    }
}

#[tokio::test]
async fn a_steering_switch_changes_the_mode_at_the_next_step() {
    let handle = SteeringHandle::new();
    let h = handle.clone();
    let switcher = tool_fn("plan_now", "Asks for plan mode.", move |_cx, _args| {
        let h = h.clone();
        async move {
            h.send(SteeringCommand::new(
                "to-plan",
                SteeringAction::SwitchMode { mode: "plan".into() },
            ));
            Ok("switching".into())
        }
    });
    let f = fixture(
        vec![
            ScriptedTurn::tool_call("plan_now", json!({})),
            ScriptedTurn::tool_call("write_file", json!({ "path": "x" })),
            ScriptedTurn::text("done"),
        ],
        modes().read_only_tools(["plan_now"]),
        Some(Box::new(switcher)),
    );
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_steering(handle.clone());
    f.agent.run(&mut ctx, &(), "go").await.unwrap();
    let requests = f.model.requests();
    assert_eq!(names(&requests[0]), ["read_file", "write_file", "plan_now"]);
    assert_eq!(
        names(&requests[1]),
        ["read_file", "plan_now"],
        "plan mode after the switch"
    );
    assert!(requests[1].segment("agent_mode").is_some());
    assert!(f.write.calls().is_empty());

    // and back to build
    handle.send(SteeringCommand::new(
        "to-build",
        SteeringAction::SwitchMode { mode: "build".into() },
    ));
    let f = fixture(vec![ScriptedTurn::text("hi")], modes(), None);
    let mut ctx = RunContext::new(RunConfig::new("r2").with_tag("mode:plan"), ()).with_steering(handle);
    f.agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(names(&f.model.requests()[0]), ["read_file", "write_file"]);
}

#[tokio::test]
async fn a_switch_to_an_unknown_mode_is_rejected_and_the_mode_stays() {
    let handle = SteeringHandle::new();
    handle.send(SteeringCommand::new(
        "yolo",
        SteeringAction::SwitchMode { mode: "yolo".into() },
    ));
    let f = fixture(vec![ScriptedTurn::text("hi")], modes(), None);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r").with_tag("mode:review"), ())
        .with_sink(sink.clone())
        .with_steering(handle);
    f.agent.run(&mut ctx, &(), "go").await.unwrap();
    assert!(trace(&sink.events()).contains(&"steering yolo switch_mode reject".to_owned()));
    assert_eq!(names(&f.model.requests()[0]), ["read_file"], "still review");
}

#[test]
fn config_builds_and_bad_values_are_rejected_naming_field_value_and_rule() {
    let c: AgentModeConfig = from_toml_str("default = \"review\"\nread_only_tools = [\"ls\"]").unwrap();
    let m: AgentModeMiddleware = c.into();
    assert!(m.is_read_only("ls"));
    let err = from_toml_str::<AgentModeConfig>("default = \"yolo\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "default");
    assert_eq!(err.errors()[0].value, Some(json!("yolo")));
    assert_eq!(err.errors()[0].rule, "must be one of \"build\", \"plan\", \"review\"");
}

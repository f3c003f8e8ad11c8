//! `HumanInTheLoopMiddleware`: a run pauses before any call of a batch with a
//! gated call runs, carrying every pending request; a new run resumes with
//! decisions (approve, edit, reject, respond); bad decisions are clear errors
//! and nothing runs; and no path runs a gated tool without a decision.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::from_toml_str;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

struct Fixture {
    delete: RecordingTool,
    email: RecordingTool,
    read: RecordingTool,
    model: Arc<ScriptedModel>,
    agent: Agent<()>,
}

fn fixture(turns: Vec<ScriptedTurn>, hitl: HumanInTheLoopMiddleware) -> Fixture {
    let delete = RecordingTool::new("delete").returning("deleted");
    let email = RecordingTool::new("send_email").returning("sent");
    let read = RecordingTool::new("read").returning("contents");
    let model = Arc::new(ScriptedModel::new(turns));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(
            ToolRegistry::new()
                .with(delete.clone())
                .unwrap()
                .with(email.clone())
                .unwrap()
                .with(read.clone())
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(hitl).unwrap());
    Fixture {
        delete,
        email,
        read,
        model,
        agent,
    }
}

fn gates() -> HumanInTheLoopMiddleware {
    HumanInTheLoopMiddleware::new()
        .interrupt_on("delete", InterruptOn::new())
        .interrupt_on(
            "send_email",
            InterruptOn::new()
                .allow([DecisionKind::Approve, DecisionKind::Reject])
                .describe("Send this email?"),
        )
}

fn batch() -> ScriptedTurn {
    ScriptedTurn::tool_calls(vec![
        ToolCall::new("d1", "delete", json!({ "path": "a.txt" })),
        ToolCall::new("r1", "read", json!({ "path": "b.txt" })),
        ToolCall::new("e1", "send_email", json!({ "to": "boss" })),
    ])
}

async fn pause(f: &Fixture) -> HitlInterrupt {
    let mut ctx = RunContext::new(RunConfig::new("first"), ());
    let err = f.agent.run(&mut ctx, &(), "tidy up").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    assert!(err.to_string().contains("2 tool call(s) await"), "{err}");
    HumanInTheLoopMiddleware::take_interrupt(&ctx).expect("an interrupt")
}

fn nothing_ran(f: &Fixture) {
    assert!(f.delete.calls().is_empty(), "delete ran");
    assert!(f.email.calls().is_empty(), "send_email ran");
    assert!(f.read.calls().is_empty(), "even the ungated call of the batch waits");
}

async fn resume(f: &Fixture, resume: HitlResume) -> Result<AgentRun> {
    let input = resume.input();
    let mut ctx = RunContext::new(RunConfig::new("second"), ());
    resume.attach(&ctx);
    f.agent.run(&mut ctx, &(), input).await
}

fn tool_results(run: &AgentRun) -> Vec<(String, String)> {
    run.messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.clone().unwrap(), m.text().into_owned()))
        .collect()
}

#[tokio::test]
async fn a_gated_batch_pauses_with_every_request_and_nothing_runs() {
    let f = fixture(vec![batch(), ScriptedTurn::text("done")], gates());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("first"), ()).with_sink(sink.clone());
    let err = f.agent.run(&mut ctx, &(), "tidy up").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    nothing_ran(&f);
    let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    let ids: Vec<&str> = paused.requests.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["d1", "e1"]);
    assert_eq!(paused.requests[1].description, "Send this email?");
    assert_eq!(
        paused.requests[1].allowed,
        [DecisionKind::Approve, DecisionKind::Reject]
    );
    assert_eq!(paused.requests[0].arguments, json!({ "path": "a.txt" }));
    assert_eq!(paused.reply.tool_calls.len(), 3);
    assert_eq!(paused.messages.last().unwrap().text(), "tidy up");
    assert!(HumanInTheLoopMiddleware::take_interrupt(&ctx).is_none(), "taken once");
    let events = sink.events();
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::StateUpdated { key, .. } if key == "hitl_pending")));
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::Custom { name, .. } if name == "interrupt")));
}

#[tokio::test]
async fn resumed_decisions_approve_edit_reject_and_respond() {
    let f = fixture(vec![batch(), ScriptedTurn::text("done")], gates());
    let paused = pause(&f).await;
    let r = paused
        .decide([
            (
                "d1",
                Decision::Edit {
                    arguments: json!({ "path": "a.txt.bak" }),
                },
            ),
            (
                "e1",
                Decision::Reject {
                    message: Some("not today".into()),
                },
            ),
        ])
        .unwrap();
    let run = resume(&f, r).await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(
        f.delete.calls(),
        [json!({ "path": "a.txt.bak" })],
        "the edited call ran with the edited arguments"
    );
    assert!(f.email.calls().is_empty(), "the rejected call did not run");
    assert_eq!(f.read.calls().len(), 1);
    let results = tool_results(&run);
    assert_eq!(results.len(), 3, "one result per call");
    assert_eq!(results[0], ("d1".into(), "deleted".into()));
    assert_eq!(results[1], ("r1".into(), "contents".into()));
    assert_eq!(results[2].0, "e1");
    assert!(
        results[2]
            .1
            .contains("a person rejected this call to `send_email`: not today"),
        "{}",
        results[2].1
    );
    // the model was asked once per run turn: the paused reply was replayed, not re-asked
    assert_eq!(f.model.calls(), 2);

    let f = fixture(vec![batch(), ScriptedTurn::text("done")], gates());
    let paused = pause(&f).await;
    let r = paused
        .decide([
            (
                "d1",
                Decision::Respond {
                    content: "already gone".into(),
                },
            ),
            ("e1", Decision::Approve),
        ])
        .unwrap();
    let run = resume(&f, r).await.unwrap();
    assert!(f.delete.calls().is_empty());
    assert_eq!(f.email.calls().len(), 1);
    assert_eq!(tool_results(&run)[0], ("d1".into(), "already gone".into()));
}

#[tokio::test]
async fn missing_extra_duplicate_disallowed_or_malformed_decisions_are_errors_and_nothing_runs() {
    let f = fixture(vec![batch(), ScriptedTurn::text("done")], gates());
    let paused = pause(&f).await;
    let cases: Vec<(Vec<(&str, Decision)>, &str)> = vec![
        (vec![("d1", Decision::Approve)], "no decision for calls e1"),
        (
            vec![
                ("d1", Decision::Approve),
                ("e1", Decision::Approve),
                ("r1", Decision::Approve),
            ],
            "decisions for calls that await none: r1",
        ),
        (
            vec![
                ("d1", Decision::Approve),
                ("e1", Decision::Approve),
                ("zz", Decision::Approve),
            ],
            "await none: zz",
        ),
        (
            vec![
                ("d1", Decision::Approve),
                (
                    "e1",
                    Decision::Edit {
                        arguments: json!({ "to": "all" }),
                    },
                ),
            ],
            "decision `edit` is not allowed for call `e1`",
        ),
        (
            vec![
                (
                    "d1",
                    Decision::Edit {
                        arguments: json!("rm -rf /"),
                    },
                ),
                ("e1", Decision::Approve),
            ],
            "must be a JSON object",
        ),
        (
            vec![
                ("d1", Decision::Approve),
                ("d1", Decision::Reject { message: None }),
                ("e1", Decision::Approve),
            ],
            "two decisions for call `d1`",
        ),
        (vec![], "no decision for calls d1, e1"),
    ];
    for (decisions, expected) in cases {
        let err = paused.clone().decide(decisions).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Validation);
        assert!(err.to_string().contains(expected), "{err}");
    }
    nothing_ran(&f);
}

#[tokio::test]
async fn no_path_runs_a_gated_tool_without_a_decision() {
    // 1. the first run pauses: nothing ran (checked in `pause`)
    let f = fixture(
        vec![
            batch(),
            // after the resumed batch, the model asks for a gated tool again
            ScriptedTurn::tool_call("delete", json!({ "path": "c.txt" })),
            ScriptedTurn::text("done"),
        ],
        gates(),
    );
    let paused = pause(&f).await;
    nothing_ran(&f);
    // 2. approvals are per call: the next gated call pauses the resumed run again
    let r = paused
        .decide([("d1", Decision::Approve), ("e1", Decision::Reject { message: None })])
        .unwrap();
    let err = resume(&f, r).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    assert_eq!(
        f.delete.calls(),
        [json!({ "path": "a.txt" })],
        "only the approved call ran"
    );

    // 3. a stack driven directly: `before_tool` refuses a gated call no review admitted
    let stack: MiddlewareStack<()> = MiddlewareStack::new().with(gates()).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("direct"), ());
    let mut call = ToolCall::new("x", "delete", json!({}));
    let err = stack.run_before_tool(&mut ctx, &(), &mut call).await.unwrap_err();
    assert!(err.to_string().contains("needs a person's decision"), "{err}");

    // 4. a run without the middleware's resume: the model asks again and the run pauses again
    let f = fixture(vec![batch(), batch(), ScriptedTurn::text("done")], gates());
    let paused = pause(&f).await;
    let mut ctx = RunContext::new(RunConfig::new("no-decisions"), ());
    let err = f
        .agent
        .run(&mut ctx, &(), AgentInput(paused.messages.clone()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    nothing_ran(&f);

    // 5. decisions attached to a run whose replayed batch differs are refused before anything runs
    let f = fixture(vec![batch(), ScriptedTurn::text("done")], gates());
    let mut paused = pause(&f).await;
    paused.requests.retain(|r| r.call_id == "d1"); // a tampered interrupt: e1 dropped
    let r = paused.decide([("d1", Decision::Approve)]).unwrap();
    let err = resume(&f, r).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("no decision for calls e1"), "{err}");
    nothing_ran(&f);
}

#[tokio::test]
async fn a_condition_gates_only_matching_calls() {
    let hitl = HumanInTheLoopMiddleware::new().interrupt_on(
        "send_email",
        InterruptOn::new().when(|call| call.arguments["to"].as_str() != Some("me")),
    );
    let f = fixture(
        vec![
            ScriptedTurn::tool_call("send_email", json!({ "to": "me" })),
            ScriptedTurn::tool_call("send_email", json!({ "to": "everyone" })),
            ScriptedTurn::text("done"),
        ],
        hitl,
    );
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let err = f.agent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    assert_eq!(
        f.email.calls(),
        [json!({ "to": "me" })],
        "the ungated call ran, the gated one waits"
    );
}

#[test]
fn config_builds_and_bad_values_are_rejected_naming_field_value_and_rule() {
    let c: HumanInTheLoopConfig = from_toml_str("interrupt_on = { delete = [\"approve\", \"edit\"] }").unwrap();
    let _: HumanInTheLoopMiddleware = c.into();
    let err = from_toml_str::<HumanInTheLoopConfig>("interrupt_on = { delete = [\"approve\", \"yolo\"] }").unwrap_err();
    assert_eq!(err.errors()[0].path, "interrupt_on.delete");
    assert_eq!(err.errors()[0].value, Some(json!("yolo")));
    assert!(err.errors()[0].rule.contains("one of approve, edit, reject, respond"));
    let err = from_toml_str::<HumanInTheLoopConfig>("interrupt_on = { delete = [] }").unwrap_err();
    assert_eq!(err.errors()[0].rule, "must allow at least one decision");
    let err = from_toml_str::<HumanInTheLoopConfig>("").unwrap_err();
    assert_eq!(err.errors()[0].path, "interrupt_on");
}

#[tokio::test]
async fn decisions_apply_when_the_resumed_batch_runs_concurrently() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let read = RecordingTool::new("read").returning("contents");
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("d1", "delete", json!({ "path": "a.txt" })),
            ToolCall::new("d2", "delete", json!({ "path": "b.txt" })),
            ToolCall::new("r1", "read", json!({ "path": "c.txt" })),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(
            ToolRegistry::new()
                .with(delete.clone())
                .unwrap()
                .with(read.clone())
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(gates()).unwrap())
        .with_concurrent_tools();
    let mut ctx = RunContext::new(RunConfig::new("first"), ());
    assert_eq!(
        agent.run(&mut ctx, &(), "go").await.unwrap_err().kind(),
        ErrorKind::Interrupted
    );
    assert!(delete.calls().is_empty() && read.calls().is_empty());
    let resume = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([
            (
                "d1",
                Decision::Edit {
                    arguments: json!({ "path": "a.bak" }),
                },
            ),
            ("d2", Decision::Reject { message: None }),
        ])
        .unwrap();
    let input = resume.input();
    let mut ctx = RunContext::new(RunConfig::new("second"), ());
    resume.attach(&ctx);
    let run = agent.run(&mut ctx, &(), input).await.unwrap();
    assert_eq!(delete.calls(), [json!({ "path": "a.bak" })]);
    assert_eq!(read.calls().len(), 1);
    assert_eq!(tool_results(&run).len(), 3);
}

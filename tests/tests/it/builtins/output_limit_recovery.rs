//! `output_limit_recovery` (seed 002), one test per step: escalate once to the
//! ceiling (cut reply discarded, usage counted), never past an explicit
//! max_tokens, capped by the context room; continue with a temporary
//! instruction removed after the next uncut reply; stop after
//! max_continuations; thinking-only cut-offs not kept and continued at lower
//! effort; a cut inside a tool call never runs it; one event per step.

use std::sync::Arc;

use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::{DeltaContent, FinishReason, ModelParams, ReasoningEffort};
use tinyagents::harness::tokens::{ApproxTokenCounter, TokenCounter};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn recovery(toml: &str) -> OutputLimitRecoveryMiddleware {
    from_toml_str::<OutputLimitRecoveryConfig>(toml).unwrap().build()
}

fn cut(text: &str, usage: Usage) -> ScriptedTurn {
    ScriptedTurn::Reply(
        ModelResponse::text(text)
            .with_finish_reason(FinishReason::Length)
            .with_usage(usage),
    )
}

fn done(text: &str, usage: Usage) -> ScriptedTurn {
    ScriptedTurn::Reply(ModelResponse::text(text).with_usage(usage))
}

struct Outcome {
    requests: Vec<ModelRequest>,
    run: Result<AgentRun>,
    events: Vec<AgentEvent>,
    ctx: RunContext,
    tool: Arc<RecordingTool>,
}

async fn run(mw: OutputLimitRecoveryMiddleware, params: ModelParams, turns: Vec<ScriptedTurn>) -> Outcome {
    let model = Arc::new(ScriptedModel::new(turns));
    let tool = Arc::new(RecordingTool::new("write"));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_params(params)
        .with_tools({
            let mut tools = ToolRegistry::new();
            tools.register_arc(tool.clone()).unwrap();
            tools
        })
        .with_stack(MiddlewareStack::new().with(mw).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await;
    Outcome {
        requests: model.requests(),
        run,
        events: sink.events(),
        ctx,
        tool,
    }
}

/// (turn, attempt, action, cap_before, cap_after, thinking_only, discarded?)
fn recoveries(events: &[AgentEvent]) -> Vec<(u32, u32, &'static str, u32, u32, bool, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::OutputLimitRecovery {
                turn,
                attempt,
                action,
                cap_before,
                cap_after,
                thinking_only,
                discarded_message_id,
                ..
            } => Some((
                *turn,
                *attempt,
                *action,
                *cap_before,
                *cap_after,
                *thinking_only,
                discarded_message_id.is_some(),
            )),
            _ => None,
        })
        .collect()
}

fn texts(m: &[Message]) -> Vec<String> {
    m.iter().map(|m| m.text().into_owned()).collect()
}

#[tokio::test]
async fn step_1_escalates_once_to_the_ceiling_discarding_the_cut_reply_but_counting_its_usage() {
    let o = run(
        recovery("default_cap = 100\nmodel_output_limit = 400"),
        ModelParams::default(),
        vec![
            cut("partial", Usage::new(10, 100)),
            done("the full answer", Usage::new(10, 50)),
        ],
    )
    .await;
    let run = o.run.unwrap();
    assert_eq!(
        o.requests[0].params.max_tokens,
        Some(100),
        "the first cap is min(default_cap, limit)"
    );
    assert_eq!(o.requests[1].params.max_tokens, Some(400), "retried at the ceiling");
    assert_eq!(
        o.requests[1].messages, o.requests[0].messages,
        "the same request, no instruction"
    );
    assert_eq!(run.final_text(), "the full answer");
    assert!(
        !texts(&run.messages).iter().any(|t| t.contains("partial")),
        "the cut reply never reaches history"
    );
    assert_eq!(run.usage.output_tokens, 150, "the discarded attempt's usage is counted");
    assert_eq!(recoveries(&o.events), [(1, 1, "escalate", 100, 400, false, true)]);
    assert!(o
        .events
        .iter()
        .any(|e| matches!(e, AgentEvent::AttemptDiscarded { attempt: 1, .. })));
}

#[tokio::test]
async fn step_1_never_escalates_past_an_explicit_max_tokens() {
    let params = ModelParams {
        max_tokens: Some(100),
        ..ModelParams::default()
    };
    let o = run(
        recovery("model_output_limit = 400"),
        params,
        vec![cut("Hello wor", Usage::default()), done("ld!", Usage::default())],
    )
    .await;
    o.run.unwrap();
    assert_eq!(o.requests[1].params.max_tokens, Some(100));
    assert_eq!(recoveries(&o.events), [(1, 1, "continue", 100, 100, false, false)]);
}

#[tokio::test]
async fn step_1_is_capped_by_the_room_left_in_the_context_window() {
    let o = run(
        recovery("default_cap = 100\nmodel_output_limit = 4000\ncontext_window = 250"),
        ModelParams::default(),
        vec![cut("partial", Usage::default()), done("ok", Usage::default())],
    )
    .await;
    o.run.unwrap();
    let used = ApproxTokenCounter::default().count_request(&o.requests[0]);
    let room = 250 - used as u32;
    assert_eq!(o.requests[1].params.max_tokens, Some(room));
    assert_eq!(recoveries(&o.events), [(1, 1, "escalate", 100, room, false, true)]);
}

#[tokio::test]
async fn step_2_continues_with_a_temporary_instruction_removed_after_the_next_uncut_reply() {
    let params = ModelParams {
        max_tokens: Some(100),
        ..ModelParams::default()
    };
    let o = run(
        recovery(""),
        params,
        vec![
            cut("Hello wor", Usage::default()),
            ScriptedTurn::Reply(
                ModelResponse::tool_calls(vec![ToolCall::new("c1", "write", serde_json::json!({"path": "a"}))])
                    .with_finish_reason(FinishReason::ToolCalls),
            ),
            done("done", Usage::default()),
        ],
    )
    .await;
    let run = o.run.unwrap();
    // the continuation request: the partial reply, then the instruction with {cap} expanded
    let cont = &o.requests[1].messages;
    assert_eq!(cont.len(), 3);
    assert_eq!((cont[1].role, cont[1].text().as_ref()), (Role::Assistant, "Hello wor"));
    assert_eq!(cont[2].role, Role::User);
    assert!(
        cont[2]
            .text()
            .contains("cut off by the output-token limit (100 tokens)"),
        "{}",
        cont[2].text()
    );
    // the parts are one reply in history; the instruction is not in it, nor in the next turn's request
    let assistant = &run.messages[1];
    assert_eq!(assistant.text(), "Hello wor");
    assert_eq!(assistant.tool_calls.len(), 1);
    for m in run.messages.iter().chain(&o.requests[2].messages) {
        assert!(
            !m.text().contains("output-token limit"),
            "the instruction leaked: {:?}",
            m.text()
        );
    }
    assert_eq!(o.tool.calls().len(), 1);
    assert_eq!(run.final_text(), "done");
    assert_eq!(recoveries(&o.events), [(1, 1, "continue", 100, 100, false, false)]);
}

#[tokio::test]
async fn step_2_continuations_merge_into_one_reply() {
    let params = ModelParams {
        max_tokens: Some(10),
        ..ModelParams::default()
    };
    let o = run(
        recovery("instruction = \"Go on (cap {cap}).\""),
        params,
        vec![
            cut("one ", Usage::new(1, 10)),
            cut("two ", Usage::new(1, 10)),
            done("three", Usage::new(1, 5)),
        ],
    )
    .await;
    let run = o.run.unwrap();
    assert_eq!(run.final_text(), "one two three");
    assert_eq!(texts(&o.requests[2].messages), ["go", "one two ", "Go on (cap 10)."]);
    assert_eq!(run.usage.output_tokens, 25);
    assert_eq!(
        recoveries(&o.events),
        [
            (1, 1, "continue", 10, 10, false, false),
            (1, 2, "continue", 10, 10, false, false)
        ]
    );
}

#[tokio::test]
async fn after_max_continuations_the_turn_stops_with_model_token_limit() {
    let o = run(
        recovery("escalate = false\nmax_continuations = 2"),
        ModelParams::default(),
        vec![
            cut("a", Usage::default()),
            cut("b", Usage::default()),
            cut("c", Usage::default()),
            done("never", Usage::default()),
        ],
    )
    .await;
    let err = o.run.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("model_token_limit"), "{err}");
    assert!(err.to_string().contains("max_continuations = 2"), "{err}");
    assert_eq!(o.requests.len(), 3);
    assert_eq!(recoveries(&o.events).len(), 2);
}

#[tokio::test]
async fn a_thinking_only_cut_is_not_kept_and_continues_at_lower_effort() {
    let thinking = || {
        ScriptedTurn::Deltas(vec![
            ModelDelta::reasoning("Let me think about this at length"),
            ModelDelta::finish(FinishReason::Length),
        ])
    };
    for (configured, expected) in [
        (Some(ReasoningEffort::High), ReasoningEffort::Medium),
        (None, ReasoningEffort::Medium),
        (Some(ReasoningEffort::Low), ReasoningEffort::Low),
    ] {
        let params = ModelParams {
            max_tokens: Some(50),
            reasoning_effort: configured,
            ..ModelParams::default()
        };
        let o = run(recovery(""), params, vec![thinking(), done("answer", Usage::default())]).await;
        let run = o.run.unwrap();
        let cont = &o.requests[1];
        assert_eq!(cont.params.reasoning_effort, Some(expected), "from {configured:?}");
        // only the user's message and the instruction: the reasoning-only reply is not kept
        assert_eq!(cont.messages.len(), 2);
        assert_eq!(cont.messages[1].role, Role::User);
        assert_eq!(run.final_text(), "answer");
        assert_eq!(recoveries(&o.events), [(1, 1, "continue", 50, 50, true, false)]);
    }
    // without lower_effort_on_thinking_only the effort stays
    let params = ModelParams {
        max_tokens: Some(50),
        reasoning_effort: Some(ReasoningEffort::High),
        ..ModelParams::default()
    };
    let o = run(
        recovery("lower_effort_on_thinking_only = false"),
        params,
        vec![thinking(), done("answer", Usage::default())],
    )
    .await;
    o.run.unwrap();
    assert_eq!(o.requests[1].params.reasoning_effort, Some(ReasoningEffort::High));
}

#[tokio::test]
async fn a_reply_cut_inside_a_tool_call_never_runs_that_call() {
    let params = ModelParams {
        max_tokens: Some(30),
        ..ModelParams::default()
    };
    let o = run(
        recovery(""),
        params,
        vec![
            ScriptedTurn::Deltas(vec![
                ModelDelta::text("Writing the file. "),
                ModelDelta::new(DeltaContent::ToolCall {
                    index: 0,
                    id: Some("c1".into()),
                    name: Some("write".into()),
                    arguments: "{\"path\": \"a.txt\", \"content\": \"aaaa".into(),
                }),
                ModelDelta::finish(FinishReason::Length),
            ]),
            done("I will write it in parts.", Usage::default()),
        ],
    )
    .await;
    let run = o.run.unwrap();
    assert!(o.tool.calls().is_empty(), "the unfinished call never runs");
    assert_eq!(run.final_text(), "Writing the file. I will write it in parts.");
    assert!(run.messages.iter().all(|m| m.tool_calls.is_empty()));
    // the continuation asked the model to split its writes
    assert!(o.requests[1].messages[2].text().contains("Split large file writes"));
    let update = o
        .ctx
        .flow()
        .state_updates()
        .iter()
        .find(|u| u.key == "output_limit_recovery")
        .unwrap();
    assert_eq!(update.value["cut_in_tool_call"], true);
}

#[test]
fn bad_configuration_is_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<OutputLimitRecoveryConfig>("instruction = \"  \"\nmax_continuations = 21").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`max_continuations` = 21"), "{text}");
    let err = from_toml_str::<OutputLimitRecoveryConfig>("instruction = \"  \"").unwrap_err();
    assert!(err.to_string().contains("`instruction` = \"  \""), "{err}");
    assert!(err.to_string().contains("must not be empty"), "{err}");
    let err = from_toml_str::<OutputLimitRecoveryConfig>("default_cap = 0\nmodel_output_limit = 0").unwrap_err();
    assert_eq!(err.errors().len(), 2, "{err}");
    let c: OutputLimitRecoveryConfig = from_toml_str("").unwrap();
    assert_eq!(
        (c.escalate, c.max_continuations, c.lower_effort_on_thinking_only),
        (true, 3, true)
    );
    assert_eq!(c.instruction, DEFAULT_CONTINUATION_INSTRUCTION);
}

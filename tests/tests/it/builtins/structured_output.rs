//! `structured_output`: the final reply validated against a JSON Schema; on
//! failure the model is asked again with the errors up to a bound, then a
//! `Validation` error carrying the last errors; the value lands in
//! `AgentRun::structured_output`.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::SegmentStability;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "population": {"type": "integer", "minimum": 0}
        },
        "required": ["city", "population"],
        "additionalProperties": false
    })
}

struct Outcome {
    requests: Vec<ModelRequest>,
    run: Result<AgentRun>,
    events: Vec<AgentEvent>,
    ctx: RunContext,
}

async fn run(mw: StructuredOutputMiddleware, turns: Vec<ScriptedTurn>) -> Outcome {
    let model = Arc::new(ScriptedModel::new(turns));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_system_prompt("You know geography.")
        .with_tools(
            ToolRegistry::new()
                .with(RecordingTool::new("lookup").returning("Lyon: 522250"))
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(mw).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "Tell me about Lyon").await;
    Outcome {
        requests: model.requests(),
        run,
        events: sink.events(),
        ctx,
    }
}

#[tokio::test]
async fn a_valid_reply_becomes_the_structured_output() {
    let o = run(
        StructuredOutputMiddleware::new(schema()).unwrap(),
        vec![ScriptedTurn::text(r#"{"city": "Lyon", "population": 522250}"#)],
    )
    .await;
    let run = o.run.unwrap();
    assert_eq!(
        run.structured_output,
        Some(json!({"city": "Lyon", "population": 522250}))
    );
    // the schema is in the stable prefix, after the agent's stable prompt
    let seg = &o.requests[0].system[1];
    assert_eq!(seg.id, STRUCTURED_OUTPUT_SEGMENT);
    assert_eq!(seg.stability, SegmentStability::Stable);
    assert!(
        seg.text.contains("\"required\":[\"city\",\"population\"]"),
        "{}",
        seg.text
    );
}

#[tokio::test]
async fn an_invalid_reply_is_asked_again_with_the_errors() {
    let o = run(
        StructuredOutputMiddleware::new(schema()).unwrap(),
        vec![
            ScriptedTurn::text(r#"{"city": "Lyon", "population": -3, "mayor": "x"}"#),
            ScriptedTurn::text("```json\n{\"city\": \"Lyon\", \"population\": 522250}\n```"),
        ],
    )
    .await;
    let run = o.run.unwrap();
    assert_eq!(
        run.structured_output,
        Some(json!({"city": "Lyon", "population": 522250}))
    );
    // the re-ask: the rejected reply, then the errors
    let again = &o.requests[1].messages;
    assert_eq!(again.len(), 3);
    assert_eq!(again[1].role, Role::Assistant);
    let ask = again[2].text();
    assert!(ask.contains("at `/population`"), "{ask}");
    assert!(ask.contains("mayor"), "{ask}");
    // history keeps only the valid reply
    assert_eq!(run.messages.len(), 2);
    assert!(run.messages[1].text().contains("522250"));
    assert!(o
        .events
        .iter()
        .any(|e| matches!(e, AgentEvent::AttemptDiscarded { attempt: 1, .. })));
    assert!(o.events.iter().any(
        |e| matches!(e, AgentEvent::Notice { source, message, .. } if source == "structured_output" && message.contains("/population"))
    ));
}

#[tokio::test]
async fn after_max_retries_the_run_fails_with_the_last_errors() {
    let o = run(
        StructuredOutputMiddleware::new(schema()).unwrap().max_retries(1),
        vec![
            ScriptedTurn::text("Lyon is a city in France."),
            ScriptedTurn::text(r#"{"city": "Lyon"}"#),
            ScriptedTurn::text("never asked"),
        ],
    )
    .await;
    let err = o.run.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    let text = err.to_string();
    assert!(text.contains("after 2 attempt(s)"), "{text}");
    assert!(text.contains("population"), "{text}");
    assert_eq!(o.requests.len(), 2);
    let first_ask = o.requests[1].messages[2].text();
    assert!(first_ask.contains("the reply is not JSON"), "{first_ask}");
    let errors = &o
        .ctx
        .flow()
        .state_updates()
        .iter()
        .rev()
        .find(|u| u.key == "structured_output_errors")
        .unwrap()
        .value;
    assert!(errors[0].as_str().unwrap().contains("population"), "{errors}");
}

#[tokio::test]
async fn replies_with_tool_calls_pass_unvalidated() {
    let o = run(
        StructuredOutputMiddleware::new(schema()).unwrap().instruct(false),
        vec![
            ScriptedTurn::tool_call("lookup", json!({"q": "Lyon"})),
            ScriptedTurn::text(r#"{"city": "Lyon", "population": 522250}"#),
        ],
    )
    .await;
    let run = o.run.unwrap();
    assert_eq!(o.requests.len(), 2);
    assert!(o.requests[0].segment(STRUCTURED_OUTPUT_SEGMENT).is_none());
    assert_eq!(run.structured_output.unwrap()["population"], 522250);
}

#[test]
fn bad_schemas_and_options_are_rejected() {
    let err = from_toml_str::<StructuredOutputConfig>("schema = '{\"type\": 12}'\nmax_retries = 11").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`max_retries` = 11"), "{text}");
    let err = from_toml_str::<StructuredOutputConfig>("schema = '{\"type\": 12}'").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`schema`"), "{text}");
    assert!(text.contains("is not a valid JSON Schema"), "{text}");
    let err = from_toml_str::<StructuredOutputConfig>("schema = 'not json'").unwrap_err();
    assert!(err.to_string().contains("is not JSON"), "{err}");
    let err = from_toml_str::<StructuredOutputConfig>("schema = '{\"$ref\": \"https://example.invalid/s.json\"}'")
        .unwrap_err();
    assert!(err.to_string().contains("not allowed"), "{err}");

    let err = StructuredOutputMiddleware::new(json!({"minimum": "zero"})).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);

    let ok: StructuredOutputConfig = from_toml_str("schema = '{\"type\": \"array\"}'").unwrap();
    let mw = ok.build();
    assert_eq!(mw.check("[1, 2]"), Ok(json!([1, 2])));
    assert!(mw.check("{}").unwrap_err()[0].contains("want array"));
}

#[tokio::test]
async fn it_validates_the_merged_reply_of_a_recovered_turn_whatever_the_registration_order() {
    let recovery: OutputLimitRecoveryMiddleware = from_toml_str::<OutputLimitRecoveryConfig>("escalate = false")
        .unwrap()
        .build();
    // registered after recovery, ordered outside it by its `before` declaration
    let stack = MiddlewareStack::new()
        .with(recovery)
        .unwrap()
        .with(StructuredOutputMiddleware::new(schema()).unwrap())
        .unwrap();
    assert_eq!(
        stack.implementors(HookKind::WrapModel),
        ["structured_output", "output_limit_recovery"]
    );
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::Reply(
            ModelResponse::text(r#"{"city": "Ly"#).with_finish_reason(tinyagents::harness::model::FinishReason::Length),
        ),
        ScriptedTurn::text(r#"on", "population": 522250}"#),
    ]));
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(stack);
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "Lyon?")
        .await
        .unwrap();
    assert_eq!(
        run.structured_output,
        Some(json!({"city": "Lyon", "population": 522250}))
    );
    assert_eq!(model.calls(), 2, "continued once, validated once, no re-ask");
}

//! `StructuredOutputMiddleware::for_type::<T>()` and `AgentRun::structured::<T>()`
//! (issue 18, item 1): the schema from the type, replies that match the
//! schema but do not deserialise asked again, the value handed back typed.

use serde::{Deserialize, Deserializer};
use serde_json::json;
use tinyagents::harness::model::ResponseFormat;
use tinyagents::middleware::StructuredOutputMiddleware;
use tinyagents::prelude::*;

fn positive<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<i64, D::Error> {
    let n = i64::deserialize(d)?;
    if n > 0 {
        Ok(n)
    } else {
        Err(serde::de::Error::custom(format!("{n} is not positive")))
    }
}

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct Order {
    /// What to buy.
    item: String,
    /// How many (serde checks it is positive; the schema only says integer).
    #[serde(deserialize_with = "positive")]
    count: i64,
}

async fn run_with(replies: &[&str], so: StructuredOutputMiddleware) -> Result<AgentRun> {
    let model = ScriptedModel::new(replies.iter().map(|r| ScriptedTurn::text(*r)));
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(so)?);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "Order something")
        .await
}

/// One run whose model replies with a valid `Order`, through `structured`
/// and then `probe`.
async fn run_one_order(structured: StructuredOutputMiddleware, probe: impl Middleware<()> + 'static) {
    let model = ScriptedModel::new([ScriptedTurn::text(r#"{"item": "a", "count": 1}"#)]);
    let stack = MiddlewareStack::new().with(structured).unwrap().with(probe).unwrap();
    let agent: Agent<()> = Agent::new(model).with_stack(stack);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "x")
        .await
        .unwrap();
}

#[tokio::test]
async fn a_typed_reply_comes_back_as_the_type() {
    let run = run_with(
        &[r#"{"item": "tea", "count": 2}"#],
        StructuredOutputMiddleware::for_type::<Order>().unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(
        run.structured::<Order>().unwrap(),
        Order {
            item: "tea".into(),
            count: 2
        }
    );
    assert_eq!(run.structured_output, Some(json!({"item": "tea", "count": 2})));
}

#[tokio::test]
async fn a_reply_matching_the_schema_but_not_the_type_is_asked_again() {
    let run = run_with(
        &[r#"{"item": "tea", "count": -3}"#, r#"{"item": "tea", "count": 3}"#],
        StructuredOutputMiddleware::for_type::<Order>().unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(run.structured::<Order>().unwrap().count, 3);
    let asked = run
        .messages
        .iter()
        .any(|m| m.role == Role::User && m.text().contains("-3 is not positive"));
    // The re-ask is sent, not stored: the error reached the model through the request.
    assert!(!asked, "re-asks are never stored in the run's history");
    assert_eq!(run.counters.model_calls, 2);
}

#[tokio::test]
async fn a_type_mismatch_that_persists_fails_naming_the_type() {
    let e = run_with(
        &[r#"{"item": "tea", "count": 0}"#, r#"{"item": "tea", "count": -1}"#],
        StructuredOutputMiddleware::for_type::<Order>().unwrap().max_retries(1),
    )
    .await
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation);
    let msg = e.to_string();
    assert!(
        msg.contains("the reply is not a valid `Order`") && msg.contains("-1 is not positive"),
        "{msg}"
    );
}

#[tokio::test]
async fn reading_the_wrong_type_or_no_output_is_a_validation_error() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Other {
        price: f64,
    }
    let run = run_with(
        &[r#"{"item": "tea", "count": 1}"#],
        StructuredOutputMiddleware::for_type::<Order>().unwrap(),
    )
    .await
    .unwrap();
    let e = run.structured::<Other>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation);
    assert!(
        e.to_string().contains("is not a valid") && e.to_string().contains("price"),
        "{e}"
    );

    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "x")
        .await
        .unwrap();
    let e = run.structured::<Order>().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Validation);
    assert!(e.to_string().contains("has no structured output"), "{e}");
}

#[tokio::test]
async fn each_request_carries_the_native_response_format_unless_turned_off() {
    #[before_model]
    async fn record(request: &mut ModelRequest) -> Result<()> {
        let Some(ResponseFormat::JsonSchema { name, schema, strict }) = request.response_format.clone() else {
            panic!("a JSON Schema response format is set: {:?}", request.response_format);
        };
        assert_eq!(name, "Order");
        assert!(!strict);
        assert_eq!(schema["properties"]["item"]["description"], "What to buy.");
        Ok(())
    }
    // `record` runs after `structured_output`'s own `before_model`.
    run_one_order(StructuredOutputMiddleware::for_type::<Order>().unwrap(), Record).await;

    #[before_model]
    async fn none_set(request: &mut ModelRequest) -> Result<()> {
        assert_eq!(request.response_format, None);
        Ok(())
    }
    run_one_order(
        StructuredOutputMiddleware::for_type::<Order>().unwrap().native(false),
        NoneSet,
    )
    .await;
}

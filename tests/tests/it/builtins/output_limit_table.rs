//! `output_limit_recovery` looks the output limit up per known model: the
//! first cap is `min(32000, limit)` and escalation goes to the model's limit;
//! a code or config override wins; an unknown model gets 32,000 for both.

use std::sync::Arc;

use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::{known_output_limit, FinishReason, OUTPUT_LIMIT_TABLE};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

fn recovery(toml: &str) -> OutputLimitRecoveryMiddleware {
    from_toml_str::<OutputLimitRecoveryConfig>(toml).unwrap().build()
}

/// The `max_tokens` of the first request and of the escalated retry, for a run of `model`.
async fn caps(mw: OutputLimitRecoveryMiddleware, model: &str) -> (Option<u32>, Option<u32>) {
    let model_impl = Arc::new(ScriptedModel::new([
        ScriptedTurn::Reply(ModelResponse::text("partial").with_finish_reason(FinishReason::Length)),
        ScriptedTurn::text("the full answer"),
    ]));
    let agent: Agent<()> = Agent::new(model_impl.clone()).with_stack(MiddlewareStack::new().with(mw).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r").with_model(model), ());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert!(run.final_text().ends_with("the full answer"), "{}", run.final_text());
    let requests = model_impl.requests();
    (requests[0].params.max_tokens, requests[1].params.max_tokens)
}

#[tokio::test]
async fn a_known_model_starts_at_min_32000_and_escalates_to_its_limit() {
    let default = || recovery("");
    assert_eq!(
        caps(default(), "anthropic:claude-sonnet-4-5").await,
        (Some(32_000), Some(64_000))
    );
    // a limit below 32,000 is the first cap: a cut reply there cannot escalate, it continues
    assert_eq!(
        caps(default(), "claude-3-5-haiku-latest").await,
        (Some(8_192), Some(8_192))
    );
}

#[tokio::test]
async fn an_unknown_model_uses_32000_for_both() {
    // cap and ceiling are one: a cut reply continues at the same cap
    assert_eq!(caps(recovery(""), "my-local-model").await, (Some(32_000), Some(32_000)));
}

#[tokio::test]
async fn an_override_in_code_or_config_wins_over_the_table() {
    let code = recovery("").with_output_limit("claude-sonnet-4", 40_000);
    assert_eq!(caps(code, "claude-sonnet-4-5").await, (Some(32_000), Some(40_000)));
    let config = recovery("model_output_limit = 50000");
    assert_eq!(caps(config, "claude-sonnet-4-5").await, (Some(32_000), Some(50_000)));
}

#[test]
fn the_table_is_looked_up_by_the_longest_prefix() {
    assert!(OUTPUT_LIMIT_TABLE.iter().all(|(_, limit)| *limit > 0));
    assert_eq!(known_output_limit("claude-opus-4-1"), Some(32_000));
    assert_eq!(known_output_limit("claude-opus-4-5"), Some(64_000));
    assert_eq!(known_output_limit("openai:gpt-4o-mini"), Some(16_384));
    assert_eq!(known_output_limit("llama3"), None);
    // a row names one model: a newer model of a known family gets the default, not a neighbour's limit
    assert_eq!(known_output_limit("claude-opus-4-20250514"), Some(32_000));
    assert_eq!(known_output_limit("anthropic:claude-opus-4-7"), None);
    assert_eq!(known_output_limit("claude-sonnet-4-6"), None);
}

//! `UsageAccountingMiddleware`: totals folded from every response (cache
//! tokens included), per-run figures with sub-agent usage rolled up, and
//! totals readable while runs go on.

use std::sync::Arc;

use serde_json::json;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use super::support::parent_of;
use tinyagents::testing::trace;

fn usage(input: u64, output: u64, cache_read: u64, cache_write: u64) -> Usage {
    Usage {
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        ..Usage::new(input, output)
    }
}

#[tokio::test]
async fn folds_every_response_with_cache_tokens() {
    let accounting = UsageAccountingMiddleware::new();
    let handle = accounting.clone();
    let model = ScriptedModel::new([
        ScriptedTurn::Reply(
            ModelResponse::tool_calls(vec![ToolCall::new("c1", "ping", json!({}))]).with_usage(usage(100, 10, 50, 20)),
        ),
        ScriptedTurn::Reply(ModelResponse::text("done").with_usage(usage(30, 5, 120, 0))),
    ]);
    let tools = ToolRegistry::new()
        .with(tool_fn("ping", "Pong.", |_cx, _a| async move { Ok("pong".into()) }))
        .unwrap();
    let sink = Arc::new(CollectingSink::new());
    let agent: Agent<()> = Agent::new(model)
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(accounting).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();

    let expected = usage(130, 15, 170, 20);
    assert_eq!(
        handle.totals(),
        UsageTotals {
            usage: expected,
            responses: 2,
            runs: 1
        }
    );
    let per_run = UsageAccountingMiddleware::run_usage(&ctx);
    assert_eq!(per_run.own, expected);
    assert_eq!(per_run.sub_agents, Usage::default(), "a plain tool reports no usage");
    assert_eq!(per_run.total(), run.usage);

    let custom: Vec<_> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::Custom { name, data, .. } if name == "run_usage" => Some(data),
            _ => None,
        })
        .collect();
    assert_eq!(custom.len(), 1);
    assert_eq!(custom[0]["total"]["cache_read_tokens"], 170);
    assert_eq!(custom[0]["total"]["cache_write_tokens"], 20);
    assert!(trace(&sink.events()).contains(&"custom usage_accounting.run_usage".to_owned()));
}

#[tokio::test]
async fn sub_agent_usage_rolls_up_to_the_parent_run() {
    // The child has its own stack with its own accounting: its usage reaches
    // the parent's figures through the tool result.
    let child_accounting = UsageAccountingMiddleware::new();
    let child: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text("child answer").with_usage(usage(40, 4, 8, 2)),
    )]))
    .with_stack(MiddlewareStack::new().with(child_accounting.clone()).unwrap());
    let tools = ToolRegistry::new()
        .with(AgentTool::new(Arc::new(child), "helper", "A helper.", || ((), ())))
        .unwrap();
    let parent_accounting = UsageAccountingMiddleware::new();
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::Reply(
            ModelResponse::tool_calls(vec![ToolCall::new("c1", "helper", json!({"input": "help"}))])
                .with_usage(usage(10, 1, 0, 0)),
        ),
        ScriptedTurn::Reply(ModelResponse::text("parent answer").with_usage(usage(20, 2, 0, 0))),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::new().with(parent_accounting.clone()).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("p"), ());
    let run = parent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "parent answer");

    let per_run = UsageAccountingMiddleware::run_usage(&ctx);
    assert_eq!(per_run.own, usage(30, 3, 0, 0));
    assert_eq!(per_run.sub_agents, usage(40, 4, 8, 2));
    assert_eq!(per_run.total(), run.usage);
    assert_eq!(parent_accounting.totals().usage, usage(30, 3, 0, 0));
    assert_eq!(child_accounting.totals().usage, usage(40, 4, 8, 2));
}

#[tokio::test]
async fn a_shared_stack_counts_the_sub_agent_live_in_the_totals() {
    let accounting = UsageAccountingMiddleware::new();
    let stack = Arc::new(MiddlewareStack::new().with(accounting.clone()).unwrap());
    let child: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text("child").with_usage(usage(7, 1, 0, 3)),
    )]))
    .with_shared_stack(stack.clone());
    let parent = parent_of(child, stack);
    let mut ctx = RunContext::new(RunConfig::new("p"), ());
    parent.run(&mut ctx, &(), "go").await.unwrap();
    let totals = accounting.totals();
    assert_eq!(totals.usage, usage(7, 1, 0, 3));
    assert_eq!(
        (totals.responses, totals.runs),
        (3, 2),
        "parent 2 + child 1 responses; two runs"
    );
    assert_eq!(UsageAccountingMiddleware::run_usage(&ctx).sub_agents, usage(7, 1, 0, 3));
}

#[tokio::test]
async fn a_failed_call_adds_nothing_and_totals_are_read_between_runs() {
    let accounting = UsageAccountingMiddleware::new();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::Reply(ModelResponse::text("one").with_usage(usage(5, 1, 0, 0))),
        ScriptedTurn::Fail(TinyAgentsError::model("down", false)),
    ]))
    .with_stack(MiddlewareStack::new().with(accounting.clone()).unwrap());
    agent
        .run(&mut RunContext::new(RunConfig::new("a"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(accounting.totals().usage, usage(5, 1, 0, 0));
    let mut ctx = RunContext::new(RunConfig::new("b"), ());
    assert!(agent.run(&mut ctx, &(), "go").await.is_err());
    assert_eq!(accounting.totals().usage, usage(5, 1, 0, 0));
    assert_eq!(accounting.totals().responses, 1);
    assert_eq!(accounting.totals().runs, 2);
    assert_eq!(UsageAccountingMiddleware::run_usage(&ctx), RunUsage::default());
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "usage_accounting").unwrap();
    assert_eq!(
        doc.hooks,
        [HookKind::AfterAgent, HookKind::AfterModel, HookKind::WrapTool]
    );
}

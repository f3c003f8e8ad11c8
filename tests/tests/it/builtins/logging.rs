//! `LoggingMiddleware`: a `tracing` event per hook, no content unless opted
//! in, errors at WARN, and `HookCounts` readable while runs go on.

use crate::capture;

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tokio::sync::Notify;

fn agent(logging: LoggingMiddleware, turns: Vec<ScriptedTurn>, tools: ToolRegistry) -> Agent<()> {
    Agent::new(ScriptedModel::new(turns))
        .with_tools(tools)
        .with_stack(MiddlewareStack::empty().with(logging).unwrap())
}

fn lookup_tool() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("lookup", "Looks up.", |_cx, _args| async move {
            Ok("secret result".into())
        }))
        .unwrap()
}

fn turns() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_call("lookup", json!({"q": "secret query"})),
        ScriptedTurn::text("secret answer"),
    ]
}

#[tokio::test]
async fn counts_every_hook_and_logs_without_content_by_default() {
    let (captured, _guard) = capture::capture();
    let logging = LoggingMiddleware::new();
    let counts = logging.counts();
    let agent = agent(logging, turns(), lookup_tool());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r1"), ()), &(), "secret question")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "secret answer");

    assert_eq!(
        counts.snapshot(),
        [
            (HookKind::BeforeAgent, 1),
            (HookKind::AfterAgent, 1),
            (HookKind::BeforeModel, 2),
            (HookKind::AfterModel, 2),
            (HookKind::BeforeTool, 1),
            (HookKind::AfterTool, 1),
        ]
    );
    assert_eq!(counts.total(), 8);

    let events: Vec<_> = captured
        .events()
        .into_iter()
        .filter(|e| e.target == "tinyagents::logging")
        .collect();
    let messages: Vec<&str> = events.iter().map(|e| e.message()).collect();
    assert_eq!(messages, capture::LOGGING_ONE_TOOL_CALL);
    assert!(events.iter().all(|e| e.level == tracing::Level::INFO));
    assert_eq!(events[3].fields["tool"], "lookup");
    assert_eq!(events[4].fields["bytes"], "13");
    let everything = format!("{events:?}");
    assert!(!everything.contains("secret"), "no content by default: {everything}");
}

#[tokio::test]
async fn content_is_logged_only_when_opted_in() {
    let (captured, _guard) = capture::capture();
    let config: LoggingConfig = from_toml_str("level = \"debug\"\ninclude_content = true").unwrap();
    let agent = agent(config.build(), turns(), lookup_tool());
    agent
        .run(&mut RunContext::new(RunConfig::new("r1"), ()), &(), "secret question")
        .await
        .unwrap();
    let events: Vec<_> = captured
        .events()
        .into_iter()
        .filter(|e| e.target == "tinyagents::logging")
        .collect();
    assert!(events.iter().all(|e| e.level == tracing::Level::DEBUG));
    let by_message = |m: &str| events.iter().find(|e| e.message() == m).unwrap().fields.clone();
    assert_eq!(by_message("model request")["last"], "secret question");
    assert_eq!(by_message("tool call")["arguments"], r#"{"q":"secret query"}"#);
    assert_eq!(by_message("tool result")["content"], "secret result");
    assert!(events
        .iter()
        .any(|e| e.fields.get("text").map(String::as_str) == Some("secret answer")));
}

#[tokio::test]
async fn a_failure_is_logged_once_at_warn_and_counted() {
    let (captured, _guard) = capture::capture();
    let logging = LoggingMiddleware::new().with_level(tracing::Level::DEBUG);
    let counts = logging.counts();
    let agent = agent(
        logging,
        vec![ScriptedTurn::Fail(TinyAgentsError::model("upstream down", false))],
        ToolRegistry::new(),
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r1"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    assert_eq!(counts.get(HookKind::OnError), 1);
    assert_eq!(counts.get(HookKind::AfterModel), 0);
    let errors: Vec<_> = captured
        .events()
        .into_iter()
        .filter(|e| e.message() == "error")
        .collect();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].level, tracing::Level::WARN);
    assert_eq!(errors[0].fields["kind"], "model");
    assert!(errors[0].fields["error"].contains("upstream down"));
}

#[tokio::test]
async fn counts_are_readable_while_runs_go_on() {
    let gate = Arc::new(Notify::new());
    let entered = Arc::new(Notify::new());
    let (g, e) = (gate.clone(), entered.clone());
    let tools = ToolRegistry::new()
        .with(tool_fn("wait", "Waits for the gate.", move |_cx, _args| {
            let (g, e) = (g.clone(), e.clone());
            async move {
                e.notify_one();
                g.notified().await;
                Ok("open".into())
            }
        }))
        .unwrap();
    let logging = LoggingMiddleware::new();
    let counts = logging.counts();
    let agent = Arc::new(agent(
        logging,
        vec![ScriptedTurn::tool_call("wait", json!({})), ScriptedTurn::text("done")],
        tools,
    ));
    let a = agent.clone();
    let run = tokio::spawn(async move { a.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go").await });
    entered.notified().await;
    // the run is parked inside the tool call: the counts show where it is
    assert_eq!(counts.get(HookKind::BeforeTool), 1);
    assert_eq!(counts.get(HookKind::AfterTool), 0);
    assert_eq!(counts.get(HookKind::AfterAgent), 0);
    gate.notify_one();
    run.await.unwrap().unwrap();
    assert_eq!(counts.get(HookKind::AfterTool), 1);
    assert_eq!(counts.get(HookKind::AfterAgent), 1);
}

#[test]
fn a_bad_level_is_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<LoggingConfig>("level = \"loud\"").unwrap_err();
    let e = &err.errors()[0];
    assert_eq!(e.path, "level");
    assert_eq!(e.value, Some(json!("loud")));
    assert!(e.rule.contains("must be one of"), "{}", e.rule);
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "logging").unwrap();
    assert_eq!(doc.config_type, Some("logging"));
    assert!(doc.hooks.contains(&HookKind::OnError));
    assert!(!doc.hooks.contains(&HookKind::OnModelDelta));
}

/// Every built-in of the observe, resilience and limits folders goes in a
/// stack of any state and context type, and runs there.
#[tokio::test(start_paused = true)]
async fn the_builtins_fit_any_state_and_context() {
    #[derive(Clone)]
    struct AppState;
    #[derive(Clone)]
    struct AppCtx(u64);
    let backup: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new([ScriptedTurn::text("unused")]));
    let stack: MiddlewareStack<AppState, AppCtx> = MiddlewareStack::empty()
        .with(TracingMiddleware::new())
        .and_then(|s| s.with(LoggingMiddleware::new()))
        .and_then(|s| s.with(UsageAccountingMiddleware::new()))
        .and_then(|s| s.with(ModelFallbackMiddleware::new([backup])))
        .and_then(|s| s.with(ModelRetryMiddleware::new()))
        .and_then(|s| s.with(ToolRetryMiddleware::new()))
        .and_then(|s| s.with(RateLimiterMiddleware::new(100.0, 10)))
        .and_then(|s| s.with(TimeoutMiddleware::new().model(std::time::Duration::from_secs(5))))
        .and_then(|s| s.with(ModelCallLimitMiddleware::per_run(5)))
        .and_then(|s| s.with(ToolCallLimitMiddleware::per_run(None, 5)))
        .and_then(|s| s.with(LimitsMiddleware::new().max_turns(5)))
        .unwrap();
    assert_eq!(stack.len(), 11);
    let agent: Agent<AppState, AppCtx> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("lookup", json!({})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(lookup_tool())
    .with_stack(stack);
    let mut ctx = RunContext::new(RunConfig::new("r"), AppCtx(7));
    let run = agent.run(&mut ctx, &AppState, "go").await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(ctx.context().0, 7);
}

//! `DynamicToolSelectionMiddleware`: the predicate form, and the model-based
//! selector (at most `max_tools`, `always_include` kept, invented names
//! ignored with an event, usage counted, failures clear), and configuration.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

fn request(tools: &[&str], user: &str) -> ModelRequest {
    ModelRequest::new(vec![Message::user(user)]).with_tools(
        tools
            .iter()
            .map(|n| ToolSchema::new(*n, format!("Does {n}.")))
            .collect(),
    )
}

async fn select(
    mw: DynamicToolSelectionMiddleware,
    req: ModelRequest,
) -> (Result<Vec<String>>, Vec<AgentEvent>, Usage) {
    let stack: MiddlewareStack<()> = MiddlewareStack::new().with(mw).unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let mut req = req;
    let r = stack
        .run_before_model(&mut ctx, &(), &mut req)
        .await
        .map(|()| req.tools.iter().map(|t| t.name.clone()).collect());
    (r, sink.events(), *ctx.usage())
}

fn custom<'a>(events: &'a [AgentEvent], wanted: &str) -> Option<&'a serde_json::Value> {
    events.iter().find_map(|e| match e {
        AgentEvent::Custom { name, data, .. } if name == wanted => Some(data),
        _ => None,
    })
}

/// `ping` and `pong`.
fn ping_pong() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("ping", "Pong.", |_cx, _a| async move { Ok("pong".into()) }))
        .unwrap()
        .with(tool_fn("pong", "Ping.", |_cx, _a| async move { Ok("ping".into()) }))
        .unwrap()
}

/// A price budget of `max_price_usd` (input at $1 a million tokens) around
/// a selection of one tool by `selector`.
fn priced_selection(selector: Arc<dyn ChatModel>, max_price_usd: &str) -> MiddlewareStack<()> {
    MiddlewareStack::new()
        .with(limits(&format!(
            "max_price_usd = {max_price_usd}\ninput_cost_per_million = 1.0\noutput_cost_per_million = 0.0"
        )))
        .unwrap()
        .with(DynamicToolSelectionMiddleware::from_model(selector, 1))
        .unwrap()
}

#[tokio::test]
async fn the_predicate_form_sees_each_tool_and_the_request() {
    let mw = DynamicToolSelectionMiddleware::from_predicate(|tool, req| {
        let last = req.messages.last().map(|m| m.text().into_owned()).unwrap_or_default();
        !tool.name.starts_with("math_") || last.chars().any(|c| c.is_ascii_digit())
    })
    .always_include(["math_help"]);
    let tools = ["search", "math_add", "math_help"];
    let (r, events, _) = select(mw.clone(), request(&tools, "what is the weather")).await;
    assert_eq!(r.unwrap(), ["search", "math_help"]);
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::ToolsFiltered { excluded, .. } if excluded == &["math_add"])));
    let (r, _, _) = select(mw, request(&tools, "add 2 and 3")).await;
    assert_eq!(r.unwrap(), tools);
}

#[tokio::test]
async fn the_selector_model_picks_at_most_max_tools_and_always_include_is_kept() {
    let selector = Arc::new(ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text(r#"{"tools": ["weather", "calendar", "email", "maps"]}"#).with_usage(Usage::new(40, 9)),
    )]));
    let mw = DynamicToolSelectionMiddleware::from_model(selector.clone(), 2).always_include(["search"]);
    let tools = ["search", "weather", "calendar", "email", "maps", "shell"];
    let (r, events, usage) = select(mw, request(&tools, "plan my day")).await;
    assert_eq!(
        r.unwrap(),
        ["search", "weather", "calendar"],
        "max 2 picked, plus the always-included tool"
    );
    assert_eq!(
        custom(&events, "selection_truncated").unwrap()["dropped"],
        json!(["email", "maps"])
    );
    assert_eq!(usage, Usage::new(40, 9), "the selector's usage counts toward the run");
    // the selector saw the user's question and every candidate but the always-included one
    let asked = &selector.requests()[0];
    assert_eq!(asked.messages[0].text(), "plan my day");
    let prompt = asked.system_prompt();
    assert!(
        prompt.contains("at most 2") && prompt.contains("- shell: Does shell."),
        "{prompt}"
    );
    assert!(!prompt.contains("- search:"), "{prompt}");
}

#[tokio::test]
async fn invented_names_are_ignored_with_an_event_and_plain_lists_parse() {
    let selector = Arc::new(ScriptedModel::new([ScriptedTurn::text(
        "- weather\n- rm_rf_everything\n- `maps`",
    )]));
    let mw = DynamicToolSelectionMiddleware::from_model(selector, 3);
    let (r, events, _) = select(mw, request(&["weather", "maps", "shell"], "go")).await;
    assert_eq!(r.unwrap(), ["weather", "maps"]);
    assert_eq!(
        custom(&events, "unknown_tools_selected").unwrap()["names"],
        json!(["rm_rf_everything"])
    );
    // nothing known selected: only always_include survives
    let selector = Arc::new(ScriptedModel::new([ScriptedTurn::text("[\"nope\"]")]));
    let mw = DynamicToolSelectionMiddleware::from_model(selector, 3).always_include(["search"]);
    let (r, _, _) = select(mw, request(&["search", "weather"], "go")).await;
    assert_eq!(r.unwrap(), ["search"]);
}

#[tokio::test]
async fn a_selector_failure_is_a_clear_classified_error() {
    let selector = Arc::new(ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model(
        "overloaded",
        true,
    ))]));
    let mw = DynamicToolSelectionMiddleware::from_model(selector, 2);
    let (r, _, _) = select(mw, request(&["a", "b", "c"], "go")).await;
    let err = r.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(
        err.is_retryable(),
        "the classification survives, so retry middleware applies"
    );
}

#[tokio::test]
async fn in_a_run_the_main_model_sees_only_the_selection() {
    let selector = Arc::new(ScriptedModel::new([ScriptedTurn::text("{\"tools\": [\"b\"]}")]));
    let main = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let tools = ToolRegistry::new()
        .with(tool_fn("a", "A.", |_cx, _| async { Ok("a".into()) }))
        .unwrap()
        .with(tool_fn("b", "B.", |_cx, _| async { Ok("b".into()) }))
        .unwrap();
    let agent: Agent<()> = Agent::new(main.clone()).with_tools(tools).with_stack(
        MiddlewareStack::new()
            .with(DynamicToolSelectionMiddleware::from_model(selector, 1))
            .unwrap(),
    );
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap();
    let names: Vec<String> = main.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["b"]);
}

#[test]
fn config_is_checked_naming_field_value_and_rule() {
    let c: DynamicToolSelectionConfig = from_toml_str("max_tools = 2\nalways_include = [\"search\"]").unwrap();
    let selector = Arc::new(ScriptedModel::new([ScriptedTurn::text("[]")]));
    let _ = DynamicToolSelectionMiddleware::from_config(c, selector);
    let err = from_toml_str::<DynamicToolSelectionConfig>("max_tools = 0").unwrap_err();
    assert_eq!(err.errors()[0].path, "max_tools");
    assert_eq!(err.errors()[0].value, Some(json!(0)));
    assert_eq!(err.errors()[0].rule, "must be in 1..=128");
}

fn limits(toml: &str) -> LimitsMiddleware {
    from_toml_str::<LimitsConfig>(toml).unwrap().build()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// The selector model of `dynamic_tool_selection` is a paid model call made
/// before every turn: checked against the price cap and charged to it, as
/// the built-in summarisers are.
#[tokio::test]
async fn the_tool_selector_s_model_calls_are_charged_to_the_price_budget() {
    let selector = Arc::new(
        ScriptedModel::from_fn(|_| {
            ScriptedTurn::Reply(ModelResponse::text(r#"{"tools": ["ping"]}"#).with_usage(Usage::new(1_000_000, 0)))
        })
        .with_id("selector"),
    );
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text("done").with_usage(Usage::new(0, 0)),
    )]));
    let (tools, stack) = (ping_pong(), priced_selection(selector, "100.0"));
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    Agent::<()>::new(model)
        .with_tools(tools)
        .with_stack(stack)
        .run(&mut ctx, &(), "go")
        .await
        .unwrap();
    assert_eq!(ctx.usage().input_tokens, 1_000_000, "the selector's call was paid");
    let budget = LimitsMiddleware::budget(&ctx);
    assert!(
        close(budget.spent_usd.unwrap_or(0.0), 1.0),
        "the selector's $1 counts against max_price_usd: {budget:?}"
    );
}

/// At the price cap the selector is not asked: its call is refused like any
/// other paid attempt (here the run's first reply spent past the cap; the
/// selector, free so far, is not asked for the second turn).
#[tokio::test]
async fn the_tool_selector_is_not_asked_past_the_price_cap() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let asked = Arc::new(AtomicUsize::new(0));
    let count = asked.clone();
    let selector = Arc::new(
        ScriptedModel::from_fn(move |_| {
            count.fetch_add(1, Ordering::SeqCst);
            ScriptedTurn::Reply(ModelResponse::text(r#"{"tools": ["ping"]}"#).with_usage(Usage::new(0, 0)))
        })
        .with_id("selector"),
    );
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::Reply(
            ModelResponse::tool_calls(vec![ToolCall::new("c1", "ping", json!({}))])
                .with_usage(Usage::new(1_000_000, 0)),
        ),
        ScriptedTurn::text("done"),
    ]));
    let (tools, stack) = (ping_pong(), priced_selection(selector, "0.5"));
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let err = Agent::<()>::new(model.clone())
        .with_tools(tools)
        .with_stack(stack)
        .run(&mut ctx, &(), "go")
        .await
        .expect_err("the first reply spent past the cap");
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the selector was asked for the first turn only: {err}"
    );
    assert_eq!(model.requests().len(), 1, "no model call past the cap");
}

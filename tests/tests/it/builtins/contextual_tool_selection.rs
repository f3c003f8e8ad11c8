//! `ContextualToolSelectionMiddleware`: the seed's example as written, the
//! predicate over the live run, the lists (fail closed for unknown tools), the
//! `ToolsFiltered` event, and configuration.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

fn schema(name: &str) -> ToolSchema {
    ToolSchema::new(name, format!("The tool {name}."))
}

fn request(names: &[&str]) -> ModelRequest {
    ModelRequest::default().with_tools(names.iter().map(|n| schema(n)).collect())
}

async fn run_before_model(
    mw: ContextualToolSelectionMiddleware,
    config: RunConfig,
    names: &[&str],
) -> (Vec<String>, Vec<AgentEvent>) {
    let stack: MiddlewareStack<()> = MiddlewareStack::new().with(mw).unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(config, ()).with_sink(sink.clone());
    let mut req = request(names);
    stack.run_before_model(&mut ctx, &(), &mut req).await.unwrap();
    (
        req.into_fields().tools.into_iter().map(|t| t.name).collect(),
        sink.events(),
    )
}

/// Seed 000, "Tool exposure", as written.
#[tokio::test]
async fn the_seed_example_holds_as_written() {
    use tinyagents::harness::middleware::ContextualToolSelectionMiddleware;

    // Parent allows {a,b,c} and denies {c}; child tries to allow {b,c,d}.
    // Effective allow = {a,b,c} ∩ {b,c,d} = {b,c}; deny adds parent's c -> {c}.
    // So only `b` survives (`d` was never parent-allowed, `c` is parent-denied).
    #[rustfmt::skip] // the seed's layout, line for line
    let mw = ContextualToolSelectionMiddleware::inheriting(
        Some(["a", "b", "c"]), ["c"],
        Some(["b", "c", "d"]), Vec::<String>::new(),
    );
    // After run_before_model, request.tools == [schema("b")].
    let stack: MiddlewareStack<()> = MiddlewareStack::new().with(mw).unwrap();
    let mut req = request(&["a", "b", "c", "d", "e"]);
    stack
        .run_before_model(&mut RunContext::new(RunConfig::new("r"), ()), &(), &mut req)
        .await
        .unwrap();
    assert_eq!(req.tools, [schema("b")]);
}

#[tokio::test]
async fn inheriting_only_narrows_in_every_combination() {
    let all = ["a", "b", "c", "d"];
    let none: Option<Vec<&str>> = None;
    // parent unrestricted, child restricts: the child's restriction holds
    let (seen, _) = run_before_model(
        ContextualToolSelectionMiddleware::inheriting(none.clone(), ["d"], Some(["a", "b"]), ["b"]),
        RunConfig::new("r"),
        &all,
    )
    .await;
    assert_eq!(seen, ["a"]);
    // parent restricts, child unrestricted: the parent's restriction holds
    let (seen, _) = run_before_model(
        ContextualToolSelectionMiddleware::inheriting(Some(["a", "b"]), Vec::<String>::new(), none.clone(), ["x"]),
        RunConfig::new("r"),
        &all,
    )
    .await;
    assert_eq!(seen, ["a", "b"]);
    // a child allowing everything the parent denied gets none of it
    let (seen, _) = run_before_model(
        ContextualToolSelectionMiddleware::inheriting(
            none.clone(),
            ["a", "b", "c", "d"],
            Some(["a", "b", "c", "d"]),
            Vec::<String>::new(),
        ),
        RunConfig::new("r"),
        &all,
    )
    .await;
    assert!(seen.is_empty());
    // disjoint allow lists: nothing
    let (seen, _) = run_before_model(
        ContextualToolSelectionMiddleware::inheriting(
            Some(["a"]),
            Vec::<String>::new(),
            Some(["b"]),
            Vec::<String>::new(),
        ),
        RunConfig::new("r"),
        &all,
    )
    .await;
    assert!(seen.is_empty());
}

#[tokio::test]
async fn from_lists_hides_denied_and_unlisted_tools_and_reports_them() {
    let (seen, events) = run_before_model(
        ContextualToolSelectionMiddleware::from_lists(Some(["search", "read", "shell"]), ["shell"]),
        RunConfig::new("r"),
        &["search", "read", "shell", "brand_new_tool"],
    )
    .await;
    assert_eq!(seen, ["search", "read"]);
    let filtered: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolsFiltered {
                by,
                excluded,
                remaining,
            } => Some((by.clone(), excluded.clone(), remaining.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        filtered,
        [(
            "contextual_tool_selection".to_owned(),
            vec!["shell".to_owned(), "brand_new_tool".to_owned()],
            vec!["search".to_owned(), "read".to_owned()]
        )]
    );
    // no allow list: only the deny list applies, and nothing hidden means no event
    let (seen, events) = run_before_model(
        ContextualToolSelectionMiddleware::from_lists(None::<Vec<String>>, ["x"]),
        RunConfig::new("r"),
        &["a", "b"],
    )
    .await;
    assert_eq!(seen, ["a", "b"]);
    assert!(!events.iter().any(|e| matches!(e, AgentEvent::ToolsFiltered { .. })));
}

#[tokio::test]
async fn the_predicate_sees_depth_tags_and_requested_model() {
    let mw = || {
        ContextualToolSelectionMiddleware::new(|tool, cx| {
            let low_tier = cx.tags.iter().any(|t| t == "tier:low");
            let small = cx.requested_model == Some("small");
            match tool.name.as_str() {
                "spawn_agent" => cx.depth == 0,
                "shell" => !low_tier,
                "code_interpreter" => !small,
                _ => !cx.run_id.is_empty(),
            }
        })
    };
    let tools = ["spawn_agent", "shell", "code_interpreter", "search"];
    let (seen, _) = run_before_model(mw(), RunConfig::new("top"), &tools).await;
    assert_eq!(seen, tools);
    let parent = RunContext::new(RunConfig::new("top").with_tag("tier:low").with_model("small"), ()).as_parent();
    let (seen, _) = run_before_model(mw(), RunConfig::child_of(&parent, "child"), &tools).await;
    assert_eq!(seen, ["search"]);
}

#[tokio::test]
async fn in_a_run_the_model_never_sees_a_hidden_tool() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let tools = ToolRegistry::new()
        .with(tool_fn("a", "A.", |_cx, _| async { Ok("a".into()) }))
        .unwrap()
        .with(tool_fn("b", "B.", |_cx, _| async { Ok("b".into()) }))
        .unwrap();
    let agent: Agent<()> = Agent::new(model.clone()).with_tools(tools).with_stack(
        MiddlewareStack::new()
            .with(ContextualToolSelectionMiddleware::from_lists(
                Some(["b"]),
                Vec::<String>::new(),
            ))
            .unwrap(),
    );
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap();
    let names: Vec<String> = model.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(names, ["b"]);
}

#[test]
fn config_builds_lists_and_rejects_bad_values() {
    let c: ContextualToolSelectionConfig = from_toml_str("allow = [\"a\"]\ndeny = [\"b\"]").unwrap();
    let mw = c.build();
    let lists = mw.lists().unwrap();
    assert!(lists.permits("a") && !lists.permits("b") && !lists.permits("c"));
    let err = from_toml_str::<ContextualToolSelectionConfig>("allow = \"a\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "allow");
    assert_eq!(err.errors()[0].value, Some(json!("a")));
    assert!(err.errors()[0].rule.contains("must be"), "{}", err.errors()[0].rule);
}

//! Middleware contribute tools (issue 18, item 1): registered with the stack
//! when the middleware is, offered by the agent next to its own tools; a
//! tool name contributed twice, or both contributed and given, is an error
//! naming both.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{BuildMiddleware, MiddlewareConfig};
use tinyagents::middleware::OutputCompressionConfig;
use tinyagents::prelude::*;

/// Looks a word up.
#[tool]
async fn lookup(word: String) -> Result<String> {
    Ok(format!("{word}: a word"))
}

/// A DSL middleware that brings its own tool.
#[derive(Default)]
struct Dictionary;

#[middleware(name = "dictionary", tools = Self::tools_of)]
impl Dictionary {
    #[before_model]
    fn note(&self, request: &mut ModelRequest) -> Result<()> {
        request.set_volatile("dictionary", "Use `lookup` for unknown words.");
        Ok(())
    }
}

impl Dictionary {
    fn tools_of(&self) -> Vec<Arc<dyn Tool>> {
        vec![Arc::new(Lookup)]
    }
}

/// A hand-written middleware contributing a tool of the same name.
struct Other(&'static str);

#[async_trait::async_trait]
impl Middleware<()> for Other {
    fn name(&self) -> &str {
        self.0
    }
    fn hooks(&self) -> HookSet {
        HookSet::empty()
    }
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![Arc::new(Lookup)]
    }
}

#[tokio::test]
async fn a_contributed_tool_is_offered_and_runs() {
    let model = ScriptedModel::from_fn(|request: &ModelRequest| {
        let names: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        match request.messages.last().unwrap().role {
            Role::User => {
                assert_eq!(
                    names,
                    ["own", "lookup"],
                    "the agent's tools first, then the contributed ones"
                );
                ScriptedTurn::tool_call("lookup", json!({"word": "zephyr"}))
            }
            _ => ScriptedTurn::text(request.messages.last().unwrap().text().into_owned()),
        }
    });
    let own = tool_fn("own", "Its own tool.", |_cx, _args| async { Ok("own".into()) });
    let stack = MiddlewareStack::new().with(Dictionary).unwrap();
    assert_eq!(
        stack
            .contributed_tools()
            .map(|(m, t)| (m, t.schema().name.as_str()))
            .collect::<Vec<_>>(),
        [("dictionary", "lookup")]
    );
    let agent: Agent<()> = Agent::new(model)
        .with_stack(stack)
        .with_tools(ToolRegistry::new().with(own).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "What is a zephyr?")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "zephyr: a word");
}

#[test]
fn one_tool_name_contributed_twice_is_a_registration_error_naming_both() {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
    stack.add(Dictionary).unwrap();
    let e = stack.add(Other("thesaurus")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    let msg = e.to_string();
    assert!(
        msg.contains("middleware `thesaurus` contributes a tool named `lookup`")
            && msg.contains("middleware `dictionary` already contributes one"),
        "{msg}"
    );
    // The refused middleware is not half registered.
    assert!(!stack.names().contains(&"thesaurus"), "{:?}", stack.names());
    assert!(stack.names().contains(&"dictionary"));
    assert_eq!(
        stack.contributed_tools().map(|(m, _)| m).collect::<Vec<_>>(),
        ["dictionary"]
    );
}

#[tokio::test]
async fn a_tool_both_given_and_contributed_fails_every_run_before_the_model_is_called() {
    let model = ScriptedModel::from_fn(|_: &ModelRequest| panic!("the model is never called"));
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(Lookup).unwrap())
        .with_stack(MiddlewareStack::new().with(Dictionary).unwrap());
    let e = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "x")
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    let msg = e.to_string();
    assert!(
        msg.contains("middleware `dictionary` contributes a tool named `lookup`") && msg.contains("`with_tools`"),
        "{msg}"
    );
}

#[test]
fn output_compression_brings_its_artifact_reader_unless_told_not_to() {
    let with: Agent<()> = Agent::new(ScriptedModel::new([])).with_stack(
        MiddlewareStack::new()
            .with(OutputCompressionConfig::defaults().unwrap().build())
            .unwrap(),
    );
    assert_eq!(with.tools().names().collect::<Vec<_>>(), ["read_artifact"]);
    let without: Agent<()> = Agent::new(ScriptedModel::new([])).with_stack(
        MiddlewareStack::new()
            .with(OutputCompressionConfig::defaults().unwrap().build().without_reader())
            .unwrap(),
    );
    assert!(without.tools().is_empty());
}

//! Tool-name aliases: declared once on the registry, resolved by the loop
//! when a call comes off the model's reply, before any hook sees it. Every
//! hook and the result see the tool's name; the model's reply in the
//! transcript keeps the name it wrote; an unknown name stays unknown; a
//! mistaken declaration is a `Config` error naming the names and the fix.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// The tool names each lifecycle hook of the tool path saw.
#[derive(Default)]
struct Names(Mutex<Vec<String>>);

#[async_trait::async_trait]
impl Middleware<()> for Names {
    fn hooks(&self) -> HookSet {
        HookSet::ON_TOOL_BATCH | HookSet::BEFORE_TOOL | HookSet::ON_PREPARED_TOOL_CALLS | HookSet::AFTER_TOOL
    }
    async fn on_tool_batch(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        let mut seen = self.0.lock().unwrap();
        seen.extend(batch.calls().iter().map(|p| format!("batch {}", p.call.name)));
        Ok(())
    }
    async fn before_tool(&self, _: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
        self.0.lock().unwrap().push(format!("before {}", call.name));
        Ok(())
    }
    async fn on_prepared_tool_calls(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        let mut seen = self.0.lock().unwrap();
        seen.extend(batch.calls().iter().map(|p| format!("prepared {}", p.call.name)));
        Ok(())
    }
    async fn after_tool(&self, _: &mut RunContext, _: &(), result: &mut ToolResult) -> Result<()> {
        self.0.lock().unwrap().push(format!("after {}", result.name));
        Ok(())
    }
}

#[tokio::test]
async fn a_call_under_an_alias_is_the_tools_call_for_every_hook() {
    let read = RecordingTool::new("read_file").returning("contents");
    let tools = ToolRegistry::new()
        .with(read.clone())
        .unwrap()
        .with_alias("read_tool", "read_file")
        .unwrap();
    let names = Arc::new(Names::default());
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.add_shared(names.clone()).unwrap();
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "read_tool", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model).with_tools(tools).with_stack(stack);
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(read.calls(), [json!({"path": "a.txt"})], "the tool ran");
    assert_eq!(
        *names.0.lock().unwrap(),
        [
            "batch read_file",
            "before read_file",
            "prepared read_file",
            "after read_file"
        ]
    );
    // the model's reply keeps the name it wrote; its result answers it by id
    assert_eq!(run.messages[1].tool_calls[0].name, "read_tool");
    assert_eq!(run.messages[2].tool_call_id.as_deref(), Some("c1"));
}

#[tokio::test]
async fn a_name_that_is_neither_a_tool_nor_an_alias_stays_unknown() {
    let tools = ToolRegistry::new()
        .with(RecordingTool::new("read_file"))
        .unwrap()
        .with_alias("read_tool", "read_file")
        .unwrap();
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "read", json!({}))]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model).with_tools(tools);
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let answer = run.messages[2].text().into_owned();
    assert!(answer.contains("no tool named `read`"), "{answer}");
}

#[test]
fn a_mistaken_alias_is_a_config_error_naming_the_names_and_the_fix() {
    let tools = || {
        ToolRegistry::new()
            .with(RecordingTool::new("read_file"))
            .unwrap()
            .with(RecordingTool::new("write_file"))
            .unwrap()
    };
    // to a tool that is not registered
    let err = tools().with_alias("read", "reed_file").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("no tool named `reed_file`"), "{err}");
    assert!(err.to_string().contains("read_file, write_file"), "{err}");
    // an alias that is a tool's name: a name means one tool
    let err = tools().with_alias("write_file", "read_file").unwrap_err();
    assert!(err.to_string().contains("a tool is named `write_file`"), "{err}");
    // declared twice
    let err = tools()
        .with_alias("read", "read_file")
        .unwrap()
        .with_alias("read", "write_file")
        .unwrap_err();
    assert!(err.to_string().contains("already an alias of `read_file`"), "{err}");
    // a tool registered under a declared alias
    let mut registry = tools().with_alias("read", "read_file").unwrap();
    let err = registry.register(RecordingTool::new("read")).unwrap_err();
    assert!(
        err.to_string().contains("`read` is an alias of the tool `read_file`"),
        "{err}"
    );
    assert_eq!(registry.aliases(), [("read", "read_file")], "the registry is unchanged");
    assert_eq!(registry.len(), 2);
}

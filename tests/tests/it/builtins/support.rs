//! Histories the context built-ins' tests start from, and one run of such a
//! history under one middleware.

use serde_json::json;
use tinyagents::harness::message::MessageId;
use tinyagents::prelude::*;

/// `m` with the id `id`.
pub fn msg(m: Message, id: &str) -> Message {
    m.with_id(MessageId::new(id))
}

/// The messages' ids, in order.
pub fn ids(messages: &[Message]) -> Vec<&str> {
    messages.iter().map(|m| m.id.as_str()).collect()
}

/// system, u1, a1, u2, a2 (calls c1, c2), t1, t2, u3
pub fn two_lookups_history() -> Vec<Message> {
    vec![
        msg(Message::system("rules"), "sys"),
        msg(Message::user("first question"), "u1"),
        msg(Message::assistant("first answer"), "a1"),
        msg(Message::user("look things up"), "u2"),
        msg(
            Message::assistant("").with_tool_calls(vec![
                ToolCall::new("c1", "lookup", json!({"q": "x"})),
                ToolCall::new("c2", "lookup", json!({"q": "y"})),
            ]),
            "a2",
        ),
        msg(Message::tool("c1", "lookup", "x is 1"), "t1"),
        msg(Message::tool("c2", "lookup", "y is 2"), "t2"),
        msg(Message::user("and now?"), "u3"),
    ]
}

/// A parent sharing `stack` whose model asks `helper` (running `child`) once
/// with input "x", then answers "ok".
pub fn parent_of(child: Agent<()>, stack: std::sync::Arc<MiddlewareStack<()>>) -> Agent<()> {
    let tools = ToolRegistry::new()
        .with(AgentTool::new(std::sync::Arc::new(child), "helper", "Helps.", || {
            ((), ())
        }))
        .unwrap();
    Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("helper", json!({"input": "x"})),
        ScriptedTurn::text("ok"),
    ]))
    .with_tools(tools)
    .with_shared_stack(stack)
}

/// Runs `input` through an agent whose stack is `mw` alone, with `tool`,
/// the model answering `turns`: the model's requests, the run, its events.
pub async fn run_under(
    mw: impl Middleware<()> + 'static,
    tool: impl Tool + 'static,
    turns: impl IntoIterator<Item = ScriptedTurn>,
    input: impl Into<AgentInput>,
) -> (Vec<ModelRequest>, AgentRun, Vec<AgentEvent>) {
    let model = std::sync::Arc::new(ScriptedModel::new(turns));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(ToolRegistry::new().with(tool).unwrap())
        .with_stack(MiddlewareStack::new().with(mw).unwrap());
    let sink = std::sync::Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), input).await.unwrap();
    (model.requests(), run, sink.events())
}

//! What the `pii` tests share: a seeded random source and splitter, the
//! redacting stack, what reached a sink, and one tool call streamed in pieces.

use std::sync::Arc;

use serde_json::Value;
use tinyagents::harness::model::{DeltaContent, FinishReason};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// A small deterministic PRNG (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Splits `text` at random char boundaries (pieces of 0..=max chars).
pub fn split(rng: &mut Rng, text: &str, max: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut pieces = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let len = rng.below(max + 1).min(chars.len() - i);
        pieces.push(chars[i..i + len].iter().collect());
        i += len;
    }
    pieces
}

/// The default stack with `pii` redacting.
pub fn redacting_stack() -> MiddlewareStack<()> {
    MiddlewareStack::new()
        .with(PiiMiddleware::new(PiiStrategy::Redact))
        .unwrap()
}

/// Every text delta that reached the sink, concatenated (what a client shows).
pub fn streamed_text(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { delta, .. } => delta.as_text(),
            _ => None,
        })
        .collect()
}

/// Every tool-call argument delta that reached the sink, concatenated.
pub fn streamed_arguments(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { delta, .. } => match &delta.content {
                DeltaContent::ToolCall { arguments, .. } => Some(arguments.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Runs one streamed call of tool `send` whose argument text is `raw`, split
/// in pieces of `size` characters, through `pii` redacting: what the tool
/// got, and every event.
pub async fn stream_call(raw: &str, size: usize) -> (Vec<Value>, Vec<AgentEvent>) {
    let send = RecordingTool::new("send").returning("sent");
    let chars: Vec<char> = raw.chars().collect();
    let mut deltas: Vec<ModelDelta> = chars
        .chunks(size)
        .enumerate()
        .map(|(i, c)| {
            ModelDelta::new(DeltaContent::ToolCall {
                index: 0,
                id: (i == 0).then(|| "c1".to_owned()),
                name: (i == 0).then(|| "send".to_owned()),
                arguments: c.iter().collect(),
            })
        })
        .collect();
    deltas.push(ModelDelta::finish(FinishReason::ToolCalls));
    let model = ScriptedModel::new([ScriptedTurn::Deltas(deltas), ScriptedTurn::text("done")]);
    let agent = pii_agent(model, send.clone(), PiiStrategy::Redact);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    agent.run(&mut ctx, &(), "go").await.unwrap();
    (send.calls(), sink.events())
}

/// [`stream_call`]: what the tool got, and the argument text streamed.
pub async fn stream_arguments(raw: &str, size: usize) -> (Vec<Value>, String) {
    let (calls, events) = stream_call(raw, size).await;
    (calls, streamed_arguments(&events))
}

/// An agent on `model` offered `tool`, with `pii` applying `strategy` on the
/// default stack.
pub fn pii_agent(model: impl ChatModel + 'static, tool: impl Tool + 'static, strategy: PiiStrategy) -> Agent<()> {
    Agent::new(model)
        .with_tools(ToolRegistry::new().with(tool).unwrap())
        .with_stack(MiddlewareStack::new().with(PiiMiddleware::new(strategy)).unwrap())
}

/// Answers in place of a failed model call: with a call to `noop` when the
/// request offers that tool (a reply with no text), else with the text
/// "from the fallback".
#[wrap_model(name = "fallback")]
pub async fn fallback(
    ctx: &mut RunContext,
    state: &(),
    request: ModelRequest,
    next: ModelHandler<'_, ()>,
) -> Result<MiddlewareModelOutcome> {
    let textless = request.tools.iter().any(|t| t.name == "noop");
    match next.run(ctx, state, request).await {
        Err(_) if textless => {
            Ok(ModelResponse::tool_calls(vec![ToolCall::new("f1", "noop", serde_json::json!({}))]).into())
        }
        Err(_) => Ok(ModelResponse::text("from the fallback").into()),
        ok => ok,
    }
}

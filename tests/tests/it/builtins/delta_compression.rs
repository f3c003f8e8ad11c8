//! `delta_compression`: fewer, larger deltas reach the sink; the accumulated
//! reply and the forwarded text are byte-identical to an unbuffered run; the
//! time limit works on tokio's paused clock; a failed attempt's held text
//! never leaks into the retry.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tinyagents::config::from_toml_str;
use tinyagents::harness::model::{DeltaContent, FinishReason, ModelStream};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::RetryOnce;

/// A long reply in many small, uneven pieces, multi-byte characters included,
/// with reasoning, a tool call, usage and a finish in between.
fn deltas() -> Vec<ModelDelta> {
    let text = "Voilà: the quick brown 🦊 jumps over the lazy dog, then naps — ünïcödé and all. ".repeat(3);
    let mut out = vec![ModelDelta::reasoning("Think"), ModelDelta::reasoning("ing…")];
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    let mut step = 1;
    while i < chars.len() {
        let end = (i + step).min(chars.len());
        out.push(ModelDelta::text(chars[i..end].iter().collect::<String>()));
        if i == 20 {
            out.push(ModelDelta::usage(Usage::new(5, 1)));
        }
        i = end;
        step = step % 7 + 1;
    }
    out.push(ModelDelta::new(DeltaContent::ToolCall {
        index: 0,
        id: Some("c1".into()),
        name: Some("noop".into()),
        arguments: "{\"a\": ".into(),
    }));
    out.push(ModelDelta::new(DeltaContent::ToolCall {
        index: 0,
        id: None,
        name: None,
        arguments: "1}".into(),
    }));
    out.push(ModelDelta::reasoning(" done"));
    out.push(ModelDelta::finish(FinishReason::Stop));
    out
}

async fn run(stack: MiddlewareStack<()>, turns: Vec<ScriptedTurn>) -> (Result<AgentRun>, Vec<AgentEvent>) {
    let agent: Agent<()> = Agent::new(ScriptedModel::new(turns))
        .with_stack(stack)
        .with_max_steps(1);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await;
    (run, sink.events())
}

/// The text and reasoning forwarded to the sink, concatenated, and how many deltas carried them.
fn forwarded(events: &[AgentEvent]) -> (String, String, usize) {
    let (mut text, mut reasoning, mut n) = (String::new(), String::new(), 0);
    for e in events {
        if let AgentEvent::ModelDelta { delta, .. } = e {
            match &delta.content {
                DeltaContent::Text { text: t } => {
                    text.push_str(t);
                    n += 1;
                }
                DeltaContent::Reasoning { text: t } => {
                    reasoning.push_str(t);
                    n += 1;
                }
                _ => {}
            }
        }
    }
    (text, reasoning, n)
}

#[tokio::test]
async fn the_final_text_is_byte_identical_with_fewer_deltas() {
    let (plain, plain_events) = run(MiddlewareStack::empty(), vec![ScriptedTurn::Deltas(deltas())]).await;
    let stack = MiddlewareStack::empty()
        .with(DeltaCompressionMiddleware::new(16))
        .unwrap();
    let (coalesced, events) = run(stack, vec![ScriptedTurn::Deltas(deltas())]).await;
    // the run stops at the step limit after the tool call; the reply is what matters
    let (plain, coalesced) = (plain.unwrap_err(), coalesced.unwrap_err());
    assert_eq!(plain.kind(), ErrorKind::LimitExceeded);
    assert_eq!(coalesced.kind(), ErrorKind::LimitExceeded);

    let reply = |events: &[AgentEvent]| {
        events
            .iter()
            .find_map(|e| match e {
                AgentEvent::ModelCallCompleted {
                    usage, finish_reason, ..
                } => Some((*usage, finish_reason.clone())),
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(reply(&plain_events), reply(&events));

    let (p_text, p_reasoning, p_n) = forwarded(&plain_events);
    let (c_text, c_reasoning, c_n) = forwarded(&events);
    assert_eq!(c_text.as_bytes(), p_text.as_bytes(), "forwarded text is byte-identical");
    assert_eq!(c_reasoning, p_reasoning);
    assert!(c_n * 3 < p_n, "coalesced {c_n} deltas vs {p_n}");
    // every held delta is recorded; the held tails are forwarded after the finish delta
    let suppressed = events.iter().filter(|e| e.kind() == EventKind::DeltaSuppressed).count();
    let finish_at = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ModelDelta { delta, .. } if matches!(delta.content, DeltaContent::Finish { .. })))
        .unwrap();
    let tails = events[finish_at + 1..]
        .iter()
        .filter(|e| e.kind() == EventKind::ModelDelta)
        .count();
    assert_eq!(tails, 2, "a text tail and a reasoning tail");
    assert_eq!(suppressed + c_n, p_n + tails);
}

#[tokio::test]
async fn the_accumulated_reply_is_byte_identical() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Message>::new()));
    let plain: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Deltas(deltas())]))
        .with_max_steps(1)
        .with_stack(MiddlewareStack::empty().with(Recorder(seen.clone())).unwrap());
    let coalesced: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Deltas(deltas())]))
        .with_max_steps(1)
        .with_stack(
            MiddlewareStack::empty()
                .with(Recorder(seen.clone()))
                .unwrap()
                .with(DeltaCompressionMiddleware::new(10))
                .unwrap(),
        );
    // both stop at the step limit after the tool call; the reply is recorded in after_model
    let _ = plain
        .run(&mut RunContext::new(RunConfig::new("p"), ()), &(), "go")
        .await;
    let _ = coalesced
        .run(&mut RunContext::new(RunConfig::new("c"), ()), &(), "go")
        .await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0].content, seen[1].content,
        "content parts (text and reasoning) are identical"
    );
    assert_eq!(seen[0].tool_calls, seen[1].tool_calls);
    assert_eq!(seen[0].text().as_bytes(), seen[1].text().as_bytes());
    assert!(seen[0].text().contains('🦊'));
}

/// Records every reply after the model call.
struct Recorder(Arc<std::sync::Mutex<Vec<Message>>>);

#[async_trait]
impl Middleware<()> for Recorder {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_MODEL
    }
    async fn after_model(&self, _: &mut RunContext, _: &(), response: &mut ModelResponse) -> Result<()> {
        self.0.lock().unwrap().push(response.message.clone());
        Ok(())
    }
}

/// One character every 30 ms, ten times.
struct Slow;

#[async_trait]
impl ChatModel for Slow {
    fn id(&self) -> &str {
        "slow"
    }
    async fn stream(&self, _: &ModelRequest) -> Result<ModelStream> {
        let s = futures::stream::unfold(0u32, |i| async move {
            if i > 10 {
                return None;
            }
            if i == 10 {
                return Some((Ok(ModelDelta::finish(FinishReason::Stop)), i + 1));
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            Some((Ok(ModelDelta::text(char::from(b'a' + i as u8).to_string())), i + 1))
        });
        Ok(s.boxed())
    }
}

#[tokio::test(start_paused = true)]
async fn the_time_limit_forwards_held_text_on_the_paused_clock() {
    let mw: DeltaCompressionMiddleware = tinyagents::config::BuildMiddleware::build(
        from_toml_str::<DeltaCompressionConfig>("min_chars = 1000\nmax_interval_ms = 100").unwrap(),
    );
    let agent: Agent<()> = Agent::new(Slow).with_stack(MiddlewareStack::empty().with(mw).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "abcdefghij");
    let pieces: Vec<String> = sink
        .events()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { delta, .. } => delta.as_text().map(str::to_owned),
            _ => None,
        })
        .collect();
    // the clock starts at the first delta (t=30): forwards at t=150 (5 held) and t=270 (4 held),
    // and the tail at the end of the stream
    assert_eq!(pieces, ["abcde", "fghi", "j"]);
}

#[tokio::test]
async fn a_failed_attempts_held_text_never_leaks_into_the_retry() {
    // registered first, but delta_compression declares `after_if_present = ["model_retry", ...]`: it ends up inside
    let stack = MiddlewareStack::empty()
        .with(DeltaCompressionMiddleware::new(100))
        .unwrap()
        .with(RetryOnce)
        .unwrap();
    assert_eq!(
        stack.implementors(HookKind::WrapModel),
        ["model_retry", "delta_compression"]
    );
    let (run, events) = run(
        stack,
        vec![
            ScriptedTurn::FailAfter(
                vec![ModelDelta::text("stale "), ModelDelta::text("text ")],
                TinyAgentsError::model("connection reset", true),
            ),
            ScriptedTurn::text("fresh answer"),
        ],
    )
    .await;
    let run = run.unwrap();
    assert_eq!(run.final_text(), "fresh answer");
    let (text, _, _) = forwarded(&events);
    assert_eq!(
        text, "fresh answer",
        "the failed attempt's held text was never forwarded"
    );
}

#[test]
fn bad_configuration_is_rejected() {
    let err = from_toml_str::<DeltaCompressionConfig>("min_chars = 0").unwrap_err();
    assert!(err.to_string().contains("`min_chars` = 0"), "{err}");
    let err = from_toml_str::<DeltaCompressionConfig>("max_interval_ms = -5").unwrap_err();
    assert!(err.to_string().contains("max_interval_ms"), "{err}");
}

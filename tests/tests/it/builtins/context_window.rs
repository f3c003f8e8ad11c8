//! `context_window` (`ContextMiddleware` in QueryMT's docs): warns once at `warn_at_percent`,
//! compacts through the summariser at `compact_at_percent`, says so when
//! nothing can be compacted, and validates warn below compact.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::message::MessageId;
use tinyagents::harness::tokens::TokenCounter;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use super::support::run_under;

/// Ten tokens per message, nothing else: percentages are easy to read.
struct TenPerMessage;

impl TokenCounter for TenPerMessage {
    fn count_text(&self, _: &str) -> u64 {
        0
    }
    fn count_message(&self, _: &Message) -> u64 {
        10
    }
}

fn msg(m: Message, id: &str) -> Message {
    m.with_id(MessageId::new(id))
}

/// 8 messages: system, u1, a1, u2, a2 (call c1), t1, a3, u3
fn history() -> Vec<Message> {
    vec![
        msg(Message::system("rules"), "sys"),
        msg(Message::user("q1"), "u1"),
        msg(Message::assistant("a1"), "a1"),
        msg(Message::user("q2"), "u2"),
        msg(
            Message::assistant("").with_tool_calls(vec![ToolCall::new("c1", "lookup", json!({}))]),
            "a2",
        ),
        msg(Message::tool("c1", "lookup", "r1"), "t1"),
        msg(Message::assistant("a3"), "a3"),
        msg(Message::user("q3"), "u3"),
    ]
}

fn context(warn: u8, compact: u8, window: u64, keep: u32) -> ContextWindowMiddleware {
    let toml = format!("warn_at_percent = {warn}\ncompact_at_percent = {compact}\nkeep_messages = {keep}");
    from_toml_str::<ContextWindowConfig>(&toml)
        .unwrap()
        .build()
        .with_context_window(window)
        .with_counter(Arc::new(TenPerMessage))
}

/// A run of two model calls: a tool call (2 more messages), then an answer.
async fn run(mw: ContextWindowMiddleware) -> (Vec<ModelRequest>, AgentRun, Vec<AgentEvent>) {
    run_turns(
        mw,
        [ScriptedTurn::tool_call("lookup", json!({})), ScriptedTurn::text("done")],
    )
    .await
}

/// A run of `history()` under `mw`, the model answering `turns`, with a
/// `lookup` tool: the model's requests, the run and its events.
async fn run_turns(
    mw: ContextWindowMiddleware,
    turns: impl IntoIterator<Item = ScriptedTurn>,
) -> (Vec<ModelRequest>, AgentRun, Vec<AgentEvent>) {
    run_under(mw, RecordingTool::new("lookup").returning("r2"), turns, history()).await
}

fn notices(events: &[AgentEvent]) -> Vec<(String, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Notice {
                source,
                message,
                is_error,
            } if source == "context_window" => Some((message.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn below_the_warning_nothing_happens() {
    // 80 then 100 tokens of a 1000-token window
    let (requests, run, events) = run(context(80, 90, 1000, 2)).await;
    assert!(notices(&events).is_empty());
    assert_eq!(requests[1].messages.len(), 10);
    assert!(run.compressions.is_empty());
}

#[tokio::test]
async fn it_warns_once_per_run() {
    // 80 tokens = 72.7% then 100 tokens = 90.9% of 110: both above 70, below 99
    let (requests, _, events) = run(context(70, 99, 110, 2)).await;
    let n = notices(&events);
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(
        n[0].0.contains("fills 73% of the 110-token context window"),
        "{}",
        n[0].0
    );
    assert!(n[0].0.contains("compacted at 99%"));
    assert!(!n[0].1);
    assert_eq!(requests[1].messages.len(), 10, "a warning changes nothing");
}

#[tokio::test]
async fn at_the_compaction_threshold_it_summarises_the_older_conversation() {
    // 80 tokens = 80% (warn), then 100 tokens = 100% (compact) of 100
    let (requests, run, events) = run(context(70, 95, 100, 2)).await;
    assert_eq!(requests[0].messages.len(), 8, "the first call is only warned about");
    let sent = &requests[1].messages;
    // system first, then the summary, then the kept window: the new tool call with its result
    assert_eq!(sent[0].id.as_str(), "sys");
    assert!(sent[1].text().starts_with("[Summary of the earlier conversation]"));
    assert!(sent[1].text().contains("user: q1"));
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[2].tool_calls.len(), 1);
    assert_eq!(sent[3].tool_call_id.as_deref(), Some(sent[2].tool_calls[0].id.as_str()));

    let n = notices(&events);
    assert_eq!(n.len(), 2, "{n:?}");
    assert!(
        n[1].0.contains("filled 100%") && n[1].0.contains("7 older messages were summarised"),
        "{}",
        n[1].0
    );
    assert_eq!(run.compressions.len(), 1);
    let p = &run.compressions[0];
    assert_eq!(p.middleware, "context_window");
    assert_eq!(p.policy_version, "context/1+concat");
    assert_eq!(p.source_message_ids.len(), 7);
    assert_eq!(p.source_artifact_ids, ["c1"]);
    assert_eq!(p.original_tokens, 70);
    assert_eq!(p.compressed_tokens, 10);
    assert_eq!(p.step, 2);
    // the stored history is untouched
    assert_eq!(run.messages.len(), 11);
}

#[tokio::test]
async fn when_everything_is_in_the_kept_window_it_says_so_and_sends_the_request() {
    let (requests, run, events) = run(context(10, 20, 10, 50)).await;
    assert_eq!(requests[0].messages.len(), 8);
    let n = notices(&events);
    assert!(n
        .iter()
        .all(|(text, is_error)| *is_error && text.contains("nothing could be compacted")));
    assert_eq!(n.len(), 2);
    assert!(run.compressions.is_empty());
}

#[test]
fn warn_must_be_below_compact_and_in_range() {
    let err = from_toml_str::<ContextWindowConfig>("warn_at_percent = 90\ncompact_at_percent = 90").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`warn_at_percent` = 90"), "{text}");
    assert!(text.contains("must be below `compact_at_percent` (90)"), "{text}");

    let err = from_toml_str::<ContextWindowConfig>("compact_at_percent = 101\nfallback_max_tokens = 0").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`compact_at_percent` = 101"), "{text}");
    assert!(text.contains("`fallback_max_tokens` = 0"), "{text}");

    let c: ContextWindowConfig = from_toml_str("").unwrap();
    assert_eq!(
        (c.warn_at_percent, c.compact_at_percent, c.fallback_max_tokens),
        (80, 90, 128_000)
    );
    assert_eq!(c.build().context_window(), 128_000);
}

#[tokio::test]
async fn the_providers_reported_usage_counts_when_it_is_larger_than_the_estimate() {
    // the estimate is 80-100 tokens of 1000, but the provider reported 950 for the first call
    let (_, run, events) = run_turns(
        context(80, 99, 1000, 2),
        [
            ScriptedTurn::Reply(
                ModelResponse::tool_calls(vec![ToolCall::new("c9", "lookup", json!({}))])
                    .with_usage(Usage::new(900, 50)),
            ),
            ScriptedTurn::text("done"),
        ],
    )
    .await;
    let n = notices(&events);
    assert_eq!(n.len(), 1, "{n:?}");
    assert!(n[0].0.contains("fills 95%"), "{}", n[0].0);
    assert!(run.compressions.is_empty(), "95% is below compact_at_percent = 99");
}

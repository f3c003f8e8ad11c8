//! `message_trim`: keeps the newest messages within a budget, every system
//! message, never separates a tool call from its results, edits only the
//! request, records provenance, and rejects bad configuration.

use std::sync::Arc;

use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use super::support::{ids, msg, two_lookups_history};

/// Every tool message in `messages` answers a call of an assistant message also in `messages`.
fn assert_paired(messages: &[Message]) {
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let call = m.tool_call_id.as_deref().unwrap();
            assert!(
                messages[..i].iter().any(|a| a.tool_calls.iter().any(|c| c.id == call)),
                "tool result {call} lost its tool call: {:?}",
                ids(messages)
            );
        }
    }
    for m in messages.iter().filter(|m| !m.tool_calls.is_empty()) {
        for c in &m.tool_calls {
            assert!(
                messages
                    .iter()
                    .any(|t| t.tool_call_id.as_deref() == Some(c.id.as_str())),
                "tool call {} lost its result",
                c.id
            );
        }
    }
}

async fn run_with(trim: MessageTrimMiddleware) -> (Vec<ModelRequest>, AgentRun, Vec<AgentEvent>) {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(MiddlewareStack::new().with(trim).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), two_lookups_history()).await.unwrap();
    (model.requests(), run, sink.events())
}

#[tokio::test]
async fn last_messages_keeps_the_newest_and_every_system_message() {
    let (requests, run, _) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastMessages(1))).await;
    assert_eq!(ids(&requests[0].messages), ["sys", "u3"]);
    // the stored history is untouched
    assert_eq!(run.messages.len(), two_lookups_history().len() + 1);
}

#[tokio::test]
async fn a_tool_call_is_never_separated_from_its_results() {
    // 2 messages from the end would cut between a2 and its results: the unit is kept whole.
    let (requests, _, _) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastMessages(3))).await;
    let sent = &requests[0].messages;
    assert_eq!(ids(sent), ["sys", "a2", "t1", "t2", "u3"]);
    assert_paired(sent);
    // every budget keeps pairs intact
    for n in 1..=8 {
        let (requests, _, _) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastMessages(n))).await;
        assert_paired(&requests[0].messages);
        let (requests, _, _) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastTokens(n as u64 * 6))).await;
        assert_paired(&requests[0].messages);
    }
}

#[tokio::test]
async fn last_tokens_keeps_what_fits_and_always_the_newest_unit() {
    // "and now?" is 2 tokens + 4 overhead = 6; the tool unit costs far more.
    let (requests, _, _) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastTokens(10))).await;
    assert_eq!(ids(&requests[0].messages), ["sys", "u3"]);
    // a budget smaller than the newest unit still keeps it
    let (requests, _, _) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastTokens(1))).await;
    assert_eq!(ids(&requests[0].messages), ["sys", "u3"]);
    // a large budget keeps everything and records nothing
    let (requests, run, events) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastTokens(10_000))).await;
    assert_eq!(requests[0].messages.len(), two_lookups_history().len());
    assert!(run.compressions.is_empty());
    assert!(!events.iter().any(|e| e.kind() == EventKind::Compressed));
}

#[tokio::test]
async fn each_trim_records_provenance_on_the_event_and_the_run() {
    let (_, run, events) = run_with(MessageTrimMiddleware::new(TrimStrategy::LastMessages(1))).await;
    let from_events: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compressed { provenance, .. } => Some((**provenance).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(from_events.len(), 1);
    assert_eq!(run.compressions, from_events);
    let p = &run.compressions[0];
    assert_eq!(p.middleware, "message_trim");
    assert_eq!(p.policy_version, MessageTrimMiddleware::POLICY);
    let dropped: Vec<&str> = p.source_message_ids.iter().map(|i| i.as_str()).collect();
    assert_eq!(dropped, ["u1", "a1", "u2", "a2", "t1", "t2"]);
    assert_eq!(p.source_artifact_ids, ["c1", "c2"]);
    assert!(p.original_tokens > 0);
    assert_eq!(p.compressed_tokens, 0);
    assert_eq!(p.step, 1);
    assert!(p.stable_prefix_preserved);
    assert_eq!(p.prefix_before, p.prefix_after);
}

#[test]
fn config_builds_the_strategy_and_rejects_bad_values() {
    let c: MessageTrimConfig = from_toml_str("strategy = \"last_tokens\"\nmax_tokens = 500").unwrap();
    assert_eq!(c.build().strategy(), TrimStrategy::LastTokens(500));
    let c: MessageTrimConfig = from_toml_str("max_messages = 7").unwrap();
    assert_eq!(c.build().strategy(), TrimStrategy::LastMessages(7));

    let err = from_toml_str::<MessageTrimConfig>("strategy = \"first_messages\"\nmax_messages = 0").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`strategy` = \"first_messages\""), "{text}");
    assert!(text.contains("last_messages"), "{text}");
    assert!(text.contains("`max_messages` = 0"), "{text}");
    assert_eq!(err.errors().len(), 2);
}

#[tokio::test]
async fn provenance_is_recorded_when_the_cut_moves_not_on_every_call() {
    use tinyagents::harness::compression::CompressionLog;
    let stack: MiddlewareStack<()> = MiddlewareStack::new()
        .with(MessageTrimMiddleware::new(TrimStrategy::LastMessages(1)))
        .unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let request = ModelRequest::new(two_lookups_history());
    for _ in 0..3 {
        let mut sent = request.clone();
        stack.run_before_model(&mut ctx, &(), &mut sent).await.unwrap();
        assert_eq!(ids(&sent.messages), ["sys", "u3"]);
    }
    assert_eq!(
        ctx.locals().local::<CompressionLog>().entries().len(),
        1,
        "the same cut three times"
    );
    // one more message moves the cut: u3 is dropped for the first time
    let mut longer = request.clone();
    longer.messages.push(msg(Message::assistant("reply"), "a3"));
    stack.run_before_model(&mut ctx, &(), &mut longer).await.unwrap();
    let entries = ctx.locals().local::<CompressionLog>().entries();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1].source_message_ids.last().unwrap().as_str(), "u3");
}

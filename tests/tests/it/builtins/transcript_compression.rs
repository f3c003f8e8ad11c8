//! `transcript_compression`: a finished run's transcript is durably
//! compressed in `after_agent` (the requests of the run are not), the next run
//! starts from the summary, a failed run is left whole, provenance attached.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use super::support::msg;

/// sys, then four questions and their answers, a tool call pair among them: 10 messages
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
        msg(Message::assistant("a2 done"), "a2b"),
        msg(Message::user("q3"), "u3"),
        msg(Message::assistant("a3"), "a3"),
        msg(Message::user("q4"), "u4"),
    ]
}

fn transcript(toml: &str) -> TranscriptCompressionMiddleware {
    from_toml_str::<TranscriptCompressionConfig>(toml).unwrap().build()
}

#[tokio::test]
async fn a_finished_runs_transcript_is_compressed_durably_and_the_next_run_starts_from_it() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("a4"), ScriptedTurn::text("a5")]));
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        MiddlewareStack::new()
            .with(transcript("trigger_messages = 6\nkeep_messages = 3"))
            .unwrap(),
    );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r1"), ()), &(), history())
        .await
        .unwrap();
    // the run's own request was not touched
    assert_eq!(model.requests()[0].messages.len(), 10);
    // the transcript handed back: system, summary, the 3 newest
    let ids: Vec<&str> = run.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids[0], "sys");
    assert_eq!(ids[2..4], ["a3", "u4"]);
    assert_eq!(run.messages.len(), 5);
    assert!(run.messages[1]
        .text()
        .starts_with("[Summary of the earlier conversation]"));
    assert!(
        run.messages[1].text().contains("assistant: called lookup({})"),
        "{}",
        run.messages[1].text()
    );
    assert_eq!(run.final_text(), "a4");
    assert_eq!(run.messages[4].text(), "a4");

    let p = &run.compressions[0];
    assert_eq!(p.middleware, "transcript_compression");
    assert_eq!(p.policy_version, "transcript_compression/1+concat");
    assert_eq!(p.source_message_ids.len(), 7);
    assert_eq!(p.source_artifact_ids, ["c1"]);
    assert_eq!(p.replacement_message_id.as_ref(), Some(&run.messages[1].id));

    // the next run carries the summary
    let mut next = run.messages.clone();
    next.push(Message::user("q5"));
    agent
        .run(&mut RunContext::new(RunConfig::new("r2"), ()), &(), next)
        .await
        .unwrap();
    let sent = &model.requests()[1].messages;
    assert_eq!(sent.len(), 6);
    assert!(sent[1].text().starts_with("[Summary of the earlier conversation]"));
}

#[tokio::test]
async fn below_the_trigger_or_after_a_failure_the_transcript_is_whole() {
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("a4")])).with_stack(
        MiddlewareStack::new()
            .with(transcript("trigger_messages = 20\nkeep_messages = 3"))
            .unwrap(),
    );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), history())
        .await
        .unwrap();
    assert_eq!(run.messages.len(), 11);
    assert!(run.compressions.is_empty());

    // a failed run is left whole (seen by after_agent, then the error is returned)
    let seen = Arc::new(std::sync::Mutex::new(0usize));
    let seen2 = seen.clone();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model(
        "down", false,
    ))]))
    .with_stack(
        MiddlewareStack::new()
            .with(Observe(seen2))
            .unwrap()
            .with(transcript("trigger_messages = 6\nkeep_messages = 3"))
            .unwrap(),
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), history())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    assert_eq!(*seen.lock().unwrap(), 10, "after_agent saw the whole transcript");
}

/// Records how many messages the run had in its after_agent (runs after the
/// transcript's, being registered first).
struct Observe(Arc<std::sync::Mutex<usize>>);

#[async_trait::async_trait]
impl Middleware<()> for Observe {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_AGENT
    }
    async fn after_agent(&self, _: &mut RunContext, _: &(), run: &mut AgentRun) -> Result<()> {
        *self.0.lock().unwrap() = run.messages.len();
        Ok(())
    }
}

#[test]
fn keep_must_be_below_trigger() {
    let err = from_toml_str::<TranscriptCompressionConfig>("trigger_messages = 10\nkeep_messages = 12").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`keep_messages` = 12"), "{text}");
    assert!(text.contains("below `trigger_messages` (10)"), "{text}");
    let err = from_toml_str::<TranscriptCompressionConfig>("trigger_messages = 1").unwrap_err();
    assert!(err.to_string().contains("`trigger_messages` = 1"), "{err}");
}

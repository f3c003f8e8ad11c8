//! `context_clipping`: past a trigger, older long messages are clipped to a
//! head/tail excerpt one by one; the newest window, system messages, ids and
//! tool-call pairing are kept; provenance per message; bad config rejected.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::message::MessageId;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

fn msg(m: Message, id: &str) -> Message {
    m.with_id(MessageId::new(id))
}

fn long(c: char) -> String {
    std::iter::repeat_n(c, 2000).collect()
}

/// sys, u1 (long), a1 (long, calls c1), t1 (long), u2, a2 (long), u3
fn history() -> Vec<Message> {
    vec![
        msg(Message::system(long('s')), "sys"),
        msg(Message::user(long('u')), "u1"),
        msg(
            Message::assistant(long('a')).with_tool_calls(vec![ToolCall::new("c1", "read", json!({"path": "x"}))]),
            "a1",
        ),
        msg(Message::tool("c1", "read", long('t')), "t1"),
        msg(Message::user("short"), "u2"),
        msg(Message::assistant(long('b')), "a2"),
        msg(Message::user("and?"), "u3"),
    ]
}

async fn run(toml: &str) -> (ModelRequest, AgentRun) {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let mw = from_toml_str::<ContextClippingConfig>(toml).unwrap().build();
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(MiddlewareStack::new().with(mw).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), history())
        .await
        .unwrap();
    (model.requests().remove(0), run)
}

#[tokio::test]
async fn older_long_messages_are_clipped_and_the_shape_is_kept() {
    let (sent, run) = run("trigger_tokens = 100\nkeep_messages = 2\nmax_message_tokens = 50").await;
    let ids: Vec<&str> = sent.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["sys", "u1", "a1", "t1", "u2", "a2", "u3"], "every message stays");
    // 2000 characters = 500 tokens, clipped to 50 tokens = 200 characters: 150 head, 50 tail
    for (i, c) in [(1, 'u'), (2, 'a'), (3, 't')] {
        let text = sent.messages[i].text();
        let expected = format!(
            "{}\n[… 1800 characters compressed …]\n{}",
            c.to_string().repeat(150),
            c.to_string().repeat(50)
        );
        assert_eq!(text, expected, "message {i}");
    }
    // the system message, the short one and the kept window are untouched
    assert_eq!(sent.messages[0].text(), long('s'));
    assert_eq!(sent.messages[4].text(), "short");
    assert_eq!(sent.messages[5].text(), long('b'));
    // tool calls and their pairing survive
    assert_eq!(sent.messages[2].tool_calls[0].id, "c1");
    assert_eq!(sent.messages[3].tool_call_id.as_deref(), Some("c1"));
    // the stored history is whole
    assert_eq!(run.messages[1].text(), long('u'));

    assert_eq!(run.compressions.len(), 3);
    let arts: Vec<Vec<String>> = run.compressions.iter().map(|p| p.source_artifact_ids.clone()).collect();
    assert_eq!(arts, [vec![], vec!["c1".to_owned()], vec!["c1".to_owned()]]);
    assert!(run
        .compressions
        .iter()
        .all(|p| p.original_tokens > p.compressed_tokens && p.stable_prefix_preserved));
}

#[tokio::test]
async fn below_the_trigger_nothing_changes() {
    let (sent, run) = run("trigger_tokens = 1000000\nmax_message_tokens = 50").await;
    assert_eq!(sent.messages, history());
    assert!(run.compressions.is_empty());
}

#[test]
fn bad_configuration_is_rejected() {
    let err = from_toml_str::<ContextClippingConfig>("keep_messages = 3").unwrap_err();
    assert!(err.to_string().contains("at least one trigger"), "{err}");
    let err = from_toml_str::<ContextClippingConfig>("trigger_fraction = 0.5").unwrap_err();
    assert!(err.to_string().contains("context_window"), "{err}");
    let err = from_toml_str::<ContextClippingConfig>("trigger_tokens = 10\nmax_message_tokens = 8").unwrap_err();
    assert!(err.to_string().contains("`max_message_tokens` = 8"), "{err}");
}

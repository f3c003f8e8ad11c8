//! `context_editing`: clears old tool results past a token trigger, keeps the
//! newest and excluded tools, optionally clears tool inputs, stops at
//! `clear_at_least`, edits only the request, records provenance once per
//! newly cleared result, and rejects bad configuration.

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::message::MessageId;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use super::support::run_under;

fn msg(m: Message, id: &str) -> Message {
    m.with_id(MessageId::new(id))
}

fn call(id: &str, tool: &str) -> Message {
    msg(
        Message::assistant("").with_tool_calls(vec![ToolCall::new(id, tool, json!({"query": "a long query"}))]),
        &format!("a-{id}"),
    )
}

fn result(id: &str, tool: &str) -> Message {
    msg(Message::tool(id, tool, "x".repeat(400)), &format!("t-{id}"))
}

/// sys, u1, then four call/result pairs (c2 is the excluded `memory` tool), u2
fn history() -> Vec<Message> {
    vec![
        msg(Message::system("rules"), "sys"),
        msg(Message::user("go"), "u1"),
        call("c1", "search"),
        result("c1", "search"),
        call("c2", "memory"),
        result("c2", "memory"),
        call("c3", "search"),
        result("c3", "search"),
        call("c4", "search"),
        result("c4", "search"),
        msg(Message::user("so?"), "u2"),
    ]
}

fn editing(toml: &str) -> ContextEditingMiddleware {
    from_toml_str::<ContextEditingConfig>(toml).unwrap().build()
}

async fn run(mw: ContextEditingMiddleware, turns: Vec<ScriptedTurn>) -> (Vec<ModelRequest>, AgentRun, Vec<AgentEvent>) {
    let search = RecordingTool::new("search").returning("y".repeat(400));
    run_under(mw, search, turns, history()).await
}

fn texts(m: &[Message]) -> Vec<String> {
    m.iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect()
}

#[tokio::test]
async fn below_the_trigger_nothing_is_cleared() {
    let (requests, run, _) = run(editing("trigger_tokens = 100000"), vec![ScriptedTurn::text("ok")]).await;
    assert_eq!(requests[0].messages, history());
    assert!(run.compressions.is_empty());
}

#[tokio::test]
async fn old_results_are_cleared_except_the_newest_and_excluded_tools() {
    let mw = editing("trigger_tokens = 10\nkeep = 1\nexclude_tools = [\"memory\"]");
    let (requests, run, _) = run(mw, vec![ScriptedTurn::text("ok")]).await;
    let sent = &requests[0].messages;
    let long = "x".repeat(400);
    assert_eq!(texts(sent), ["[cleared]", long.as_str(), "[cleared]", long.as_str()]);
    // ids, order and pairing are untouched; tool inputs stay by default
    assert_eq!(
        sent.iter().map(|m| m.id.clone()).collect::<Vec<_>>(),
        history().iter().map(|m| m.id.clone()).collect::<Vec<_>>()
    );
    assert_eq!(sent[2].tool_calls[0].arguments, json!({"query": "a long query"}));
    // the stored history keeps every result
    assert_eq!(texts(&run.messages[..11]), vec![long.clone(); 4]);

    let p = &run.compressions[0];
    assert_eq!(p.middleware, "context_editing");
    let ids: Vec<&str> = p.source_message_ids.iter().map(MessageId::as_str).collect();
    assert_eq!(ids, ["t-c1", "t-c3"]);
    assert_eq!(p.source_artifact_ids, ["c1", "c3"]);
    assert!(p.original_tokens > p.compressed_tokens);
    assert!(p.stable_prefix_preserved);
}

#[tokio::test]
async fn clear_tool_inputs_blanks_the_matching_calls_and_a_custom_placeholder_is_used() {
    let mw = editing("trigger_tokens = 10\nkeep = 2\nclear_tool_inputs = true\nplaceholder = \"(old result removed)\"");
    let (requests, _, _) = run(mw, vec![ScriptedTurn::text("ok")]).await;
    let sent = &requests[0].messages;
    assert_eq!(texts(sent)[..2], ["(old result removed)", "(old result removed)"]);
    assert_eq!(sent[2].tool_calls[0].arguments, json!({}));
    assert_eq!(sent[4].tool_calls[0].arguments, json!({}));
    assert_eq!(sent[6].tool_calls[0].arguments, json!({"query": "a long query"}));
}

#[tokio::test]
async fn clear_at_least_stops_once_enough_was_reclaimed() {
    // each result reclaims 100 - 3 = 97 tokens: one is enough for 50
    let (requests, _, _) = run(
        editing("trigger_tokens = 10\nkeep = 0\nclear_at_least = 50"),
        vec![ScriptedTurn::text("ok")],
    )
    .await;
    let cleared = texts(&requests[0].messages)
        .iter()
        .filter(|t| *t == "[cleared]")
        .count();
    assert_eq!(cleared, 1);
}

#[tokio::test]
async fn provenance_is_recorded_once_per_newly_cleared_result() {
    let mw = editing("trigger_tokens = 10\nkeep = 1");
    let turns = vec![ScriptedTurn::tool_call("search", json!({})), ScriptedTurn::text("ok")];
    let (requests, run, events) = run(mw, turns).await;
    assert_eq!(requests.len(), 2);
    // call 1 clears c1..c3; call 2 also clears c4 (a newer result arrived):
    // each record names only the results cleared for the first time
    assert_eq!(run.compressions.len(), 2);
    assert_eq!(run.compressions[0].source_message_ids.len(), 3);
    assert_eq!(run.compressions[1].source_message_ids.len(), 1);
    let first: Vec<_> = run.compressions[0].source_message_ids.clone();
    assert!(!first.contains(&run.compressions[1].source_message_ids[0]));
    assert_eq!(events.iter().filter(|e| e.kind() == EventKind::Compressed).count(), 2);
    assert_eq!(texts(&requests[1].messages).last().unwrap(), &"y".repeat(400));
}

#[test]
fn bad_configuration_is_rejected() {
    let err = from_toml_str::<ContextEditingConfig>("placeholder = \" \"\ntrigger_tokens = 0").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`trigger_tokens` = 0"), "{text}");
    let err = from_toml_str::<ContextEditingConfig>("placeholder = \" \"").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`placeholder` = \" \""), "{text}");
    assert!(text.contains("must not be empty"), "{text}");
    let err = from_toml_str::<ContextEditingConfig>("keep = -1").unwrap_err();
    assert!(err.to_string().contains("keep"), "{err}");
}

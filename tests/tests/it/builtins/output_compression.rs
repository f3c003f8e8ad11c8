//! `output_compression`: a large tool result is replaced in the model-visible
//! context by a head/tail excerpt and an artifact reference; the original stays
//! in history and in the store, and the model can read it back with
//! `read_artifact`; small and newest results are left alone; provenance once.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::tool_texts;
use tinyagents::testing::RecordingTool;

/// `dump` (answering [`big`]) and `small` (answering "tiny").
fn dump_and_small() -> ToolRegistry {
    ToolRegistry::new()
        .with(RecordingTool::new("dump").returning(big()))
        .unwrap()
        .with(RecordingTool::new("small").returning("tiny"))
        .unwrap()
}

fn big() -> String {
    (0..2000).map(|i| format!("line {i:04}\n")).collect()
}

fn compression(toml: &str, store: &Arc<ArtifactStore>) -> OutputCompressionMiddleware {
    from_toml_str::<OutputCompressionConfig>(toml)
        .unwrap()
        .build()
        .with_store(store.clone())
}

/// The artifact id an excerpt names.
fn artifact_id(text: &str) -> Option<String> {
    let start = text.find("artifact `")? + "artifact `".len();
    let end = text[start..].find('`')? + start;
    Some(text[start..end].to_owned())
}

#[tokio::test]
async fn a_large_result_is_replaced_by_an_excerpt_and_stays_retrievable() {
    let store = ArtifactStore::new();
    let model = Arc::new(ScriptedModel::from_fn(|request: &ModelRequest| {
        let last = request.messages.last().unwrap();
        if last.role == Role::User {
            return ScriptedTurn::tool_call("dump", json!({}));
        }
        if last.name.as_deref() == Some("dump") {
            // the model reads the middle of the original back through the artifact id
            let id = artifact_id(&last.text()).expect("the excerpt names its artifact");
            return ScriptedTurn::tool_call("read_artifact", json!({"id": id, "offset": 11000, "limit": 20}));
        }
        ScriptedTurn::text(format!("read: {}", last.text()))
    }));
    // `read_artifact` is contributed by the middleware, on its store.
    let tools = ToolRegistry::new()
        .with(RecordingTool::new("dump").returning(big()))
        .unwrap();
    let agent: Agent<()> = Agent::new(model).with_tools(tools).with_stack(
        MiddlewareStack::new()
            .with(compression(
                "max_tokens = 500\nhead_chars = 30\ntail_chars = 20",
                &store,
            ))
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r1"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "dump it").await.unwrap();

    // the read came back from the original: characters 11000.. are line 1100 (10 characters a line)
    assert!(
        run.final_text().contains("characters 11000..11020 of 20000"),
        "{}",
        run.final_text()
    );
    assert!(
        run.final_text().contains("\nline 1100\nline 1101\n"),
        "{}",
        run.final_text()
    );
    // history keeps the original; the store holds it under the named id
    let dumped = run.messages.iter().find(|m| m.name.as_deref() == Some("dump")).unwrap();
    assert_eq!(dumped.text(), big());
    let id = format!("artifact://r1/{}", dumped.id);
    assert_eq!(store.get(&id).as_deref(), Some(big().as_str()));

    let p = &run.compressions[0];
    assert_eq!(p.middleware, "output_compression");
    assert_eq!(p.source_message_ids, std::slice::from_ref(&dumped.id));
    assert_eq!(p.source_artifact_ids, ["call-dump".to_owned(), id]);
    assert!(p.original_tokens > 4000 && p.compressed_tokens < 100, "{p:?}");
    assert!(p.stable_prefix_preserved);
    // recorded once though the excerpt was sent on two calls
    assert_eq!(run.compressions.len(), 1);
    assert_eq!(
        sink.events()
            .iter()
            .filter(|e| e.kind() == EventKind::Compressed)
            .count(),
        1
    );
}

#[tokio::test]
async fn the_excerpt_keeps_head_and_tail_and_small_or_newest_results_are_left_alone() {
    let store = ArtifactStore::new();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("a", "dump", json!({})),
            ToolCall::new("b", "small", json!({})),
        ]),
        ScriptedTurn::tool_call("dump", json!({})),
        ScriptedTurn::text("ok"),
    ]));
    let tools = dump_and_small();
    let agent: Agent<()> = Agent::new(model.clone()).with_tools(tools).with_stack(
        MiddlewareStack::new()
            .with(compression(
                "max_tokens = 500\nhead_chars = 30\ntail_chars = 20\nkeep_last = 1",
                &store,
            ))
            .unwrap(),
    );
    agent
        .run(&mut RunContext::new(RunConfig::new("r2"), ()), &(), "go")
        .await
        .unwrap();
    let second = &model.requests()[1];
    let tool_texts = tool_texts(&second.messages);
    // `a` is compressed; `b` is small; (keep_last = 1 spares `b`, the newest, anyway)
    assert!(
        tool_texts[0].starts_with("[output compressed: 20000 characters"),
        "{}",
        tool_texts[0]
    );
    assert!(
        tool_texts[0].contains("\nline 0000\nline 0001\nline 0"),
        "head kept: {}",
        tool_texts[0]
    );
    assert!(
        tool_texts[0].ends_with("line 1998\nline 1999\n"),
        "tail kept: {}",
        tool_texts[0]
    );
    assert!(tool_texts[0].contains("[… 19950 characters omitted …]"));
    assert_eq!(tool_texts[1], "tiny");
    // on the third call the second dump is the newest result: kept whole
    let third = &model.requests()[2];
    let last = third.messages.last().unwrap();
    assert_eq!(last.text(), big());
    assert_eq!(store.len(), 1);
    store.remove_run("r2");
    assert!(store.is_empty());
}

#[tokio::test]
async fn read_artifact_fails_clearly_on_an_unknown_id() {
    let store = ArtifactStore::new();
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("read_artifact", json!({"id": "artifact://nope/1"})),
        ScriptedTurn::text("ok"),
    ]);
    let agent: Agent<()> =
        Agent::new(model).with_tools(ToolRegistry::new().with(ReadArtifactTool::new(store)).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let result = run.messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(
        result.text().contains("there is no artifact `artifact://nope/1`"),
        "{}",
        result.text()
    );
}

#[test]
fn bad_configuration_is_rejected() {
    let err = from_toml_str::<OutputCompressionConfig>("head_chars = 0\ntail_chars = 0").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`head_chars` = 0"), "{text}");
    assert!(text.contains("cannot both be 0"), "{text}");
    let err = from_toml_str::<OutputCompressionConfig>("max_tokens = 0").unwrap_err();
    assert!(err.to_string().contains("`max_tokens` = 0"), "{err}");
}

#[tokio::test]
async fn with_a_summariser_a_large_result_is_summarised_once_per_run() {
    let store = ArtifactStore::new();
    let summarizer_model = Arc::new(ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text("2000 numbered lines, line 0000 to line 1999.").with_usage(Usage::new(30, 9)),
    )]));
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("dump", json!({})),
        ScriptedTurn::tool_call("small", json!({})),
        ScriptedTurn::text("ok"),
    ]));
    let tools = dump_and_small();
    let mw = compression("max_tokens = 500", &store)
        .with_summarizer(Arc::new(ModelSummarizer::new(summarizer_model.clone())));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(mw).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r3"), ()), &(), "go")
        .await
        .unwrap();
    // the second and third requests carry the same summary; the summariser was asked once
    for request in &model.requests()[1..] {
        let sent = request
            .messages
            .iter()
            .find(|m| m.name.as_deref() == Some("dump"))
            .unwrap()
            .text()
            .into_owned();
        assert!(sent.starts_with("[output summarised: 20000 characters"), "{sent}");
        assert!(sent.contains("artifact `artifact://r3/"), "{sent}");
        assert!(sent.ends_with("2000 numbered lines, line 0000 to line 1999."), "{sent}");
    }
    assert_eq!(summarizer_model.calls(), 1);
    assert_eq!(run.usage.input_tokens, 30, "the summary's usage is the run's");
    assert_eq!(
        run.compressions[0].policy_version,
        "output_compression/summary/1+model:scripted"
    );
    assert_eq!(store.len(), 1);
}

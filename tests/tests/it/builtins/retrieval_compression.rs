//! `retrieval_compression`: retrieved documents squeezed to a token budget by
//! fair shares, the JSON shape kept, small shares omitted with an id stub,
//! plain-text results as one document, provenance per document, history kept.

use std::sync::Arc;

use serde_json::{json, Value};
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn text(c: char, n: usize) -> String {
    std::iter::repeat_n(c, n).collect()
}

/// Three documents of 20, 200 and 1000 estimated tokens.
fn documents() -> Value {
    json!([
        {"id": "small", "text": text('s', 80), "score": 0.9},
        {"id": "medium", "text": text('m', 800), "score": 0.8},
        {"id": 7, "text": text('l', 4000), "score": 0.7}
    ])
}

async fn run(toml: &str, search: String, notes: &str) -> (Vec<ModelRequest>, AgentRun, Vec<AgentEvent>) {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("c1", "search", json!({"q": "x"})),
            ToolCall::new("c2", "notes", json!({})),
        ]),
        ScriptedTurn::tool_call("other", json!({})),
        ScriptedTurn::text("ok"),
    ]));
    let tools = ToolRegistry::new()
        .with(RecordingTool::new("search").returning(search))
        .unwrap()
        .with(RecordingTool::new("notes").returning(notes))
        .unwrap()
        .with(RecordingTool::new("other").returning(text('o', 4000)))
        .unwrap();
    let mw = from_toml_str::<RetrievalCompressionConfig>(toml).unwrap().build();
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(mw).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "find x").await.unwrap();
    (model.requests(), run, sink.events())
}

fn result_of(request: &ModelRequest, tool: &str) -> String {
    request
        .messages
        .iter()
        .find(|m| m.name.as_deref() == Some(tool))
        .unwrap()
        .text()
        .into_owned()
}

#[tokio::test]
async fn under_the_budget_nothing_changes() {
    let (requests, run, _) = run(
        "tools = [\"search\"]\nbudget_tokens = 2000",
        documents().to_string(),
        "n",
    )
    .await;
    assert_eq!(result_of(&requests[1], "search"), documents().to_string());
    assert!(run.compressions.is_empty());
}

#[tokio::test]
async fn documents_get_fair_shares_and_keep_their_shape() {
    let (requests, run, events) = run(
        "tools = [\"search\"]\nbudget_tokens = 300",
        documents().to_string(),
        "n",
    )
    .await;
    let squeezed: Value = serde_json::from_str(&result_of(&requests[1], "search")).unwrap();
    let docs = squeezed.as_array().unwrap();
    // small fits whole; the other two split the remaining 280 tokens: 140 each = 560 characters
    assert_eq!(docs[0], documents()[0]);
    assert_eq!(docs[1]["text"].as_str().unwrap(), format!("{}…", text('m', 560)));
    assert_eq!(docs[1]["truncated"], json!({"original_chars": 800}));
    assert_eq!(docs[1]["score"], 0.8, "other fields are kept");
    assert_eq!(docs[2]["id"], 7);
    assert_eq!(docs[2]["text"].as_str().unwrap().chars().count(), 561);
    // untouched: other tools' results, and the stored history
    assert_eq!(result_of(&requests[2], "other").len(), 4000);
    let stored = run
        .messages
        .iter()
        .find(|m| m.name.as_deref() == Some("search"))
        .unwrap();
    assert_eq!(stored.text(), documents().to_string());

    // provenance per document, once per run though two calls were squeezed
    assert_eq!(run.compressions.len(), 2);
    assert_eq!(events.iter().filter(|e| e.kind() == EventKind::Compressed).count(), 2);
    let p = &run.compressions[0];
    assert_eq!(p.middleware, "retrieval_compression");
    assert_eq!(p.source_artifact_ids, ["medium", "c1"]);
    assert_eq!(p.source_message_ids, std::slice::from_ref(&stored.id));
    assert_eq!((p.original_tokens, p.compressed_tokens), (200, 140));
    assert_eq!(run.compressions[1].source_artifact_ids, ["7", "c1"]);
    assert_eq!(run.compressions[1].original_tokens, 1000);
    assert!(p.stable_prefix_preserved);
}

#[tokio::test]
async fn a_share_below_min_doc_tokens_is_omitted_with_an_id_stub() {
    let (requests, run, _) = run(
        "tools = [\"search\"]\nbudget_tokens = 300\nmin_doc_tokens = 150",
        documents().to_string(),
        "n",
    )
    .await;
    let squeezed: Value = serde_json::from_str(&result_of(&requests[1], "search")).unwrap();
    assert_eq!(squeezed[1], json!({"id": "medium", "omitted": "retrieval budget"}));
    assert_eq!(squeezed[2], json!({"id": 7, "omitted": "retrieval budget"}));
    assert_eq!(run.compressions[0].compressed_tokens, 0);
}

#[tokio::test]
async fn a_documents_object_and_a_plain_text_result_are_understood() {
    let search = json!({"documents": [
        {"id": "a", "content": text('a', 2000)},
        {"id": "b", "page_content": text('b', 2000)}
    ]})
    .to_string();
    let notes = text('n', 2000);
    let (requests, run, _) = run("tools = [\"search\", \"notes\"]\nbudget_tokens = 600", search, &notes).await;
    let squeezed: Value = serde_json::from_str(&result_of(&requests[1], "search")).unwrap();
    assert_eq!(
        squeezed["documents"][0]["content"].as_str().unwrap().chars().count(),
        801
    );
    assert_eq!(
        squeezed["documents"][1]["page_content"]
            .as_str()
            .unwrap()
            .chars()
            .count(),
        801
    );
    let notes_sent = result_of(&requests[1], "notes");
    assert!(notes_sent.ends_with("… [truncated: 2000 characters]"), "{notes_sent}");
    assert!(notes_sent.starts_with(&text('n', 800)));
    let ids: Vec<&str> = run
        .compressions
        .iter()
        .map(|p| p.source_artifact_ids[0].as_str())
        .collect();
    assert_eq!(ids, ["a", "b", "c2"]);
}

#[test]
fn bad_configuration_is_rejected() {
    let err = from_toml_str::<RetrievalCompressionConfig>("tools = []").unwrap_err();
    assert!(err.to_string().contains("`tools` = []"), "{err}");
    assert!(err.to_string().contains("at least one retrieval tool"), "{err}");
    let err = from_toml_str::<RetrievalCompressionConfig>("tools = [\"s\"]\nbudget_tokens = 10\nmin_doc_tokens = 20")
        .unwrap_err();
    assert!(err.to_string().contains("`min_doc_tokens` = 20"), "{err}");
    let err = from_toml_str::<RetrievalCompressionConfig>("budget_tokens = 10").unwrap_err();
    assert!(err.to_string().contains("tools"), "{err}");
}

/// Counts every text it measures (4 characters a token).
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl tinyagents::harness::tokens::TokenCounter for Counting {
    fn count_text(&self, text: &str) -> u64 {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        text.chars().count().div_ceil(4) as u64
    }
}

fn search_result(id: &str, docs: Value) -> Message {
    let mut m = Message::new(Role::Tool, docs.to_string());
    m.name = Some("search".into());
    m.tool_call_id = Some(id.into());
    m
}

/// A result is read (parsed, its documents counted) once in a run, and squeezed
/// again only when its shares change: a later call with the same history
/// measures nothing, and the request it sends is the same.
#[tokio::test]
async fn a_result_is_read_once_per_run_and_squeezed_again_only_when_its_shares_change() {
    let counter = Arc::new(Counting::default());
    let mw = from_toml_str::<RetrievalCompressionConfig>("tools = [\"search\"]\nbudget_tokens = 300")
        .unwrap()
        .build()
        .with_counter(counter.clone());
    let mut h: tinyagents::testing::MiddlewareHarness = tinyagents::testing::MiddlewareHarness::new(mw);
    let counted = || counter.0.load(std::sync::atomic::Ordering::Relaxed);
    let history = vec![Message::user("find x"), search_result("c1", documents())];
    let first = h.before_model(ModelRequest::new(history.clone())).await.unwrap();
    let after_first = counted();
    // three documents read, two cut (their cuts measured)
    assert_eq!(after_first, 3 + 2);
    let again = h.before_model(ModelRequest::new(history.clone())).await.unwrap();
    assert_eq!(
        counted(),
        after_first,
        "a later call with the same history measures nothing again"
    );
    assert_eq!(again.messages[1].text(), first.messages[1].text());

    // a new result changes every share: the old result is squeezed again (not read again)
    let mut longer = history.clone();
    longer.push(search_result("c2", json!([{"id": "more", "text": text('x', 4000)}])));
    let third = h.before_model(ModelRequest::new(longer)).await.unwrap();
    let old: Value = serde_json::from_str(&third.messages[1].text()).unwrap();
    let before: Value = serde_json::from_str(&first.messages[1].text()).unwrap();
    let cut = |v: &Value, k: usize| v[k]["text"].as_str().unwrap().chars().count();
    assert!(
        cut(&old, 2) < cut(&before, 2),
        "the large document's share shrank: {old}"
    );
    // one new document read; the old three not read again; the new cuts measured
    assert!(
        counted() > after_first + 1 && counted() <= after_first + 1 + 3,
        "{}",
        counted()
    );
}

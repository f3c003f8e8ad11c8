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

// --- at the tool boundary (`at_tool = true`) --------------------------------

/// A model asking for `dump`, then `delete`, then answering.
fn dump_then_delete() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(|request: &ModelRequest| {
        let last = request.messages.last().unwrap();
        match last.name.as_deref() {
            _ if last.role == Role::User => ScriptedTurn::tool_call("dump", json!({})),
            Some("dump") => ScriptedTurn::tool_call("delete", json!({"path": "a.txt"})),
            _ => ScriptedTurn::text("done"),
        }
    }))
}

fn compressed_events(sink: &CollectingSink) -> Vec<tinyagents::harness::provenance::CompressionProvenance> {
    sink.events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::Compressed { provenance, .. } => Some(*provenance),
            _ => None,
        })
        .collect()
}

const AT_TOOL: &str = "max_tokens = 500\nhead_chars = 30\ntail_chars = 20\nat_tool = true";

#[tokio::test]
async fn at_tool_a_large_result_enters_history_compressed_with_provenance() {
    let store = ArtifactStore::new();
    let agent: Agent<()> = Agent::new(dump_then_delete())
        .with_tools(
            dump_and_small()
                .with(RecordingTool::new("delete").returning("deleted"))
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(compression(AT_TOOL, &store)).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r1"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "dump it").await.unwrap();

    // the history itself holds the excerpt; the original is in the store under the call's id
    let dumped = run.messages.iter().find(|m| m.name.as_deref() == Some("dump")).unwrap();
    let text = dumped.text();
    assert!(text.starts_with("[output compressed: 20000 characters"), "{text}");
    assert_eq!(artifact_id(&text).as_deref(), Some("artifact://r1/call-dump"));
    assert_eq!(store.get("artifact://r1/call-dump").as_deref(), Some(big().as_str()));
    // the small result is untouched
    assert_eq!(tool_texts(&run.messages).last().map(String::as_str), Some("deleted"));

    assert_eq!(run.compressions.len(), 1, "{:?}", run.compressions);
    let p = &run.compressions[0];
    assert_eq!(p.middleware, "output_compression");
    assert_eq!(p.policy_version, OutputCompressionMiddleware::TOOL_POLICY);
    assert_eq!(p.source_artifact_ids, ["call-dump", "artifact://r1/call-dump"]);
    assert!(p.original_tokens > 500 && p.compressed_tokens < 100, "{p:?}");
    assert!(p.stable_prefix_preserved);
    assert_eq!(compressed_events(&sink), run.compressions, "one event per compression");
}

#[tokio::test]
async fn at_tool_with_a_summariser_the_summary_enters_history_once() {
    let store = ArtifactStore::new();
    let summarizer_model = Arc::new(ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text("2000 numbered lines.").with_usage(Usage::new(30, 9)),
    )]));
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("dump", json!({})),
        ScriptedTurn::tool_call("small", json!({})),
        ScriptedTurn::text("ok"),
    ]));
    let mw = compression(AT_TOOL, &store).with_summarizer(Arc::new(ModelSummarizer::new(summarizer_model.clone())));
    let agent: Agent<()> = Agent::new(model)
        .with_tools(dump_and_small())
        .with_stack(MiddlewareStack::new().with(mw).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r4"), ()), &(), "go")
        .await
        .unwrap();
    let dumped = run.messages.iter().find(|m| m.name.as_deref() == Some("dump")).unwrap();
    let text = dumped.text();
    assert!(text.starts_with("[output summarised: 20000 characters"), "{text}");
    assert!(text.ends_with("2000 numbered lines."), "{text}");
    assert_eq!(summarizer_model.calls(), 1);
    assert_eq!(run.usage.input_tokens, 30, "the summary's usage is the run's");
    assert_eq!(run.compressions.len(), 1);
    assert_eq!(
        run.compressions[0].policy_version,
        "output_compression/tool/summary/1+model:scripted"
    );
    assert_eq!(store.get("artifact://r4/call-dump").as_deref(), Some(big().as_str()));
}

#[test]
fn at_tool_refuses_keep_last() {
    let err = from_toml_str::<OutputCompressionConfig>("at_tool = true\nkeep_last = 2").unwrap_err();
    assert!(err.to_string().contains("keep_last"), "{err}");
    assert!(err.to_string().contains("at_tool"), "{err}");
}

#[tokio::test]
async fn a_resumed_durable_run_restores_its_record_and_does_not_compress_twice() {
    use tinyagents::graph::{AgentGraph, Checkpointer, MemoryCheckpointer};

    let store = ArtifactStore::new();
    let delete = RecordingTool::new("delete").returning("deleted");
    let agent: Agent<()> = Agent::new(dump_then_delete())
        .with_tools(dump_and_small().with(delete.clone()).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
                .unwrap()
                .with(compression(AT_TOOL, &store))
                .unwrap(),
        );
    let checkpoints = MemoryCheckpointer::new();

    // the first segment compresses `dump`'s result, then pauses before `delete`
    let sink1 = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r1"), ()).with_sink(sink1.clone());
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "dump it", "t1", &checkpoints)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    let first = compressed_events(&sink1);
    assert_eq!(first.len(), 1);
    let saved = checkpoints.latest("t1").await.unwrap().unwrap().state;
    let saved = saved
        .get(OutputCompressionMiddleware::STATE_KEY)
        .cloned()
        .expect("the record is in the checkpoint");
    assert_eq!(saved["calls"]["call-dump"], "artifact://r1/call-dump");

    // the resumed segment: nothing compressed again, the provenance whole
    let resume = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([("call-delete", Decision::Approve)])
        .unwrap();
    let sink2 = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r2"), ()).with_sink(sink2.clone());
    let run = AgentGraph::new(&agent)
        .resume_with(&mut ctx, &(), "t1", &checkpoints, resume)
        .await
        .unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(delete.calls().len(), 1);
    assert!(compressed_events(&sink2).is_empty(), "no compression was redone");
    assert_eq!(run.compressions, first, "the earlier segment's provenance, once");
    let dumped: Vec<_> = run
        .messages
        .iter()
        .filter(|m| m.name.as_deref() == Some("dump"))
        .collect();
    assert_eq!(dumped.len(), 1);
    assert_eq!(dumped[0].text().matches("[output compressed").count(), 1);
    assert_eq!(store.len(), 1);

    // a call run again in a resumed run (a crash before its result was kept):
    // same artifact, no second provenance
    let stack = MiddlewareStack::new().with(compression(AT_TOOL, &store)).unwrap();
    let sink3 = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r3"), ()).with_sink(sink3.clone());
    ctx.flow_mut()
        .update_state(OutputCompressionMiddleware::STATE_KEY, saved);
    stack.run_before_agent(&mut ctx, &()).await.unwrap();
    let call = ToolCall::new("call-dump", "dump", json!({}));
    let mut result = ToolResult::ok(&call, big());
    stack.run_after_tool(&mut ctx, &(), &mut result).await.unwrap();
    assert_eq!(artifact_id(&result.content).as_deref(), Some("artifact://r1/call-dump"));
    assert!(compressed_events(&sink3).is_empty());
    let log = ctx.locals().local::<tinyagents::harness::compression::CompressionLog>();
    assert_eq!(log.entries(), first, "restored, not recorded again");
}

#[tokio::test]
async fn a_damaged_restored_record_fails_before_agent() {
    let store = ArtifactStore::new();
    let stack = MiddlewareStack::new().with(compression(AT_TOOL, &store)).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    ctx.flow_mut()
        .update_state(OutputCompressionMiddleware::STATE_KEY, json!({"calls": "not a map"}));
    let err = stack.run_before_agent(&mut ctx, &()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("output_compression"), "{err}");
}

#[tokio::test]
async fn at_tool_large_arguments_reach_the_tool_whole_and_the_model_a_stand_in() {
    let store = ArtifactStore::new();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<serde_json::Value>::new()));
    let model = Arc::new(ScriptedModel::from_fn({
        let seen = seen.clone();
        move |request: &ModelRequest| {
            let last = request.messages.last().unwrap();
            if last.role == Role::User {
                return ScriptedTurn::tool_call("save", json!({"content": big()}));
            }
            // what the model sees of its own call on the next turn
            let call = request
                .messages
                .iter()
                .flat_map(|m| m.tool_calls.iter())
                .next()
                .unwrap();
            seen.lock().unwrap().push(call.arguments.clone());
            ScriptedTurn::text("saved")
        }
    }));
    let save = RecordingTool::new("save").returning("ok");
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(save.clone()).unwrap())
        .with_stack(MiddlewareStack::new().with(compression(AT_TOOL, &store)).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r1"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "save it").await.unwrap();

    // the tool ran with its arguments whole; history keeps them whole too
    assert_eq!(save.calls()[0], json!({"content": big()}));
    let asked = run.messages.iter().flat_map(|m| m.tool_calls.iter()).next().unwrap();
    assert_eq!(asked.arguments, json!({"content": big()}));
    // the model saw a stand-in naming the artifact that holds them
    let seen = seen.lock().unwrap().clone();
    let stand_in = seen[0]["compressed_arguments"].as_str().expect("a stand-in");
    assert_eq!(
        artifact_id(stand_in).as_deref(),
        Some("artifact://r1/call-save/arguments")
    );
    let stored: serde_json::Value =
        serde_json::from_str(&store.get("artifact://r1/call-save/arguments").unwrap()).unwrap();
    assert_eq!(stored, json!({"content": big()}));

    assert_eq!(run.compressions.len(), 1, "{:?}", run.compressions);
    let p = &run.compressions[0];
    assert_eq!(p.policy_version, OutputCompressionMiddleware::TOOL_ARGUMENTS_POLICY);
    assert_eq!(
        p.source_artifact_ids,
        ["call-save", "artifact://r1/call-save/arguments"]
    );
    assert!(p.original_tokens > 500 && p.compressed_tokens < 100, "{p:?}");
    assert_eq!(compressed_events(&sink), run.compressions);

    // restored in a later segment: the call run again is not recorded twice,
    // and the model still sees the stand-in
    let state = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::StateUpdated { key, value, .. } if key == OutputCompressionMiddleware::STATE_KEY => Some(value),
            _ => None,
        })
        .last()
        .expect("the record is run state");
    let stack = MiddlewareStack::new().with(compression(AT_TOOL, &store)).unwrap();
    let sink2 = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r2"), ()).with_sink(sink2.clone());
    ctx.flow_mut()
        .update_state(OutputCompressionMiddleware::STATE_KEY, state);
    stack.run_before_agent(&mut ctx, &()).await.unwrap();
    let mut call = asked.clone();
    stack.run_before_tool(&mut ctx, &(), &mut call).await.unwrap();
    assert_eq!(
        call.arguments,
        json!({"content": big()}),
        "the tool still gets them whole"
    );
    let mut request = ModelRequest::new(run.messages.to_vec());
    stack.run_before_model(&mut ctx, &(), &mut request).await.unwrap();
    let shown = request
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter())
        .next()
        .unwrap();
    assert_eq!(shown.arguments, seen[0]);
    assert!(compressed_events(&sink2).is_empty(), "nothing compressed twice");
}

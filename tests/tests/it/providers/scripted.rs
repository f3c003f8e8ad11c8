//! The scripted model's replay of a reply: the exact deltas it streams, and
//! that accumulating them gives the reply back (for any reply: a property).

use proptest::prelude::*;
use serde_json::json;
use tinyagents::harness::message::{ContentPart, MessageData, MessageId};
use tinyagents::harness::model::{ChatModel, DeltaContent, FinishReason, ModelDelta, ResponseAccumulator, StreamExt};
use tinyagents::prelude::*;

/// A reply with every kind of part the replay cuts: reasoning, text with a
/// double and a trailing space, an empty text, two tool calls (one with
/// non-ASCII arguments), reported usage.
fn rich_reply() -> ModelResponse {
    let message = Message::from(MessageData {
        id: MessageId::new("m-1"),
        role: Role::Assistant,
        content: vec![
            ContentPart::Reasoning {
                text: "think hard".into(),
            },
            ContentPart::text("Hello  there "),
            ContentPart::text(""),
            ContentPart::text("end"),
        ],
        tool_calls: vec![
            ToolCall::new("c1", "search", json!({"q": "zürich"})),
            ToolCall::new("c2", "echo", json!({})),
        ],
        tool_call_id: None,
        name: None,
    });
    ModelResponse {
        message,
        usage: Usage::new(7, 3),
        usage_reported: true,
        finish_reason: FinishReason::ToolCalls,
        model: None,
    }
}

fn call(index: u32, id: Option<&str>, name: Option<&str>, arguments: &str) -> ModelDelta {
    ModelDelta::new(DeltaContent::ToolCall {
        index,
        id: id.map(str::to_owned),
        name: name.map(str::to_owned),
        arguments: arguments.to_owned(),
    })
}

#[test]
fn a_reply_streams_its_text_in_words_and_each_call_in_two_halves() {
    let expected = vec![
        ModelDelta::reasoning("think "),
        ModelDelta::reasoning("hard"),
        ModelDelta::text("Hello "),
        ModelDelta::text(" "),
        ModelDelta::text("there "),
        ModelDelta::text("end"),
        // split at the middle character, never inside one
        call(0, Some("c1"), Some("search"), r#"{"q":"z"#),
        call(0, None, None, r#"ürich"}"#),
        call(1, Some("c2"), Some("echo"), "{"),
        call(1, None, None, "}"),
        ModelDelta::usage(Usage::new(7, 3)),
        ModelDelta::finish(FinishReason::ToolCalls),
    ];
    assert_eq!(ScriptedModel::deltas_for(&rich_reply()), expected);
}

#[tokio::test]
async fn the_stream_is_the_listed_deltas_and_accumulates_to_the_reply() {
    let reply = rich_reply();
    let model = ScriptedModel::new([ScriptedTurn::Reply(reply.clone())]);
    let stream = model.stream(&ModelRequest::default()).await.unwrap();
    assert_eq!(stream.size_hint().0, 1, "a reply streams at least its finish");
    let streamed: Vec<ModelDelta> = stream.map(Result::unwrap).collect().await;
    assert_eq!(streamed, ScriptedModel::deltas_for(&reply));

    let mut acc = ResponseAccumulator::new();
    for delta in streamed {
        acc.push_owned(delta);
    }
    let back = acc.finish().unwrap();
    assert_eq!(back.message.text(), "Hello  there end");
    assert_eq!(back.message.reasoning(), "think hard");
    assert_eq!(back.message.tool_calls, reply.message.tool_calls);
    assert_eq!(back.usage, reply.usage);
    assert_eq!(back.finish_reason, FinishReason::ToolCalls);
}

#[tokio::test]
async fn a_reply_shared_with_the_script_is_replayed_without_changing_it() {
    // The queue holds the only handle on a scripted reply's message, so the
    // replay moves its strings out; a reply whose message is shared elsewhere
    // must be copied instead, and the other handle must see it unchanged.
    let reply = rich_reply();
    let kept = reply.message.clone();
    let model = ScriptedModel::new([ScriptedTurn::Reply(reply)]);
    let streamed: Vec<ModelDelta> = model
        .stream(&ModelRequest::default())
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(streamed, ScriptedModel::deltas_for(&rich_reply()));
    assert_eq!(kept, rich_reply().message);
}

/// Text with the characters the cutting cares about: spaces (runs of them,
/// leading and trailing), multi-byte characters, nothing at all.
fn text() -> impl Strategy<Value = String> {
    "[a-z é☃  ]{0,20}"
}

/// A reply of any shape: a reasoning part, text parts, tool calls whose
/// argument strings hold quotes, backslashes and multi-byte characters, and
/// usage reported or not.
fn reply() -> impl Strategy<Value = ModelResponse> {
    (
        text(),
        proptest::collection::vec(text(), 0..4),
        proptest::collection::vec(("[a-z]{1,6}", "[a-zé☃ \"\\\\{}]{0,12}"), 0..4),
        proptest::option::of((0u64..1000, 0u64..1000)),
    )
        .prop_map(|(reasoning, texts, calls, usage)| {
            let mut content = vec![ContentPart::Reasoning { text: reasoning }];
            content.extend(texts.into_iter().map(ContentPart::text));
            let tool_calls = calls
                .into_iter()
                .enumerate()
                .map(|(i, (key, value))| ToolCall::new(format!("c{i}"), "t", json!({ key: value })))
                .collect();
            ModelResponse {
                message: Message::from(MessageData {
                    id: MessageId::new("m"),
                    role: Role::Assistant,
                    content,
                    tool_calls,
                    tool_call_id: None,
                    name: None,
                }),
                usage: usage.map_or_else(Usage::default, |(i, o)| Usage::new(i, o)),
                usage_reported: usage.is_some(),
                finish_reason: FinishReason::Stop,
                model: None,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_reply_streams_in_whole_words_and_accumulates_back_to_itself(reply in reply()) {
        let deltas = ScriptedModel::deltas_for(&reply);
        for d in &deltas {
            if let DeltaContent::Text { text } | DeltaContent::Reasoning { text } = &d.content {
                // a piece is never empty, and only the last piece of a part
                // may end without its space
                prop_assert!(!text.is_empty());
                let body = text.strip_suffix(' ').unwrap_or(text);
                prop_assert!(!body.contains(' '), "a piece holds one word: {text:?}");
            }
        }
        prop_assert_eq!(deltas.last(), Some(&ModelDelta::finish(FinishReason::Stop)));
        let mut acc = ResponseAccumulator::new();
        for delta in deltas {
            acc.push_owned(delta);
        }
        let back = acc.finish().unwrap();
        prop_assert_eq!(back.message.text(), reply.message.text());
        prop_assert_eq!(back.message.reasoning(), reply.message.reasoning());
        prop_assert_eq!(&back.message.tool_calls, &reply.message.tool_calls);
        prop_assert_eq!(back.usage, reply.usage);
        prop_assert_eq!(back.usage_reported, reply.usage_reported);
    }
}

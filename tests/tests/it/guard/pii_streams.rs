//! `pii` and the streams: the held-back tail reaches every wrap inside it
//! (`structured_output` registered after `pii` accepts a valid reply the
//! first time), tool progress deltas and streamed tool-call argument deltas
//! are redacted before the sink, a value split across deltas never leaks,
//! and a stream that ends without its finish delta still releases its tail.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tinyagents::harness::model::{DeltaContent, FinishReason};
use tinyagents::harness::tool::{ToolContext, ToolOutput};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use super::pii_support::{
    pii_agent, redacting_stack, stream_arguments, stream_call, streamed_arguments, streamed_text, Fallback, Rng,
};

fn events_text(events: &[AgentEvent]) -> String {
    format!("{events:?}")
}

fn text_deltas(text: &str, size: usize) -> Vec<ModelDelta> {
    let chars: Vec<char> = text.chars().collect();
    let mut out: Vec<ModelDelta> = chars
        .chunks(size)
        .map(|c| ModelDelta::text(c.iter().collect::<String>()))
        .collect();
    out.push(ModelDelta::finish(FinishReason::Stop));
    out
}

#[tokio::test]
async fn structured_output_inside_pii_sees_the_whole_reply_and_accepts_it_at_once() {
    let schema = json!({
        "type": "object",
        "properties": { "city": {"type": "string"}, "contact": {"type": "string"} },
        "required": ["city", "contact"],
        "additionalProperties": false
    });
    // The reply ends with an email: pii holds back its tail until the finish delta.
    let reply = r#"{"city": "Lyon", "contact": "mayor@lyon.example.fr"}"#;
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::Deltas(text_deltas(reply, 3)),
        ScriptedTurn::text(r#"{"city": "Lyon", "contact": "none"}"#),
    ]));
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        redacting_stack()
            .with(StructuredOutputMiddleware::new(schema).unwrap())
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "Tell me about Lyon").await.unwrap();
    assert_eq!(model.calls(), 1, "a valid reply is not re-asked");
    assert_eq!(
        run.structured_output,
        Some(json!({"city": "Lyon", "contact": "[REDACTED_EMAIL]"}))
    );
    let events = sink.events();
    assert_eq!(
        streamed_text(&events),
        r#"{"city": "Lyon", "contact": "[REDACTED_EMAIL]"}"#
    );
    assert!(!events_text(&events).contains("mayor@"));
}

#[tokio::test]
async fn a_wrap_inside_pii_sees_the_whole_scrubbed_reply() {
    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);
    #[wrap_model(name = "inner")]
    async fn inner(
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        let response = next.run(ctx, state, request).await?.into_response();
        ctx.locals()
            .local::<Seen>()
            .0
            .lock()
            .unwrap()
            .push(response.message.text().into_owned());
        Ok(response.into())
    }
    let text = "call me at +44 20 7946 0958 or mail ann@example.com";
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Deltas(text_deltas(text, 2))]))
        .with_stack(redacting_stack().with(Inner).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    let expected = "call me at [REDACTED_PHONE] or mail [REDACTED_EMAIL]";
    assert_eq!(ctx.locals().local::<Seen>().0.lock().unwrap().as_slice(), [expected]);
    assert_eq!(run.final_text(), expected);
}

#[tokio::test]
async fn a_stream_without_a_finish_delta_still_releases_its_tail() {
    let deltas = vec![ModelDelta::text("mail ann@exa"), ModelDelta::text("mple.com please")];
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Deltas(deltas)])).with_stack(redacting_stack());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "mail [REDACTED_EMAIL] please");
    assert!(!events_text(&sink.events()).contains("ann@"));
}

fn progress_tool(pieces: Vec<String>, output: &'static str) -> impl Tool {
    tool_fn("scan", "Reports progress.", move |cx: ToolContext, _args: Value| {
        for p in &pieces {
            cx.progress(p.clone());
        }
        async move { Ok(ToolOutput::from(output)) }
    })
}

async fn run_with_tool(pii: PiiMiddleware, tool: impl Tool + 'static) -> (Result<AgentRun>, Vec<AgentEvent>) {
    let model = ScriptedModel::new([ScriptedTurn::tool_call("scan", json!({})), ScriptedTurn::text("done")]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(tool).unwrap())
        .with_stack(MiddlewareStack::new().with(pii).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await;
    (run, sink.events())
}

fn progress_of(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolDelta { delta, .. } => Some(delta.content.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn tool_progress_is_redacted_before_the_sink_even_split_one_character_at_a_time() {
    let text = "found key AKIAIOSFODNN7EXAMPLE for bob@example.com at 10.1.2.3";
    let pieces: Vec<String> = text.chars().map(String::from).collect();
    let (run, events) = run_with_tool(PiiMiddleware::new(PiiStrategy::Redact), progress_tool(pieces, "ok")).await;
    run.unwrap();
    assert_eq!(
        progress_of(&events),
        "found key [REDACTED_SECRET] for [REDACTED_EMAIL] at [REDACTED_IPV4]"
    );
    let all = events_text(&events);
    for tell in ["AKIA", "ODNN7", "bob@", "10.1.2"] {
        assert!(!all.contains(tell), "`{tell}` reached the sink");
    }
    // counts are reported for the progress, never values
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::Custom { name, data, .. } if name == "pii_detected" && data["where"] == "tool_delta"
    )));
}

#[tokio::test]
async fn blocked_tool_progress_fails_the_call_and_sends_nothing() {
    let pieces = vec![
        "token ghp_abcdefghijklmnop".to_owned(),
        "qrstuvwxyz0123456789AB done".to_owned(),
    ];
    let (run, events) = run_with_tool(PiiMiddleware::new(PiiStrategy::Block), progress_tool(pieces, "ok")).await;
    let all = events_text(&events);
    assert!(!all.contains("ghp_"), "no part of the token reached the sink");
    match run {
        // the refusal became the call's error result, naming counts only
        Ok(run) => {
            let msg = run.messages.iter().find(|m| m.role == Role::Tool).unwrap().text();
            assert!(msg.contains("1 secret") && !msg.contains("ghp_"), "{msg}");
        }
        Err(e) => assert!(
            e.to_string().contains("1 secret") && !e.to_string().contains("ghp_"),
            "{e}"
        ),
    }
}

#[tokio::test]
async fn progress_from_concurrent_calls_is_kept_apart() {
    // two calls in one batch, each streaming half of an address: neither half is a value
    // on its own, and each call's stream is redacted on its own
    let a = tool_fn("a", "a", |cx: ToolContext, _: Value| {
        cx.progress("mail ann@exam");
        cx.progress("ple.com");
        async { Ok(ToolOutput::from("a")) }
    });
    let b = tool_fn("b", "b", |cx: ToolContext, _: Value| {
        cx.progress("plain text");
        async { Ok(ToolOutput::from("b")) }
    });
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "a", json!({})),
            ToolCall::new("2", "b", json!({})),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(a).unwrap().with(b).unwrap())
        .with_stack(redacting_stack());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    agent.run(&mut ctx, &(), "go").await.unwrap();
    let events = sink.events();
    let of = |id: &str| -> String {
        events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolDelta { delta, .. } if delta.call_id == id => Some(delta.content.as_str()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(of("1"), "mail [REDACTED_EMAIL]");
    assert_eq!(of("2"), "plain text");
}

#[tokio::test]
async fn streamed_argument_deltas_are_redacted_and_the_tool_gets_clean_arguments() {
    // fullwidth digits, a JSON \u escape for `@`, a key that is an email, a secret-named key
    let raw = r#"{"card": "４１１１ １１１１ １１１１ １１１１", "to": "ann\u0040example.com", "bob@example.com": 1, "api_key": "abc"}"#;
    let (calls, events) = stream_call(raw, 1).await;
    let expected = json!({
        "card": "[REDACTED_CREDIT_CARD]",
        "to": "[REDACTED_EMAIL]",
        "[REDACTED_EMAIL]": 1,
        "api_key": "[REDACTED_SECRET]",
    });
    assert_eq!(calls, std::slice::from_ref(&expected));
    let streamed = streamed_arguments(&events);
    assert_eq!(
        serde_json::from_str::<Value>(&streamed).unwrap(),
        expected,
        "{streamed}"
    );
    let all = events_text(&events);
    for tell in ["１１１１", "ann\\\\u0040", "bob@", "\"abc\""] {
        assert!(!all.contains(tell), "`{tell}` reached the sink: {all}");
    }
}

#[tokio::test]
async fn block_refuses_streamed_arguments_before_any_call_runs() {
    let send = RecordingTool::new("send").returning("sent");
    let raw = r#"{"to": "ann@example.com"}"#;
    let deltas = vec![
        ModelDelta::new(DeltaContent::ToolCall {
            index: 0,
            id: Some("c1".into()),
            name: Some("send".into()),
            arguments: raw[..12].to_owned(),
        }),
        ModelDelta::new(DeltaContent::ToolCall {
            index: 0,
            id: None,
            name: None,
            arguments: raw[12..].to_owned(),
        }),
        ModelDelta::finish(FinishReason::ToolCalls),
    ];
    let agent = pii_agent(
        ScriptedModel::new([ScriptedTurn::Deltas(deltas)]),
        send.clone(),
        PiiStrategy::Block,
    );
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let err = agent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(
        err.to_string().contains("streamed tool-call arguments (1 email)"),
        "{err}"
    );
    assert!(send.calls().is_empty());
    assert!(!events_text(&sink.events()).contains("ann@"));
}

#[tokio::test]
async fn the_transcript_handed_back_carries_no_pii() {
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("noted")])).with_stack(redacting_stack());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent
        .run(&mut ctx, &(), "my card is 4111 1111 1111 1111, mail ann@example.com")
        .await
        .unwrap();
    assert_eq!(
        run.messages[0].text(),
        "my card is [REDACTED_CREDIT_CARD], mail [REDACTED_EMAIL]"
    );
    assert!(!format!("{:?}", run.messages).contains("4111"));
    assert!(sink.events().iter().any(|e| matches!(
        e,
        AgentEvent::Custom { name, data, .. } if name == "pii_detected" && data["where"] == "transcript"
    )));
}

#[tokio::test]
async fn hooks_registered_after_pii_see_scrubbed_tool_results() {
    // `after_tool` hooks run in reverse registration order: one registered after
    // `pii` runs before pii's `after_tool`, yet the result is already clean (pii
    // scrubs it in its tool wrap).
    #[derive(Default)]
    struct Peeked(Mutex<Vec<String>>);
    #[after_tool(name = "peek")]
    fn peek(ctx: &mut RunContext, result: &mut ToolResult) -> Result<()> {
        ctx.locals()
            .local::<Peeked>()
            .0
            .lock()
            .unwrap()
            .push(result.content.clone());
        Ok(())
    }
    let lookup = RecordingTool::new("lookup").returning("owner bob@example.com");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("lookup", json!({})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(lookup).unwrap())
    .with_stack(redacting_stack().with(Peek).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(
        ctx.locals().local::<Peeked>().0.lock().unwrap().as_slice(),
        ["owner [REDACTED_EMAIL]"]
    );
}

#[tokio::test]
async fn a_tool_name_or_call_id_carrying_pii_is_scrubbed_and_runs_nothing() {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("ann@example.com", json!({})),
        ScriptedTurn::text("done"),
    ]);
    let lookup = RecordingTool::new("lookup");
    let agent = pii_agent(model, lookup.clone(), PiiStrategy::Redact);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert!(lookup.calls().is_empty());
    let all = format!("{:?} {:?}", sink.events(), run.messages);
    assert!(!all.contains("ann@"), "{all}");
    // the id the model gave (`call-ann@example.com`) became one PII-free id, still pairing call and result
    let call = &run
        .messages
        .iter()
        .find(|m| !m.tool_calls.is_empty())
        .unwrap()
        .tool_calls[0];
    let result = run.messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(call.id.starts_with("pii_"), "{}", call.id);
    assert_eq!(result.tool_call_id.as_deref(), Some(call.id.as_str()));
    assert!(result.text().contains("no tool named"), "{}", result.text());
}

#[tokio::test]
async fn a_fallback_after_a_failed_stream_gets_none_of_its_held_back_text() {
    // attempt 1 streams text that pii holds back, then fails; a wrap inside pii answers instead
    let model = ScriptedModel::new([ScriptedTurn::FailAfter(
        vec![ModelDelta::text("the number is 4111 1111 ")],
        TinyAgentsError::model("connection reset", false),
    )]);
    let agent: Agent<()> = Agent::new(model).with_stack(redacting_stack().with(Fallback).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(run.final_text(), "from the fallback");
    assert!(!events_text(&sink.events()).contains("4111"));
}

/// A `pii` whose streams may hold back at most 64 KiB (the least the setting takes).
fn capped(strategy: &str) -> PiiMiddleware {
    let toml = format!("strategy = \"{strategy}\"\nmax_held_bytes = 65536");
    PiiMiddleware::from(tinyagents::config::from_toml_str::<PiiConfig>(&toml).unwrap())
}

/// Streams `head` then `body` `times` times as text deltas through `pii`
/// alone; what reached the sink, and how it ended.
async fn stream_endless(pii: PiiMiddleware, head: &str, body: &str, times: usize) -> (Result<()>, String) {
    let mut h: tinyagents::testing::MiddlewareHarness = tinyagents::testing::MiddlewareHarness::new(pii);
    let mut sent = String::new();
    let pieces = std::iter::once(head.to_owned()).chain(std::iter::repeat_n(body.to_owned(), times));
    for piece in pieces {
        match h.model_deltas([piece.as_str()]).await {
            Ok(deltas) => sent.extend(deltas.iter().filter_map(|d| d.as_text().map(str::to_owned))),
            Err(e) => return (Err(e), sent),
        }
    }
    let mut finish = ModelDelta::finish(FinishReason::Stop);
    let end = h.stack.run_on_model_delta(&mut h.ctx, &h.state, &mut finish).await;
    sent.extend(
        finish
            .take_released()
            .iter()
            .filter_map(|d| d.as_text().map(str::to_owned)),
    );
    (end, sent)
}

fn assert_held_too_long(end: Result<()>, what: &str) {
    let err = end.expect_err(what);
    match &err {
        TinyAgentsError::LimitExceeded { limit, message } => {
            assert_eq!(limit, "max_held_bytes", "{what}");
            assert!(
                message.contains("the streamed reply") && message.contains("Raise `max_held_bytes`"),
                "{what}: the error names the place and the fix: {message}"
            );
        }
        other => panic!("{what}: expected LimitExceeded, got {other}"),
    }
}

/// Text a stream holds back waiting for a value to end, or that its detectors
/// do not count, is bounded: past `max_held_bytes` the stream fails closed and
/// none of the held text is sent.
#[tokio::test]
async fn a_stream_that_holds_back_more_than_max_held_bytes_fails_closed() {
    let zw = "\u{200b}".repeat(1000); // 3,000 bytes the detectors see as nothing
    let cases: [(&str, &str, &str); 4] = [
        ("a url that never ends", "see https://example.com/", "abcdefghij"),
        (
            "a private key that never ends",
            "-----BEGIN RSA PRIVATE KEY-----\n",
            "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8\n",
        ),
        ("invisible characters", "hello ", &zw),
        ("a digit run that never ends", "n ", "1234567890"),
    ];
    for (what, head, body) in cases {
        let times = 200_000 / body.len(); // about 200 KB, three times the cap
        let (end, sent) = stream_endless(capped("redact"), head, body, times).await;
        assert_held_too_long(end, what);
        // nothing after the start of the held text was sent
        assert!(
            sent.len() <= head.len() + 64 * 1024,
            "{what}: {} bytes sent",
            sent.len()
        );
        assert!(
            !sent.contains(&body[..body.len().min(30)]),
            "{what}: held text was sent"
        );
    }
}

/// The cap bounds what is *held*, not what passes: long plain text, in small
/// deltas or in one large one, streams through whole under the smallest cap.
#[tokio::test]
async fn long_plain_text_streams_through_under_the_smallest_cap() {
    let line = "The quick brown fox jumps over the lazy dog, again and again.\n";
    let (end, sent) = stream_endless(capped("redact"), "", line, 300_000 / line.len()).await;
    end.unwrap();
    assert_eq!(sent, line.repeat(300_000 / line.len()));
    let (end, sent) = stream_endless(capped("redact"), &line.repeat(5000), "", 0).await;
    end.unwrap();
    assert_eq!(sent, line.repeat(5000));
    // a value inside long text is still redacted
    let (end, sent) = stream_endless(capped("redact"), "mail ann@example.com ", line, 2000).await;
    end.unwrap();
    assert!(sent.starts_with("mail [REDACTED_EMAIL] The quick"), "{}", &sent[..60]);
}

#[tokio::test]
async fn tool_progress_that_never_lets_a_value_end_fails_the_call_at_the_cap() {
    let pieces: Vec<String> = std::iter::once("see https://example.com/".to_owned())
        .chain(std::iter::repeat_n("abcdefghij".to_owned(), 20_000))
        .collect();
    let (run, events) = run_with_tool(capped("redact"), progress_tool(pieces, "ok")).await;
    let all = events_text(&events);
    assert!(!all.contains("abcdefghij"), "no held progress reached the sink");
    let text = match run {
        Ok(run) => run
            .messages
            .iter()
            .find(|m| m.role == Role::Tool)
            .unwrap()
            .text()
            .into_owned(),
        Err(e) => e.to_string(),
    };
    assert!(
        text.contains("max_held_bytes") && text.contains("a tool's progress"),
        "{text}"
    );
}

#[test]
fn max_held_bytes_must_cover_the_characters_held() {
    use tinyagents::config::from_toml_str;
    let err = from_toml_str::<PiiConfig>("max_match_chars = 8192\nmax_held_bytes = 65536").unwrap_err();
    assert_eq!(err.errors()[0].path, "max_held_bytes");
    assert_eq!(err.errors()[0].value, Some(json!(65536)));
    assert!(
        err.errors()[0].rule.contains("131072") && err.errors()[0].rule.contains("max_match_chars"),
        "{}",
        err.errors()[0].rule
    );
    let err = from_toml_str::<PiiConfig>("max_held_bytes = 1000").unwrap_err();
    assert_eq!(err.errors()[0].path, "max_held_bytes");
    assert!(from_toml_str::<PiiConfig>("max_match_chars = 8192\nmax_held_bytes = 131072").is_ok());
}

/// A card streamed as a JSON number becomes a string placeholder: the
/// argument text stays JSON, the call runs, and a number past `u64` or
/// written with a fraction or an exponent is read digit for digit.
#[tokio::test]
async fn numbers_in_streamed_arguments_become_strings_and_the_call_still_runs() {
    let raw = concat!(
        r#"{"card":4111111111111111,"phone":14155552671,"email":"a@b.co","#,
        r#" "deep": [ {"x": [6011111111111117, -5500000000000004, 4111111111111111.5e3]} ],"#,
        r#" "card19": 6011000990139424009, "token": 12345678, "n": 4096, "t": true, "z": null}"#,
    );
    let expected = json!({
        "card": "[REDACTED_CREDIT_CARD]",
        "phone": "[REDACTED_PHONE]",
        "email": "[REDACTED_EMAIL]",
        "deep": [{ "x": ["[REDACTED_CREDIT_CARD]", "-[REDACTED_CREDIT_CARD]", "[REDACTED_CREDIT_CARD].5e3"] }],
        "card19": "[REDACTED_CREDIT_CARD]",
        "token": "[REDACTED_SECRET]",
        "n": 4096,
        "t": true,
        "z": null,
    });
    // the whole text, redacted at once, is the same document
    let (whole, _) = PiiMiddleware::new(PiiStrategy::Redact).redact_text(raw).unwrap();
    assert_eq!(serde_json::from_str::<Value>(&whole).unwrap(), expected, "{whole}");
    for size in [1, 2, 3, 5, 7, 16, 64, 400] {
        let (calls, streamed) = stream_arguments(raw, size).await;
        assert_eq!(calls, std::slice::from_ref(&expected), "pieces of {size}");
        assert_eq!(
            streamed, whole,
            "pieces of {size}: the stream equals the whole text redacted"
        );
        assert!(!streamed.contains("4111111111111111"), "{streamed}");
    }
}

/// A JSON answer streamed as text (what `structured_output` reads) stays JSON too.
#[tokio::test]
async fn a_json_answer_with_a_numeric_card_stays_json_when_streamed() {
    let reply = r#"{"city": "Lyon", "card": 4111111111111111, "n": 3}"#;
    for size in [1, 4, 9] {
        let model = ScriptedModel::new([ScriptedTurn::Deltas(text_deltas(reply, size))]);
        let agent: Agent<()> = Agent::new(model).with_stack(redacting_stack());
        let sink = Arc::new(CollectingSink::new());
        let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
        let run = agent.run(&mut ctx, &(), "go").await.unwrap();
        let expected = json!({ "city": "Lyon", "card": "[REDACTED_CREDIT_CARD]", "n": 3 });
        let streamed = streamed_text(&sink.events());
        assert_eq!(
            serde_json::from_str::<Value>(&streamed).unwrap(),
            expected,
            "{streamed}"
        );
        assert_eq!(serde_json::from_str::<Value>(&run.final_text()).unwrap(), expected);
    }
}

/// A random JSON document of numbers (cards among them), strings holding
/// values, escaped quotes and backslashes, and nesting.
fn random_doc(rng: &mut Rng, depth: usize) -> String {
    const LEAVES: &[&str] = &[
        "4111111111111111",
        "-5500000000000004",
        "6011000990139424009",
        "4111111111111111.25",
        "4111111111111111e2",
        "14155552671",
        r#""14155552671""#,
        r#""+4155552671""#,
        "123456",
        "1700000000123",
        "42",
        "0.5",
        "true",
        "null",
        r#""4111 1111 1111 1111""#,
        r#""a \" 4111111111111111 \\""#,
        r#""\\\" 6011111111111117""#,
        r#""ann@example.com""#,
        r#""x: [1, 2]""#,
        r#""{\"card\": 4111111111111111}""#,
    ];
    // keys naming a phone (a number or bare digits under one is a phone) and keys that do not
    const KEYS: &[&str] = &[
        "k",
        "phone",
        "mobileNo",
        "home_phone",
        "phones",
        "hotel",
        "cells",
        "telemetry_id",
    ];
    let spaces = ["", " ", "\n", "  "];
    let sp = |rng: &mut Rng| spaces[rng.below(spaces.len())];
    if depth == 0 || rng.below(3) == 0 {
        return LEAVES[rng.below(LEAVES.len())].to_owned();
    }
    let n = rng.below(4);
    let items: Vec<String> = (0..n).map(|_| random_doc(rng, depth - 1)).collect();
    if rng.below(2) == 0 {
        format!("[{}{}{}]", sp(rng), items.join(&format!(",{}", sp(rng))), sp(rng))
    } else {
        let fields: Vec<String> = items
            .iter()
            .enumerate()
            .map(|(i, v)| format!("\"{}{i}\":{}{v}", KEYS[rng.below(KEYS.len())], sp(rng)))
            .collect();
        format!("{{{}{}}}", fields.join(","), sp(rng))
    }
}

/// Random JSON documents streamed as tool-call arguments in random pieces:
/// each stream equals the whole text redacted, parses, and holds no card.
#[tokio::test]
async fn random_json_documents_stream_like_the_whole_text_and_stay_json() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    for case in 0..150 {
        let doc = format!("{{\"d\": {}}}", random_doc(&mut rng, 4));
        serde_json::from_str::<Value>(&doc).expect("the generator writes JSON");
        let (whole, _) = pii.redact_text(&doc).unwrap();
        let parsed: Value = serde_json::from_str(&whole).unwrap_or_else(|e| panic!("case {case}: {e}: {whole}"));
        let size = 1 + rng.below(12);
        let (calls, streamed) = stream_arguments(&doc, size).await;
        assert_eq!(streamed, whole, "case {case}, pieces of {size}: {doc}");
        assert_eq!(calls, vec![parsed], "case {case}");
        for card in [
            "4111111111111111",
            "5500000000000004",
            "6011000990139424009",
            "6011111111111117",
        ] {
            assert!(!whole.contains(card), "case {case}: {whole}");
        }
    }
}

//! `PiiMiddleware`: every detector (and what it must not flag), the four
//! strategies, every place it applies, the split-delta property over random
//! splits, retries, events that carry counts and never values, and configuration.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::from_toml_str;
use tinyagents::harness::model::DeltaContent;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use super::pii_support::{pii_agent, split, Rng};
use crate::support::{run_into, RetryOnce};
use tinyagents::testing::{MiddlewareHarness, RecordingTool};

fn redact(text: &str) -> String {
    PiiMiddleware::new(PiiStrategy::Redact).redact_text(text).unwrap().0
}

#[test]
fn each_detector_finds_its_values() {
    let cases = [
        (
            "write to ann.lee+x@mail.example.co.uk today",
            "write to [REDACTED_EMAIL] today",
        ),
        ("card 4111 1111 1111 1111.", "card [REDACTED_CREDIT_CARD]."),
        ("card 4111-1111-1111-1111", "card [REDACTED_CREDIT_CARD]"),
        ("card 5500000000000004", "card [REDACTED_CREDIT_CARD]"),
        ("host 192.168.10.254 up", "host [REDACTED_IPV4] up"),
        ("v6 2001:db8:85a3::8a2e:370:7334 ok", "v6 [REDACTED_IPV6] ok"),
        ("v6 fe80::1 ok", "v6 [REDACTED_IPV6] ok"),
        ("mac 00:1A:2b:3C:4d:5E.", "mac [REDACTED_MAC_ADDRESS]."),
        ("mac 00-1A-2B-3C-4D-5E", "mac [REDACTED_MAC_ADDRESS]"),
        ("call 555-123-4567 now", "call [REDACTED_PHONE] now"),
        ("call +44 20 7946 0958 now", "call [REDACTED_PHONE] now"),
        ("see https://example.com/a?b=c for more", "see [REDACTED_URL] for more"),
        ("see www.example.org/x", "see [REDACTED_URL]"),
        ("key AKIAIOSFODNN7EXAMPLE here", "key [REDACTED_SECRET] here"),
        (
            "token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
            "token [REDACTED_SECRET]",
        ),
        ("openai sk-proj-abcdefghijklmnopqrstuv123", "openai [REDACTED_SECRET]"),
        ("slack xoxb-1234567890-abcdef", "slack [REDACTED_SECRET]"),
        ("stripe sk_live_0123456789abcdefghij", "stripe [REDACTED_SECRET]"),
        ("-----BEGIN RSA PRIVATE KEY----- body", "[REDACTED_SECRET]"),
        (
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz.123",
            "Authorization: [REDACTED_SECRET]",
        ),
        (
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "jwt [REDACTED_SECRET]",
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(redact(input), expected, "{input}");
    }
}

#[test]
fn ordinary_text_is_left_alone() {
    for text in [
        "card 4111 1111 1111 1112 fails Luhn",
        "use std::io::Read; and a::b::c",
        "at 12:30:45 on 2024-01-15",
        "version 1.2.3 of the crate",
        "order #12345 shipped",
        "ratio 3/4 and 10-20-30",
        "the word bearer alone",
        "héllo wörld 日本語",
    ] {
        assert_eq!(redact(text), text, "{text}");
    }
}

#[test]
fn strategies_mask_hash_and_block() {
    let text = "ann@example.com paid with 4111 1111 1111 1111";
    let mask = PiiMiddleware::new(PiiStrategy::Mask).redact_text(text).unwrap().0;
    assert_eq!(mask, "a***@example.com paid with **** **** **** 1111");
    let hash = PiiMiddleware::new(PiiStrategy::Hash);
    let (h1, _) = hash.redact_text(text).unwrap();
    let (h2, _) = hash.redact_text("ann@example.com").unwrap();
    assert!(h1.starts_with("<email_hash:") && !h1.contains("ann@"), "{h1}");
    assert_eq!(h1.split(' ').next(), Some(h2.as_str()), "hashing is stable");
    assert_ne!(hash.redact_text("bob@example.com").unwrap().0, h2);
    let counts = PiiMiddleware::new(PiiStrategy::Block).redact_text(text).unwrap_err();
    assert_eq!((counts["email"], counts["credit_card"]), (1, 1));
    // nothing found: block passes the text through
    assert_eq!(
        PiiMiddleware::new(PiiStrategy::Block).redact_text("fine").unwrap().0,
        "fine"
    );
}

#[test]
fn user_patterns_and_type_selection() {
    let pii = PiiMiddleware::new(PiiStrategy::Redact)
        .only(["email"])
        .unwrap()
        .with_pattern("employee_id", r"EMP-\d{6}")
        .unwrap();
    let (out, counts) = pii.redact_text("EMP-123456 at ann@example.com from 10.0.0.1").unwrap();
    assert_eq!(out, "[REDACTED_EMPLOYEE_ID] at [REDACTED_EMAIL] from 10.0.0.1");
    assert_eq!(counts.len(), 2);
    let err = PiiMiddleware::new(PiiStrategy::Redact).only(["passport"]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    let err = PiiMiddleware::new(PiiStrategy::Redact)
        .with_pattern("bad", "(")
        .unwrap_err();
    assert!(err.to_string().contains("custom.bad"), "{err}");
}

const VOCAB: &[&str] = &[
    "hello",
    "world",
    "the",
    "card",
    "is",
    "call",
    "me",
    "at",
    "and",
    "café",
    "日本",
    "—",
    "ok.",
    "x",
    "1234",
    "ann@example.com",
    "bob.smith+tag@mail.example.org",
    "4111 1111 1111 1111",
    "5500-0000-0000-0004",
    "4111 1111 1111 1112",
    "192.168.0.1",
    "10.20.30.40",
    "2001:db8::ff00:42:8329",
    "00:1a:2b:3c:4d:5e",
    "555-123-4567",
    "+1 415 555 2671",
    "https://example.com/path?q=1",
    "www.example.net",
    "AKIAIOSFODNN7EXAMPLE",
    "sk-abcdefghijklmnopqrstuvwxyz012345",
    "Bearer abcdefghijklmnopqrstuvwxyz0123",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
];

fn random_text(rng: &mut Rng) -> String {
    let n = 1 + rng.below(120);
    let mut words = Vec::with_capacity(n);
    for _ in 0..n {
        words.push(VOCAB[rng.below(VOCAB.len())]);
    }
    // sometimes glue words with punctuation instead of spaces
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push_str([" ", " ", " ", ", ", "\n", "", "-"][rng.below(7)]);
        }
        out.push_str(w);
    }
    out
}

/// Splits `text` at random char boundaries (pieces of 0..=12 chars, sometimes empty).
fn random_split(rng: &mut Rng, text: &str) -> Vec<String> {
    split(rng, text, 12)
}

async fn stream_through(pii: PiiMiddleware, pieces: &[String]) -> (String, String, Vec<AgentEvent>) {
    let mut deltas: Vec<ModelDelta> = pieces.iter().map(ModelDelta::text).collect();
    deltas.push(ModelDelta::finish(Default::default()));
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Deltas(deltas)]))
        .with_stack(MiddlewareStack::new().with(pii).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    let events = sink.events();
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelDelta { delta, .. } => match &delta.content {
                DeltaContent::Text { text } => Some(text.as_str()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    (streamed, run.final_text(), events)
}

#[tokio::test]
async fn a_split_stream_redacts_exactly_like_the_whole_text_over_random_splits() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..150 {
        let text = random_text(&mut rng);
        let pieces = random_split(&mut rng, &text);
        assert_eq!(pieces.concat(), text);
        let strategy = [PiiStrategy::Redact, PiiStrategy::Mask, PiiStrategy::Hash][case % 3];
        let pii = PiiMiddleware::new(strategy);
        let (expected, _) = pii.redact_text(&text).unwrap();
        let (streamed, final_text, _) = stream_through(pii, &pieces).await;
        assert_eq!(
            streamed, expected,
            "case {case}: the stream, concatenated\ntext: {text:?}\npieces: {pieces:?}"
        );
        assert_eq!(final_text, expected, "case {case}: the reply");
    }
}

#[tokio::test]
async fn values_split_one_character_per_delta_never_reach_the_sink() {
    let secret = "card 4111 1111 1111 1111 mail ann@example.com";
    let pieces: Vec<String> = secret.chars().map(String::from).collect();
    let (streamed, _, events) = stream_through(PiiMiddleware::new(PiiStrategy::Redact), &pieces).await;
    assert_eq!(streamed, "card [REDACTED_CREDIT_CARD] mail [REDACTED_EMAIL]");
    let everything = format!("{events:?}");
    for value in ["4111", "ann@", "example.com"] {
        assert!(!everything.contains(value), "`{value}` leaked into an event");
    }
    let detected: Vec<&serde_json::Value> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Custom { name, data, .. } if name == "pii_detected" => Some(data),
            _ => None,
        })
        .collect();
    let total: u64 = detected
        .iter()
        .filter(|d| d["where"] == "stream")
        .map(|d| {
            d["counts"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum::<u64>()
        })
        .sum();
    assert_eq!(total, 2, "counts by type: {detected:?}");
}

#[tokio::test]
async fn block_fails_the_run_on_a_streamed_value_and_names_only_counts() {
    let pieces: Vec<String> = ["my key is AKIAIOSF", "ODNN7EXAMPLE ok"].map(String::from).to_vec();
    let mut deltas: Vec<ModelDelta> = pieces.iter().map(ModelDelta::text).collect();
    deltas.push(ModelDelta::finish(Default::default()));
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::Deltas(deltas)])).with_stack(
        MiddlewareStack::new()
            .with(PiiMiddleware::new(PiiStrategy::Block))
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::new());
    let err = run_into(&agent, sink.clone(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("1 secret"), "{err}");
    assert!(!err.to_string().contains("AKIA"));
    assert!(
        !format!("{:?}", sink.events()).contains("ODNN7"),
        "no part of the key was forwarded"
    );
}

#[tokio::test]
async fn requests_tool_arguments_and_tool_results_are_scrubbed() {
    let lookup = RecordingTool::new("lookup").returning("owner: bob@example.com, ip 10.1.2.3");
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("lookup", json!({ "email": "ann@example.com", "n": 1 })),
        ScriptedTurn::text("done"),
    ]));
    let agent = pii_agent(model.clone(), lookup.clone(), PiiStrategy::Redact);
    let run = agent
        .run(
            &mut RunContext::new(RunConfig::new("r"), ()),
            &(),
            "my card is 4111111111111111",
        )
        .await
        .unwrap();
    let first = &model.requests()[0];
    assert_eq!(first.messages[0].text(), "my card is [REDACTED_CREDIT_CARD]");
    assert_eq!(lookup.calls(), [json!({ "email": "[REDACTED_EMAIL]", "n": 1 })]);
    let tool_msg = run.messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert_eq!(tool_msg.text(), "owner: [REDACTED_EMAIL], ip [REDACTED_IPV4]");
    // the history keeps the redacted tool call the model made
    let assistant = run.messages.iter().find(|m| !m.tool_calls.is_empty()).unwrap();
    assert_eq!(assistant.tool_calls[0].arguments["email"], "[REDACTED_EMAIL]");
    // the second request carries only redacted text
    let second = format!("{:?}", model.requests()[1].messages);
    assert!(!second.contains("bob@") && !second.contains("4111"), "{second}");
}

#[tokio::test]
async fn a_blocked_tool_result_names_counts_and_apply_to_limits_the_scope() {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Block));
    let call = ToolCall::new("1", "t", json!({}));
    let err = h
        .after_tool(ToolResult::ok(&call, "ssh 10.0.0.1 as root@host.example"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("1 email, 1 ipv4"), "{err}");
    let mut only_input: MiddlewareHarness =
        MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Redact).apply_to(true, false, false, false));
    let r = only_input
        .after_tool(ToolResult::ok(&call, "ann@example.com"))
        .await
        .unwrap();
    assert_eq!(r.content, "ann@example.com");
}

#[tokio::test]
async fn a_failed_attempts_held_back_text_does_not_leak_into_the_retry() {
    // attempt 1 streams part of a card then fails; attempt 2 streams clean text
    let model = ScriptedModel::new([
        ScriptedTurn::FailAfter(
            vec![ModelDelta::text("number 4111 1111 ")],
            TinyAgentsError::model("connection reset", true),
        ),
        ScriptedTurn::text("all good"),
    ]);
    let agent: Agent<()> = Agent::new(model).with_stack(
        MiddlewareStack::new()
            .with(RetryOnce)
            .unwrap()
            .with(PiiMiddleware::new(PiiStrategy::Redact))
            .unwrap(),
    );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "all good");
}

#[test]
fn bad_configuration_is_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<PiiConfig>("strategy = \"shred\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "strategy");
    assert_eq!(err.errors()[0].value, Some(json!("shred")));
    assert!(err.errors()[0].rule.contains("one of"), "{}", err.errors()[0].rule);
    let err = from_toml_str::<PiiConfig>("types = [\"email\", \"passport\"]").unwrap_err();
    assert_eq!(err.errors()[0].path, "types");
    assert_eq!(err.errors()[0].value, Some(json!("passport")));
    let err = from_toml_str::<PiiConfig>("custom = { employee = \"EMP-(\" }").unwrap_err();
    assert_eq!(err.errors()[0].path, "custom.employee");
    assert!(err.errors()[0].rule.contains("valid regular expression"));
    let err = from_toml_str::<PiiConfig>("custom = { email = \"x\" }").unwrap_err();
    assert_eq!(err.errors()[0].path, "custom.email");
    let err = from_toml_str::<PiiConfig>("max_match_chars = 10").unwrap_err();
    assert_eq!(err.errors()[0].path, "max_match_chars");
    assert_eq!(err.errors()[0].rule, "must be in 256..=65536");
}

#[tokio::test]
async fn block_stops_a_reply_whose_tool_call_carries_pii_before_the_tool_runs() {
    let send = RecordingTool::new("send").returning("sent");
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("send", json!({ "to": "ann@example.com", "body": "hi" })),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(send.clone()).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(PiiMiddleware::new(PiiStrategy::Block).apply_to(false, false, true, false))
                .unwrap(),
        );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("tool-call arguments (1 email)"), "{err}");
    assert!(!err.to_string().contains("ann@"), "{err}");
    assert!(send.calls().is_empty(), "the call carrying PII never ran");
    // a call built elsewhere (not from a reply) is refused on its own in `before_tool`
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Block));
    let err = h
        .before_tool(ToolCall::new("1", "send", json!({ "to": ["x", "bob@example.com"] })))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("(1 email)"), "{err}");
}

/// The issue's document: a card and a phone written as JSON numbers beside an email.
fn numbers_doc() -> serde_json::Value {
    json!({
        "card": 4111111111111111u64,
        "phone": 14155552671u64,
        "email": "a@b.co",
        "deep": [{ "x": [6011111111111117u64, { "y": -5500000000000004i64 }] }],
        "card19": 6011000990139424009u64,
        "float": 4111111111111111.0,
        "max_tokens": 4096,
        "epoch_ms": 1700000000123u64,
        "ratio": 0.25,
    })
}

/// What [`numbers_doc`] must become: each card, and the phone under its key, a string placeholder, the rest as it was.
fn numbers_doc_redacted() -> serde_json::Value {
    json!({
        "card": "[REDACTED_CREDIT_CARD]",
        "phone": "[REDACTED_PHONE]",
        "email": "[REDACTED_EMAIL]",
        "deep": [{ "x": ["[REDACTED_CREDIT_CARD]", { "y": "-[REDACTED_CREDIT_CARD]" }] }],
        "card19": "[REDACTED_CREDIT_CARD]",
        "float": "[REDACTED_CREDIT_CARD].0",
        "max_tokens": 4096,
        "epoch_ms": 1700000000123u64,
        "ratio": 0.25,
    })
}

#[tokio::test]
async fn numbers_are_checked_like_strings_in_arguments_results_and_earlier_turns() {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Redact));
    // tool arguments
    let call = h.before_tool(ToolCall::new("1", "t", numbers_doc())).await.unwrap();
    assert_eq!(call.arguments, numbers_doc_redacted());
    // a tool result's structured data, and its content when that is a JSON document
    let mut result = ToolResult::ok(&call, numbers_doc().to_string());
    result.data = Some(numbers_doc());
    let result = h.after_tool(result).await.unwrap();
    assert_eq!(result.data, Some(numbers_doc_redacted()));
    let content: serde_json::Value = serde_json::from_str(&result.content).expect("the content stays JSON");
    assert_eq!(content, numbers_doc_redacted());
    // an earlier turn's tool call, sent back to the provider
    let history = vec![
        Message::user("go"),
        Message::assistant("").with_tool_calls(vec![ToolCall::new("c1", "t", numbers_doc())]),
        Message::tool("c1", "t", numbers_doc().to_string()),
    ];
    let request = h.before_model(ModelRequest::new(history)).await.unwrap();
    assert_eq!(request.messages[1].tool_calls[0].arguments, numbers_doc_redacted());
    let text: serde_json::Value = serde_json::from_str(&request.messages[2].text()).expect("still JSON");
    assert_eq!(text, numbers_doc_redacted());
    // the text API keeps a JSON document valid too; plain text is not quoted
    let (out, counts) = PiiMiddleware::new(PiiStrategy::Redact)
        .redact_text(r#"{"card":4111111111111111,"phone":14155552671,"email":"a@b.co"}"#)
        .unwrap();
    assert_eq!(
        out,
        r#"{"card":"[REDACTED_CREDIT_CARD]","phone":"[REDACTED_PHONE]","email":"[REDACTED_EMAIL]"}"#
    );
    assert_eq!((counts["credit_card"], counts["phone"], counts["email"]), (1, 1, 1));
    assert_eq!(redact("card 4111111111111111"), "card [REDACTED_CREDIT_CARD]");
    assert_eq!(redact("4111111111111111"), "[REDACTED_CREDIT_CARD]");
    // a JSON text inside a string of raw JSON text is read as text; parsed, it stays JSON
    assert_eq!(
        redact(r#"{"doc": "{\"card\": 4111111111111111}"}"#),
        r#"{"doc": "{\"card\": [REDACTED_CREDIT_CARD]}"}"#
    );
    assert_eq!(
        redact(r#"{"card": 4111111111111111}"#),
        r#"{"card": "[REDACTED_CREDIT_CARD]"}"#
    );
    // outside a phone key, a phone needs a `+` or separators, as a string and as a number alike
    assert_eq!(redact("call 14155552671"), "call 14155552671");
    assert_eq!(redact(r#"{"n": 14155552671}"#), r#"{"n": 14155552671}"#);
    assert_eq!(redact("call +14155552671"), "call [REDACTED_PHONE]");
}

#[tokio::test]
async fn a_number_is_masked_hashed_or_blocked_like_a_string() {
    let mut mask: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Mask));
    let call = mask
        .before_tool(ToolCall::new("1", "t", json!({ "card": 4111111111111111u64 })))
        .await
        .unwrap();
    assert_eq!(call.arguments, json!({ "card": "************1111" }));
    let mut hash: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Hash));
    let call = hash
        .before_tool(ToolCall::new("1", "t", json!({ "card": 4111111111111111u64 })))
        .await
        .unwrap();
    let hashed = call.arguments["card"].as_str().expect("a string placeholder");
    assert!(hashed.starts_with("<credit_card_hash:"), "{hashed}");
    let mut block: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Block));
    let err = block
        .before_tool(ToolCall::new("1", "t", json!({ "n": [1, 4111111111111111u64] })))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("1 credit_card") && !err.to_string().contains("4111"),
        "{err}"
    );
}

#[tokio::test]
async fn a_reply_s_numeric_card_reaches_neither_the_tool_nor_the_history() {
    let send = RecordingTool::new("send").returning("sent");
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("send", numbers_doc()),
        ScriptedTurn::text("done"),
    ]);
    let agent = pii_agent(model, send.clone(), PiiStrategy::Redact);
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_eq!(send.calls(), vec![numbers_doc_redacted()]);
    let assistant = run.messages.iter().find(|m| !m.tool_calls.is_empty()).unwrap();
    assert_eq!(assistant.tool_calls[0].arguments, numbers_doc_redacted());
}

/// The password in a URL's user info, of any scheme (a connection string a
/// tool prints from the environment), reaches neither the model nor the
/// history; the user name, host and path stay.
#[tokio::test]
async fn the_password_of_a_connection_string_of_any_scheme_never_reaches_the_model() {
    let env = RecordingTool::new("env").returning(
        "DATABASE_URL=postgres://admin:Sup3rS3cretPass@db.internal:5432/app\n\
         REDIS_URL=redis://:R3disS3cretPass@cache:6379/0\n\
         AMQP_URL=amqp://guest:Amqp5ecretPass@rabbit:5672\n\
         MONGO_URL=mongodb+srv://app:M0ngoS3cret@cluster0.example.net/db\n\
         SMTP_URL=smtp://mailer:p@ss:w0rd@smtp.internal:587",
    );
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("env", json!({})),
        ScriptedTurn::text("done"),
    ]));
    let agent = pii_agent(model.clone(), env, PiiStrategy::Redact);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "show env")
        .await
        .unwrap();
    let second = format!("{:?}", model.requests()[1].messages);
    for pw in [
        "Sup3rS3cretPass",
        "R3disS3cretPass",
        "Amqp5ecretPass",
        "M0ngoS3cret",
        "w0rd",
        "p@ss",
    ] {
        assert!(!second.contains(pw), "{pw} reached the model: {second}");
    }
    // (`Sup3rS3cretPass@db.internal` is an email too, and the longer value wins)
    assert!(second.contains("postgres://admin:[REDACTED_"), "{second}");
    assert!(second.contains("redis://:[REDACTED_SECRET]@cache:6379/0"), "{second}");
    assert!(
        second.contains("amqp://guest:[REDACTED_SECRET]@rabbit:5672"),
        "{second}"
    );
}

#[test]
fn a_connection_string_without_a_password_is_left_alone() {
    for text in [
        "redis://cache:6379/0",
        "postgres://app@db:5432/app",
        "see sqlite://data/app.db",
        "at 10:30 we met ann in the lobby",
    ] {
        assert_eq!(redact(text), text);
    }
    // a password given as a query value is a `password=` value
    let out = redact("jdbc:postgresql://db/app?user=app&password=Qw3rtyPass");
    assert_eq!(out, "jdbc:postgresql://db/app?user=app&password=[REDACTED_SECRET]");
}

/// A quoted value after a secret's name is taken whole, up to its closing
/// quote: a passphrase holds spaces.
#[test]
fn a_quoted_passphrase_after_a_secret_name_is_replaced_whole() {
    for (text, want) in [
        (
            r#"password = "correct horse battery staple""#,
            r#"password = "[REDACTED_SECRET]""#,
        ),
        ("db_password: 'tr0ub4dor and 3'", "db_password: '[REDACTED_SECRET]'"),
        (r#"secret="a b" and more"#, r#"secret="[REDACTED_SECRET]" and more"#),
        ("API_KEY='x y z' # local", "API_KEY='[REDACTED_SECRET]' # local"),
        ("Pwd=tr0ub4dor;Server=db", "Pwd=[REDACTED_SECRET];Server=db"),
    ] {
        assert_eq!(redact(text), want, "{text}");
    }
    // in JSON text the value stays inside its string, and the document parses
    let doc = r#"{"note": "password=", "x": "y", "z": "password=\"a b\""}"#;
    let out = redact(doc);
    let parsed: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(parsed["x"], "y", "{out}");
    assert!(!out.contains("a b"), "{out}");
}

/// `Authorization:` with an auth scheme: the credential after the scheme is
/// replaced, digits or not, whatever the scheme.
#[test]
fn the_credential_after_an_auth_scheme_is_replaced_not_the_scheme() {
    for (text, token) in [
        (
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyzABCDEF",
            "abcdefghijklmnopqrstuvwxyzABCDEF",
        ),
        (
            "authorization: bearer abcdefghijklmnopqrstuvwxyz",
            "abcdefghijklmnopqrstuvwxyz",
        ),
        (
            "Proxy-Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l",
            "YWxhZGRpbjpvcGVuc2VzYW1l",
        ),
        ("Authorization: Token abcdefghijklmnopqrst", "abcdefghijklmnopqrst"),
        (
            "Authorization: Negotiate YIIGhgYGKwYBBQUCoIIGejCCBnag",
            "YIIGhgYGKwYBBQUCoIIGejCCBnag",
        ),
        (
            "-H 'Authorization: Bearer abcdefghijklmnopqrst'",
            "abcdefghijklmnopqrst",
        ),
        ("?authorization=abcdefghijklmnop&page=2", "abcdefghijklmnop"),
    ] {
        let out = redact(text);
        assert!(!out.contains(token), "{text} -> {out}");
    }
    assert_eq!(
        redact("Authorization: Bearer abcdefghijklmnopqrstuvwxyzABCDEF"),
        "Authorization: Bearer [REDACTED_SECRET]"
    );
}

/// Session cookies: the whole `Cookie:` / `Set-Cookie:` header value, and a
/// session id after its name.
#[test]
fn session_cookies_and_session_ids_are_replaced() {
    for (text, value) in [
        (
            "Cookie: sessionid=q8w7e6r5t4y3u2i1o0pASDFGHJ",
            "q8w7e6r5t4y3u2i1o0pASDFGHJ",
        ),
        ("cookie: a=1; sid=Zx9Yw8Vu7Ts6", "Zx9Yw8Vu7Ts6"),
        (
            "Set-Cookie: session=Zm9vYmFyYmF6cXV4; Path=/; HttpOnly\nnext line",
            "Zm9vYmFyYmF6cXV4",
        ),
        ("PHPSESSID=4kq0b3m7s1a9p2v8c6d5e4f3g2", "4kq0b3m7s1a9p2v8c6d5e4f3g2"),
        ("session_id: abcdefghijkl", "abcdefghijkl"),
        (r#"{"cookie": "sid=x1"}"#, "sid=x1"),
    ] {
        let out = redact(text);
        assert!(!out.contains(value), "{text} -> {out}");
    }
    assert!(redact("Set-Cookie: s=abcdef\nnext line").ends_with("\nnext line"));
    // prose about sessions and cookies is left alone
    for text in [
        "the session ended at noon",
        "cookie jar: empty",
        "a cookie: chocolate chip",
    ] {
        let out = redact(text);
        assert!(out.contains("session") || out.contains("cookie"), "{out}");
    }
}

/// An IBAN in lower or mixed case, grouped by spaces, dashes, dots or tabs.
#[test]
fn an_iban_is_found_in_any_case_and_with_any_group_separator() {
    for text in [
        "iban de89370400440532013000 please",
        "iban de89 3704 0044 0532 0130 00 please",
        "iban DE89-3704-0044-0532-0130-00 please",
        "iban De89.3704.0044.0532.0130.00 please",
        "iban DE89\t3704\t0044\t0532\t0130\t00 please",
        "iban gb82 west 1234 5698 7654 32 please",
    ] {
        assert_eq!(redact(text), "iban [REDACTED_IBAN] please", "{text}");
    }
    // the check digits still decide
    for text in [
        "iban de88370400440532013000 please",
        "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709",
    ] {
        assert_eq!(redact(text), text);
    }
}

/// A secret registered with the process's redactor (an API key of a
/// provider's configuration, `redactor().add(…)`) that no pattern knows is a
/// `secret` to `pii` too: printed by a tool, it never reaches the model.
#[tokio::test]
async fn a_registered_secret_printed_by_a_tool_never_reaches_the_model() {
    use tinyagents::harness::secrets::redactor;
    let key = "9f3c2a7be41d4c0e8a5b6d7e1f203948";
    redactor().add(key);
    let printenv = RecordingTool::new("printenv").returning(format!("{key}\n"));
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("printenv", json!({"name": "AZURE_OPENAI_API_KEY"})),
        ScriptedTurn::text("done"),
    ]));
    let agent = pii_agent(model.clone(), printenv, PiiStrategy::Redact);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let second = format!("{:?}", model.requests()[1].messages);
    assert!(
        !second.contains(key) && second.contains("[REDACTED_SECRET]"),
        "{second}"
    );
    // a piece of it, in fullwidth letters, escaped in JSON, in a key
    for text in [
        format!("the key is {}...", &key[..20]),
        "ｋｅｙ ９ｆ３ｃ２ａ７ｂｅ４１ｄ４ｃ０ｅ８ａ５ｂ６ｄ７ｅ１ｆ２０３９４８".to_owned(),
        format!(r#"{{"k": "\u0039{}"}}"#, &key[1..]),
    ] {
        let out = redact(&text);
        assert!(
            !out.contains(&key[4..16]) && out.contains("[REDACTED_SECRET]"),
            "{text} -> {out}"
        );
    }
    let (value, counts) = PiiMiddleware::new(PiiStrategy::Redact)
        .redact_value(&json!({ key: [key] }))
        .unwrap();
    assert!(!value.to_string().contains(&key[4..16]), "{value}");
    assert_eq!(counts["secret"], 2);
    // with `secret` off, registered secrets are not looked for either
    let only_email = PiiMiddleware::new(PiiStrategy::Redact).only(["email"]).unwrap();
    assert_eq!(only_email.redact_text(key).unwrap().0, key);
}

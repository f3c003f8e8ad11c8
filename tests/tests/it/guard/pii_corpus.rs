//! `pii` against a generated corpus: every layout of every kind is redacted
//! in the request, the streamed reply and the reply, the streamed tool-call
//! argument deltas and the arguments the tool receives (values and object
//! keys), the tool's progress deltas and its result; every negative stays
//! unchanged everywhere. Run with `--nocapture` to see the figures:
//!
//! ```text
//! cargo test -p tinyagents-tests --test it guard::pii_corpus -- --nocapture
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tinyagents::harness::model::{DeltaContent, FinishReason};
use tinyagents::harness::tool::{ToolContext, ToolOutput};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::MiddlewareHarness;

use super::pii_support::{pii_agent, split, stream_call, Rng};

/// One case: the text, and what every place must show instead.
struct Case {
    kind: &'static str,
    value: String,
    text: String,
    expected: String,
}

fn marker(kind: &str) -> String {
    format!("[REDACTED_{}]", kind.to_ascii_uppercase())
}

const TEMPLATES: &[&str] = &["{v}", "see {v} now", "line one\n{v}\nline two", "x {v}\tend"];

/// `value` in every template; `shown` is what remains of it (the marker, or context + marker).
fn layouts(out: &mut Vec<Case>, kind: &'static str, value: &str, shown: &str, templates: &[&str]) {
    for t in templates {
        out.push(Case {
            kind,
            value: value.to_owned(),
            text: t.replace("{v}", value),
            expected: t.replace("{v}", shown),
        });
    }
}

fn group(digits: &str, sizes: &[usize], sep: &str) -> String {
    let mut parts = Vec::new();
    let mut at = 0;
    for &n in sizes {
        parts.push(&digits[at..at + n]);
        at += n;
    }
    parts.join(sep)
}

fn fullwidth(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_graphic() {
                char::from_u32(c as u32 + 0xFEE0).unwrap()
            } else {
                c
            }
        })
        .collect()
}

fn pseudo(seed: u64, n: usize, alphabet: &[u8]) -> String {
    let mut rng = Rng(seed);
    (0..n).map(|_| alphabet[rng.below(alphabet.len())] as char).collect()
}

const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn positives() -> Vec<Case> {
    let mut out = Vec::new();
    let cc = marker("credit_card");
    let all = TEMPLATES;
    let one = &TEMPLATES[1..2];
    // cards: every separator, fullwidth, glued to `_`, followed by a CVV or an expiry
    for digits in TEST_CARDS {
        let sizes: &[usize] = if digits.len() == 15 { &[4, 6, 5] } else { &[4, 4, 4, 4] };
        let templates = if digits.starts_with("4111") { all } else { one };
        layouts(&mut out, "credit_card", digits, &cc, templates);
        for sep in [
            " ", "-", ".", "\t", "\u{a0}", "  ", "\n", "\u{2009}", "\u{3000}", " - ", "/",
        ] {
            layouts(&mut out, "credit_card", &group(digits, sizes, sep), &cc, one);
        }
        layouts(
            &mut out,
            "credit_card",
            &fullwidth(&group(digits, sizes, " ")),
            &cc,
            one,
        );
        layouts(&mut out, "credit_card", &group(digits, sizes, "\u{200b}"), &cc, one);
        layouts(&mut out, "credit_card", &group(digits, sizes, "\u{ad}"), &cc, one);
        layouts(
            &mut out,
            "credit_card",
            &format!("cc_{digits}"),
            &format!("cc_{cc}"),
            one,
        );
        layouts(
            &mut out,
            "credit_card",
            &format!("{} 12/26", group(digits, sizes, " ")),
            &format!("{cc} 12/26"),
            one,
        );
        layouts(
            &mut out,
            "credit_card",
            &format!("{} exp 12/26 cvv 123", group(digits, sizes, "-")),
            &format!("{cc} exp 12/26 cvv 123"),
            one,
        );
    }
    // a card followed by its CVV: the 19-digit run fails Luhn, the 16-digit window inside it does not
    layouts(
        &mut out,
        "credit_card",
        "4111 1111 1111 1111 123",
        &format!("{cc} 123"),
        all,
    );
    layouts(
        &mut out,
        "credit_card",
        "5500-0000-0000-0004-999",
        &format!("{cc}-999"),
        one,
    );

    let mut emails = vec![
        "ann@example.com".to_owned(),
        "bob.smith+tag@mail.example.org".to_owned(),
        "first.last@sub.domain.co.uk".to_owned(),
        "o'x".replace('\'', "_") + "@example.io",
        "jürgen@exämple.de".to_owned(),
        fullwidth("joe@example.com"),
        "ann\u{200b}@example.com".to_owned(),
        "ann\u{fe6b}example\u{3002}com".to_owned(),
    ];
    emails.push("UPPER.CASE@EXAMPLE.COM".to_owned());
    for e in &emails {
        layouts(&mut out, "email", e, &marker("email"), all);
    }
    for p in [
        "+1 415 555 2671",
        "(415) 555-2671",
        "415.555.2671",
        "+44 20 7946 0958",
        "+49 30 901820",
        "415-555-2671",
        "+1\u{a0}415\u{a0}555\u{a0}2671",
    ] {
        layouts(&mut out, "phone", p, &marker("phone"), all);
    }
    for ip in ["192.168.0.1", "010.001.002.003", "8.8.8.8", "255.255.255.255"] {
        layouts(&mut out, "ipv4", ip, &marker("ipv4"), all);
    }
    for ip in [
        "2001:db8::ff00:42:8329",
        "FE80::1",
        "::ffff:192.168.1.10",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
    ] {
        layouts(&mut out, "ipv6", ip, &marker("ipv6"), all);
    }
    for mac in ["00:1a:2b:3c:4d:5e", "00-1A-2B-3C-4D-5E", "001a.2b3c.4d5e"] {
        layouts(&mut out, "mac_address", mac, &marker("mac_address"), all);
    }
    let long_url = format!("https://example.com/{}", "a".repeat(400));
    for url in [
        "https://example.com/path?q=1",
        "http://user:pw@internal.example/x",
        "www.example.org/x",
        long_url.as_str(),
    ] {
        layouts(&mut out, "url", url, &marker("url"), all);
    }
    for iban in [
        "DE89 3704 0044 0532 0130 00",
        "GB82WEST12345698765432",
        "FR14 2004 1010 0505 0001 3M02 606",
    ] {
        layouts(&mut out, "iban", iban, &marker("iban"), all);
    }
    for ssn in ["123-45-6789", "078 05 1120"] {
        layouts(&mut out, "ssn", ssn, &marker("ssn"), all);
    }
    let secret = marker("secret");
    let jwt = format!(
        "eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}",
        pseudo(1, 900, B64URL),
        pseudo(2, 43, B64URL)
    );
    let bearer = format!("Bearer {}", pseudo(3, 320, B64URL));
    let pem = format!(
        "-----BEGIN RSA PRIVATE KEY-----\n{}\n-----END RSA PRIVATE KEY-----",
        (0..20).map(|i| pseudo(10 + i, 64, B64)).collect::<Vec<_>>().join("\n")
    );
    let openssh = format!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----",
        (0..8).map(|i| pseudo(40 + i, 70, B64)).collect::<Vec<_>>().join("\n")
    );
    let jwe = format!(
        "eyJhbGciOiJSU0EtT0FFUCIsImVuYyI6IkEyNTZHQ00ifQ.{}.{}.{}.{}",
        pseudo(60, 342, B64URL),
        pseudo(61, 16, B64URL),
        pseudo(62, 400, B64URL),
        pseudo(63, 22, B64URL)
    );
    let pgp = format!(
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{}\n-----END PGP PRIVATE KEY BLOCK-----",
        (0..6).map(|i| pseudo(70 + i, 64, B64)).collect::<Vec<_>>().join("\n")
    );
    let sendgrid = format!("SG.{}.{}", pseudo(80, 22, B64URL), pseudo(81, 43, B64URL));
    let pypi = format!("pypi-AgEIcHlwaS5vcmc{}", pseudo(82, 60, B64URL));
    let aws_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    for s in [
        "AKIAIOSFODNN7EXAMPLE",
        "ASIAY34FZKBOKMUTVV7A",
        aws_secret,
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
        "sk-proj-abcdefghijklmnopqrstuv1234567890",
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789",
        "xoxb-1234567890-abcdefghijklmn",
        "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
        "sk_live_0123456789abcdefghij",
        "glpat-abcdefghij0123456789",
        "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH",
        "xapp-1-A0123456789-abcdefghijklmnop",
        "whsec_abcdefghijklmnopqrstuvwxyz012345",
        "npm_abcdefghijklmnopqrstuvwxyz0123456789",
        sendgrid.as_str(),
        pypi.as_str(),
        jwt.as_str(),
        jwe.as_str(),
        pgp.as_str(),
        bearer.as_str(),
        pem.as_str(),
        openssh.as_str(),
    ] {
        layouts(&mut out, "secret", s, &secret, all);
    }
    for (value, shown) in [
        (
            format!("aws_secret_access_key = {aws_secret}"),
            format!("aws_secret_access_key = {secret}"),
        ),
        (
            "AWS_SECRET_ACCESS_KEY=abcdEFGHijklMNOPqrstUVWXyz0123456789/+AB".to_owned(),
            format!("AWS_SECRET_ACCESS_KEY={secret}"),
        ),
        ("password=hunter2hunter2".to_owned(), format!("password={secret}")),
        (
            "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==".to_owned(),
            format!("Authorization: {secret}"),
        ),
        (
            "a PEM with no end -----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC".to_owned(),
            format!("a PEM with no end {secret}"),
        ),
    ] {
        layouts(&mut out, "secret", &value, &shown, &TEMPLATES[..1]);
    }
    out
}

/// Text that must stay exactly as it is.
fn negatives() -> Vec<&'static str> {
    vec![
        "order #12345 shipped",
        "order 2024-000123 shipped on time",
        "invoice INV-2024-0042",
        "ticket #884213 closed",
        "PO 4500012345 approved",
        "2024-01-15T10:30:45Z",
        "2024-01-15 10:30:45.123",
        "2024-01-15 10.30.45",
        "logged at 1700000000",
        "epoch ms 1700000000123",
        "Mon, 15 Jan 2024 10:30:45 GMT",
        "at 12:30:45 on 2024/01/15",
        "version 1.2.3 of the crate",
        "v2.10.4 and 1.2.3-beta.4",
        "rustc 1.82.0 (f6e511eec 2024-10-15)",
        "node v18.17.1",
        "build 10.0.19041.1",
        "release 1.2.3.4.5",
        "550e8400-e29b-41d4-a716-446655440000",
        "UUID 123E4567-E89B-12D3-A456-426614174000",
        "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709",
        "SHA1 DA39A3EE5E6B4B0D3255BFEF95601890AFD80709",
        "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "md5 d41d8cd98f00b204e9800998ecf8427e",
        "commit a1b2c3d fixed it",
        "I have 3 cats and 2 dogs",
        "The meeting is at 10 in room 4B",
        "Chapter 12, page 345",
        "Pi is 3.14159265358979",
        "pay $1,234.56 by Friday",
        "1,000,000 users signed up",
        "temperature 21.5 °C today",
        "The year 1999 was great",
        "score 10-20-30",
        "ratio 3/4 and 10-20-30",
        "I counted 1 2 3 4 5 6 7 8 9 10 11 12 13 sheep",
        "ISBN 978-3-16-148410-0",
        "card 4111 1111 1111 1112 fails Luhn",
        "card ending in 1111",
        "use std::io::Read; and a::b::c",
        "error code 0x1F4 on port 8080",
        "HTTP/1.1 200 OK",
        "x = 42; y = 7",
        "the word bearer alone",
        "a basic idea explained simply",
        "Bearer of bad news",
        "token count: 1500",
        "reset your password: click the link",
        "user at example dot com",
        "ping @mention and a@b",
        "coordinates 48.8566, 2.3522",
        "ZIP 90210-1234",
        "héllo wörld 日本語 — ok",
        "max_tokens = 4096",
        "call me later maybe",
        "route 66 and highway 101",
        "3.14.15 is not an address",
    ]
}

/// JSON text with every non-ASCII character written as a `\u` escape.
fn ascii_json(value: &Value) -> String {
    let mut out = String::new();
    for c in value.to_string().chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// What each place showed in one run.
#[derive(Debug, PartialEq)]
struct Seen {
    request: String,
    arg_stream: Value,
    tool_args: Value,
    tool_progress: String,
    tool_result: String,
    second_request_tool: String,
    streamed_reply: String,
    reply: String,
}

/// One run through every place: the user sends `text`; the model streams a
/// tool call whose arguments carry it (as a value and as a key); the tool
/// reports it as progress and returns it; the model streams it as the answer.
async fn run_everywhere(text: &str, seed: u64) -> (Seen, String) {
    let mut rng = Rng(seed | 1);
    let args = json!({ "note": text, text: 1 });
    let raw = if seed.is_multiple_of(2) {
        args.to_string()
    } else {
        ascii_json(&args)
    };
    let mut deltas = Vec::new();
    for (i, piece) in split(&mut rng, &raw, 9).into_iter().enumerate() {
        deltas.push(ModelDelta::new(DeltaContent::ToolCall {
            index: 0,
            id: (i == 0).then(|| "c1".to_owned()),
            name: (i == 0).then(|| "echo".to_owned()),
            arguments: piece,
        }));
    }
    deltas.push(ModelDelta::finish(FinishReason::ToolCalls));
    let mut answer: Vec<ModelDelta> = split(&mut rng, text, 7).into_iter().map(ModelDelta::text).collect();
    answer.push(ModelDelta::finish(FinishReason::Stop));
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::Deltas(deltas),
        ScriptedTurn::Deltas(answer),
    ]));
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let progress = split(&mut rng, text, 5);
    let tool = {
        let received = received.clone();
        let text = text.to_owned();
        tool_fn("echo", "Echoes its note.", move |cx: ToolContext, args: Value| {
            received.lock().unwrap().push(args);
            for p in &progress {
                cx.progress(p.clone());
            }
            let text = text.clone();
            async move { Ok(ToolOutput::from(text)) }
        })
    };
    let agent = pii_agent(model.clone(), tool, PiiStrategy::Redact);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), text).await.unwrap();
    let events = sink.events();
    let mut arg_stream = String::new();
    let mut streamed_reply = String::new();
    let mut tool_progress = String::new();
    for e in &events {
        match e {
            AgentEvent::ModelDelta { delta, .. } => match &delta.content {
                DeltaContent::ToolCall { arguments, .. } => arg_stream.push_str(arguments),
                DeltaContent::Text { text } => streamed_reply.push_str(text),
                _ => {}
            },
            AgentEvent::ToolDelta { delta, .. } => tool_progress.push_str(&delta.content),
            _ => {}
        }
    }
    let requests = model.requests();
    let tool_msg = |messages: &[Message]| {
        messages
            .iter()
            .find(|m| m.role == Role::Tool)
            .map(|m| m.text().into_owned())
            .unwrap_or_default()
    };
    let seen = Seen {
        request: requests[0].messages[0].text().into_owned(),
        arg_stream: serde_json::from_str(&arg_stream).unwrap_or(Value::String(arg_stream)),
        tool_args: received.lock().unwrap().first().cloned().unwrap_or(Value::Null),
        tool_progress,
        tool_result: tool_msg(&run.messages),
        second_request_tool: tool_msg(&requests[1].messages),
        streamed_reply,
        reply: run.final_text(),
    };
    (seen, format!("{events:?}"))
}

fn expected_seen(expected: &str) -> Seen {
    let args = json!({ "note": expected, expected: 1 });
    Seen {
        request: expected.to_owned(),
        arg_stream: args.clone(),
        tool_args: args,
        tool_progress: expected.to_owned(),
        tool_result: expected.to_owned(),
        second_request_tool: expected.to_owned(),
        streamed_reply: expected.to_owned(),
        reply: expected.to_owned(),
    }
}

/// Distinctive fragments of a value that must never reach an event: 8-character
/// windows of the text that the expected output does not contain, at most 96 of
/// them spread over the text (any leaked run of `8 + step` characters holds one).
fn tells(text: &str, expected: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let step = (chars.len() / 96).max(1);
    chars
        .windows(8)
        .step_by(step)
        .map(|w| w.iter().collect::<String>())
        .filter(|w| w.is_ascii() && !w.contains(['\n', '\t', '"', '\\']) && !expected.contains(w.as_str()))
        .collect()
}

#[tokio::test]
async fn every_positive_layout_is_redacted_in_every_place() {
    let cases = positives();
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    for (i, case) in cases.iter().enumerate() {
        *by_kind.entry(case.kind).or_default() += 1;
        let (whole, counts) = pii.redact_text(&case.text).unwrap();
        assert_eq!(whole, case.expected, "case {i} ({}): {:?}", case.kind, case.text);
        assert!(counts.contains_key(case.kind), "case {i}: counted as {counts:?}");
        let (seen, events) = run_everywhere(&case.text, i as u64).await;
        assert_eq!(
            seen,
            expected_seen(&case.expected),
            "case {i} ({}): {:?}",
            case.kind,
            case.text
        );
        for tell in tells(&case.text, &case.expected) {
            assert!(!events.contains(&tell), "case {i}: `{tell}` reached an event");
        }
    }
    println!("pii corpus: {} positive cases, by kind: {by_kind:?}", cases.len());
    assert!(cases.len() >= 100, "{} positive cases", cases.len());
}

#[tokio::test]
async fn every_negative_stays_unchanged_in_every_place() {
    let cases = negatives();
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    for (i, text) in cases.iter().enumerate() {
        let (out, counts) = pii.redact_text(text).unwrap();
        assert_eq!(out, *text, "negative {i} was changed ({counts:?})");
        let (seen, _) = run_everywhere(text, i as u64).await;
        assert_eq!(seen, expected_seen(text), "negative {i}: {text:?}");
    }
    println!("pii corpus: {} negative cases, all unchanged", cases.len());
    assert!(cases.len() >= 50, "{} negative cases", cases.len());
}

#[tokio::test]
async fn mask_and_hash_cover_the_corpus_and_never_show_the_value() {
    for (i, case) in positives().iter().enumerate() {
        // hash: no 8-character window of the value survives
        let (hashed, _) = PiiMiddleware::new(PiiStrategy::Hash).redact_text(&case.text).unwrap();
        for tell in tells(&case.value, &case.expected) {
            assert!(
                !hashed.contains(&tell),
                "hash case {i}: `{tell}` survived in {hashed:?}"
            );
        }
        assert!(
            hashed.contains(&format!("<{}_hash:", case.kind)),
            "case {i}: {hashed:?}"
        );
        // mask: the value is gone, stars stand in for it
        let (masked, _) = PiiMiddleware::new(PiiStrategy::Mask).redact_text(&case.text).unwrap();
        assert!(
            !masked.contains(&case.value) && masked.contains('*'),
            "mask case {i}: {masked:?}"
        );
    }
}

#[tokio::test]
async fn object_keys_are_redacted_and_kept_apart_in_arguments_and_results() {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Redact));
    let call = ToolCall::new(
        "1",
        "t",
        json!({
            "ann@example.com": "a",
            "bob@example.com": "b",
            "nested": [{ "4111 1111 1111 1111": true }],
            "api_key": "short",
            "clientSecret": "x",
            "max_tokens": 10,
            "pin_password": 1234,
            "AKIAIOSFODNN7EXAMPLE": 5,
            "credentials": { "user": "bob", "pass": ["x", 7, true] },
        }),
    );
    let call = h.before_tool(call).await.unwrap();
    let args = call.arguments.as_object().unwrap();
    let mut values: Vec<&str> = ["[REDACTED_EMAIL]", "[REDACTED_EMAIL]#2"]
        .iter()
        .map(|k| args[*k].as_str().unwrap())
        .collect();
    values.sort_unstable();
    assert_eq!(values, ["a", "b"], "two redacted keys are kept apart: nothing is lost");
    assert_eq!(args["nested"][0]["[REDACTED_CREDIT_CARD]"], true);
    assert_eq!(args["api_key"], "[REDACTED_SECRET]");
    assert_eq!(args["clientSecret"], "[REDACTED_SECRET]");
    assert_eq!(args["max_tokens"], 10);
    assert_eq!(
        args["[REDACTED_SECRET]"], 5,
        "a redacted key names no secret: its number stays"
    );
    // scrubbing again changes nothing: a key holding a replacement names no secret
    let again = h.before_tool(call.clone()).await.unwrap();
    assert_eq!(again.arguments, call.arguments);
    assert_eq!(
        args["pin_password"], "[REDACTED_SECRET]",
        "a number under a secret-named key too"
    );
    assert_eq!(
        args["credentials"],
        json!({ "user": "[REDACTED_SECRET]", "pass": ["[REDACTED_SECRET]", "[REDACTED_SECRET]", true] })
    );
    // results: content, error and structured data (keys too)
    let mut result = ToolResult::error(&call, "failed for ann@example.com");
    result.data = Some(json!({ "10.0.0.1": { "owner": "bob@example.com" } }));
    let result = h.after_tool(result).await.unwrap();
    assert_eq!(result.error.as_deref(), Some("failed for [REDACTED_EMAIL]"));
    assert!(!result.content.contains("ann@"), "{}", result.content);
    assert_eq!(
        result.data,
        Some(json!({ "[REDACTED_IPV4]": { "owner": "[REDACTED_EMAIL]" } }))
    );
    // block refuses a secret-named key's value, naming only the count
    let mut block: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Block));
    let err = block
        .before_tool(ToolCall::new("2", "t", json!({ "password": "abc" })))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("1 secret") && !err.to_string().contains("abc"),
        "{err}"
    );
}

/// Random texts made of corpus values and plain words, streamed in random pieces
/// as answer text, as tool-call arguments and as tool progress: each stream,
/// concatenated, equals redacting the whole text at once.
#[tokio::test]
async fn random_splits_of_corpus_text_redact_like_the_whole_text() {
    let values: Vec<String> = positives()
        .into_iter()
        .filter(|c| c.text.len() < 120)
        .map(|c| c.text)
        .collect();
    let words = [
        "the", "card", "is", "ok.", "日本", "café", "1234", "x", "—", "and", "12/26",
    ];
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for case in 0..60 {
        let n = 1 + rng.below(12);
        let mut text = String::new();
        for i in 0..n {
            if i > 0 {
                text.push_str([" ", " ", "\n", ", ", "\t"][rng.below(5)]);
            }
            if rng.below(2) == 0 {
                text.push_str(&values[rng.below(values.len())]);
            } else {
                text.push_str(words[rng.below(words.len())]);
            }
        }
        let pii = PiiMiddleware::new(PiiStrategy::Redact);
        let (expected, _) = pii.redact_text(&text).unwrap();
        let (seen, _) = run_everywhere(&text, case).await;
        assert_eq!(seen, expected_seen(&expected), "case {case}: {text:?}");
    }
}

/// Published test card numbers, one of each network and length.
const TEST_CARDS: [&str; 8] = [
    "4111111111111111",
    "5500000000000004",
    "6011111111111117",
    "4012888888881881",
    "3530111333300000",
    "2223003122003222",
    "5555555555554444",
    "378282246310005",
];

#[test]
fn user_patterns_run_on_the_normalised_text_too() {
    let pii = PiiMiddleware::new(PiiStrategy::Redact)
        .only(["email"])
        .unwrap()
        .with_pattern("employee_id", r"EMP-[0-9]{6}")
        .unwrap();
    // fullwidth letters, digits and hyphen; a zero-width space inside
    let (out, counts) = pii
        .redact_text("id ＥＭＰ－１２３４５６ and EMP-12\u{200b}3456 ok")
        .unwrap();
    assert_eq!(out, "id [REDACTED_EMPLOYEE_ID] and [REDACTED_EMPLOYEE_ID] ok");
    assert_eq!(counts["employee_id"], 2);
}

/// Hostile junk (escapes, lone surrogates, fullwidth and zero-width
/// characters, broken key blocks, quotes) never panics, and every text
/// stream still equals redacting the whole text; the arguments stay valid JSON.
#[tokio::test]
async fn hostile_junk_never_panics_and_streams_stay_exact() {
    const PIECES: &[&str] = &[
        "\\",
        "\\\\",
        "u",
        "0040",
        "\\u0040",
        "\\\\u0040",
        "\\uD83D",
        "\\uDE00",
        "\\n",
        "\"",
        "4111",
        " ",
        "1111",
        "\u{ff14}",
        "\u{200b}",
        "\u{a0}",
        "\u{ad}",
        "ann",
        "@",
        "example.com",
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "eyJ",
        "abcdefghijklmnop",
        "\n",
        "\t",
        "AKIA",
        "IOSFODNN7EXAMPLE",
        "+1",
        "(415)",
        "555",
        "é",
        "日本",
        "password=",
        "\": \"",
        ".",
        ":",
        "::",
        "ff",
        "192.168.",
        "0.1",
        "_",
        "-",
    ];
    let mut rng = Rng(0x0005_EED0_FBAD_1DEA);
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    for case in 0..150 {
        let n = 1 + rng.below(30);
        let text: String = (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect();
        let (expected, _) = pii.redact_text(&text).unwrap();
        let (seen, _) = run_everywhere(&text, case).await;
        let e = expected_seen(&expected);
        assert_eq!(
            (
                &seen.request,
                &seen.streamed_reply,
                &seen.reply,
                &seen.tool_progress,
                &seen.tool_result
            ),
            (
                &e.request,
                &e.streamed_reply,
                &e.reply,
                &e.tool_progress,
                &e.tool_result
            ),
            "case {case}: {text:?}"
        );
        assert!(
            seen.arg_stream.is_object(),
            "case {case}: the streamed arguments stay JSON"
        );
        assert!(seen.tool_args.is_object(), "case {case}");
    }
}

#[test]
fn escapes_are_decoded_for_detection_even_when_escaped_again() {
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    for text in [
        r"mail ann\u0040example.com now",
        r"mail ann\\u0040example.com now",
        r"mail ann\\\\u0040example.com now",
        r"mail \u0061\u006e\u006e@example.com now",
    ] {
        assert_eq!(pii.redact_text(text).unwrap().0, "mail [REDACTED_EMAIL] now", "{text}");
    }
    // a lone or broken escape is kept as it is
    for text in [r"\uD83D alone", r"\u12", "ends with \\"] {
        assert_eq!(pii.redact_text(text).unwrap().0, text);
    }
}

/// The first digit (zero) of every run of decimal digits (General_Category
/// Nd) as of Unicode 18 besides ASCII, by script: written out here, so the fold
/// (built from the Unicode data of ICU4X) is checked against a list it
/// was not made from.
const DIGIT_ZEROS: &[(&str, u32)] = &[
    ("Arabic-Indic", 0x0660),
    ("Extended Arabic-Indic", 0x06F0),
    ("NKo", 0x07C0),
    ("Devanagari", 0x0966),
    ("Bengali", 0x09E6),
    ("Gurmukhi", 0x0A66),
    ("Gujarati", 0x0AE6),
    ("Oriya", 0x0B66),
    ("Tamil", 0x0BE6),
    ("Telugu", 0x0C66),
    ("Kannada", 0x0CE6),
    ("Malayalam", 0x0D66),
    ("Sinhala Lith", 0x0DE6),
    ("Thai", 0x0E50),
    ("Lao", 0x0ED0),
    ("Tibetan", 0x0F20),
    ("Myanmar", 0x1040),
    ("Myanmar Shan", 0x1090),
    ("Khmer", 0x17E0),
    ("Mongolian", 0x1810),
    ("Limbu", 0x1946),
    ("New Tai Lue", 0x19D0),
    ("Tai Tham Hora", 0x1A80),
    ("Tai Tham Tham", 0x1A90),
    ("Balinese", 0x1B50),
    ("Sundanese", 0x1BB0),
    ("Lepcha", 0x1C40),
    ("Ol Chiki", 0x1C50),
    ("Vai", 0xA620),
    ("Saurashtra", 0xA8D0),
    ("Kayah Li", 0xA900),
    ("Javanese", 0xA9D0),
    ("Myanmar Tai Laing", 0xA9F0),
    ("Cham", 0xAA50),
    ("Meetei Mayek", 0xABF0),
    ("Fullwidth", 0xFF10),
    ("Osmanya", 0x104A0),
    ("Hanifi Rohingya", 0x10D30),
    ("Garay", 0x10D40),
    ("Brahmi", 0x11066),
    ("Sora Sompeng", 0x110F0),
    ("Chakma", 0x11136),
    ("Sharada", 0x111D0),
    ("Khudawadi", 0x112F0),
    ("Newa", 0x11450),
    ("Tirhuta", 0x114D0),
    ("Modi", 0x11650),
    ("Takri", 0x116C0),
    ("Myanmar Pao", 0x116D0),
    ("Myanmar Eastern Pwo Karen", 0x116DA),
    ("Ahom", 0x11730),
    ("Warang Citi", 0x118E0),
    ("Dives Akuru", 0x11950),
    ("Sunuwar", 0x11BF0),
    ("Bhaiksuki", 0x11C50),
    ("Masaram Gondi", 0x11D50),
    ("Gunjala Gondi", 0x11DA0),
    ("Tolong Siki", 0x11DE0),
    ("Kawi", 0x11F50),
    ("Gurung Khema", 0x16130),
    ("Mro", 0x16A60),
    ("Tangsa", 0x16AC0),
    ("Pahawh Hmong", 0x16B50),
    ("Kirat Rai", 0x16D70),
    ("Outlined", 0x1CCF0),
    ("Mathematical Bold", 0x1D7CE),
    ("Mathematical Double-Struck", 0x1D7D8),
    ("Mathematical Sans-Serif", 0x1D7E2),
    ("Mathematical Sans-Serif Bold", 0x1D7EC),
    ("Mathematical Monospace", 0x1D7F6),
    ("Nyiakeng Puachue Hmong", 0x1E140),
    ("Wancho", 0x1E2F0),
    ("Nag Mundari", 0x1E4F0),
    ("Ol Onal", 0x1E5F1),
    ("Adlam", 0x1E950),
    ("Segmented", 0x1FBF0),
];

/// `text` with its ASCII digits written in the script whose zero is `zero`.
fn in_script(text: &str, zero: u32) -> String {
    text.chars()
        .map(|c| match c.to_digit(10) {
            Some(d) => char::from_u32(zero + d).unwrap(),
            None => c,
        })
        .collect()
}

/// Every script's digits × a card, an SSN and a phone number, in every place.
#[tokio::test]
async fn the_digits_of_every_script_are_read_as_digits_in_every_place() {
    let probes = [
        ("credit_card", "4111 1111 1111 1111"),
        ("ssn", "078-05-1120"),
        ("phone", "+1 415 555 2671"),
    ];
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    let mut found = 0;
    for (i, (script, zero)) in DIGIT_ZEROS.iter().enumerate() {
        for (j, (kind, value)) in probes.iter().enumerate() {
            let text = format!("see {} now", in_script(value, *zero));
            let expected = format!("see {} now", marker(kind));
            let (out, counts) = pii.redact_text(&text).unwrap();
            assert_eq!(out, expected, "{script} {kind}: {text:?}");
            assert_eq!(counts.get(*kind), Some(&1), "{script} {kind}: {counts:?}");
            let (seen, _) = run_everywhere(&text, (i * 3 + j) as u64).await;
            assert_eq!(seen, expected_seen(&expected), "{script} {kind}: {text:?}");
            found += 1;
        }
    }
    let total = DIGIT_ZEROS.len() * probes.len();
    println!(
        "pii digits: {found} of {total} probes detected ({} scripts and digit sets × card, SSN, phone)",
        DIGIT_ZEROS.len()
    );
    assert_eq!(found, total);
    assert_eq!(
        DIGIT_ZEROS.len(),
        76,
        "every run of Nd digits as of Unicode 18 besides ASCII"
    );
}

/// Every white-space separator between card groups, alone, doubled, mixed
/// within one gap, and different from gap to gap, in every place.
#[tokio::test]
async fn card_groups_split_by_any_white_space_are_one_card_in_every_place() {
    let spaces: Vec<(String, &str)> = [
        ("\t", "tab"),
        ("\n", "LF"),
        ("\r", "CR"),
        ("\u{b}", "VT"),
        ("\u{c}", "FF"),
        ("\u{85}", "NEL"),
        ("\u{2028}", "Zl"),
        ("\u{2029}", "Zp"),
    ]
    .into_iter()
    .map(|(s, n)| (s.to_owned(), n))
    .chain(
        // every Zs character
        [
            '\u{20}', '\u{a0}', '\u{1680}', '\u{2000}', '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}',
            '\u{2006}', '\u{2007}', '\u{2008}', '\u{2009}', '\u{200a}', '\u{202f}', '\u{205f}', '\u{3000}',
        ]
        .into_iter()
        .map(|c| (c.to_string(), "Zs")),
    )
    .collect();
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    let cc = marker("credit_card");
    let mut cases: Vec<(String, String)> = Vec::new();
    for (s, name) in &spaces {
        cases.push((format!("4111{s}1111{s}1111{s}1111"), format!("{name} alone")));
        cases.push((format!("4111 {s}1111 {s}1111 {s}1111"), format!("space + {name}")));
    }
    // a different one in each gap (a card wrapped over lines)
    for k in 0..spaces.len() {
        let gap = |n: usize| spaces[(k + n) % spaces.len()].0.clone();
        cases.push((
            format!("4111{}1111{}1111{}1111", gap(0), gap(5), gap(11)),
            format!("mixed from {}", spaces[k].1),
        ));
    }
    cases.push(("4111 1111\n1111 1111".to_owned(), "a line wrap".to_owned()));
    cases.push(("4111 1111 \r\n1111 1111".to_owned(), "a CRLF wrap".to_owned()));
    for (i, (value, what)) in cases.iter().enumerate() {
        let text = format!("see {value} now");
        let expected = format!("see {cc} now");
        let (out, _) = pii.redact_text(&text).unwrap();
        assert_eq!(out, expected, "{what}: {text:?}");
        let (seen, _) = run_everywhere(&text, 7000 + i as u64).await;
        assert_eq!(seen, expected_seen(&expected), "{what}: {text:?}");
    }
    println!(
        "pii separators: {} of {} card layouts detected ({} white-space characters: tab, LF, CR, VT, FF, NEL, Zl, Zp and the 17 Zs)",
        cases.len(),
        cases.len(),
        spaces.len()
    );
}

/// A way to write a number: its name, and the JSON text for given digits.
type NumberForm = (&'static str, fn(&str) -> String);

/// Every corpus card written as a JSON number, in every form a number takes
/// (integer, negative, fraction, exponent, 19 digits), nested under keys:
/// found in the text API, the value API, tool arguments and results, and
/// streamed tool-call arguments, which still parse and run the call.
#[tokio::test]
async fn cards_written_as_json_numbers_are_found_in_every_place() {
    let cards: Vec<&str> = TEST_CARDS.into_iter().chain(["6011000990139424009"]).collect();
    let forms: [NumberForm; 5] = [
        ("integer", |c| c.to_owned()),
        ("negative", |c| format!("-{c}")),
        ("fraction", |c| format!("{c}.0")),
        ("exponent", |c| format!("{c}e0")),
        ("in an array", |c| format!("[1, {c}, 2]")),
    ];
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    let (mut probes, mut found) = (0, 0);
    for (i, card) in cards.iter().enumerate() {
        for (j, (form, write)) in forms.iter().enumerate() {
            let doc = format!(r#"{{"order": {{"items": [{{"pay": {}}}], "n": 2}}}}"#, write(card));
            let value: Value = serde_json::from_str(&doc).unwrap();
            let clean = |text: &str| !text.contains(card);
            // the text API: still JSON, no card
            let (text, _) = pii.redact_text(&doc).unwrap();
            let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{form} {card}: {e}: {text}"));
            assert!(clean(&text), "{form}: {text}");
            // the value API (a number is read as serde_json renders it): a
            // fraction or an exponent makes an `f64`, exact to 2^53, so a
            // 19-digit card is no longer in the value (it renders rounded)
            let (redacted, counts) = pii.redact_value(&value).unwrap();
            let rounded = matches!(*form, "fraction" | "exponent") && card.len() > 16;
            assert!(clean(&redacted.to_string()), "{form}: {redacted}");
            assert_eq!(
                counts.contains_key("credit_card"),
                !rounded,
                "{form} {card}: {redacted}"
            );
            // tool arguments and a tool result's data
            let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Redact));
            let call = h.before_tool(ToolCall::new("1", "t", value.clone())).await.unwrap();
            assert!(clean(&call.arguments.to_string()), "{form}: {}", call.arguments);
            let mut result = ToolResult::ok(&call, doc.clone());
            result.data = Some(value.clone());
            let result = h.after_tool(result).await.unwrap();
            assert!(
                clean(&result.content) && clean(&result.data.unwrap().to_string()),
                "{form}"
            );
            // streamed arguments: the call runs with what the whole text redacts to
            let (received, _) = stream_call(&doc, 1 + (i + j) % 7).await;
            assert_eq!(received, vec![parsed], "{form} {card}");
            probes += 1;
            found += 1;
        }
    }
    println!(
        "pii numbers: {found} of {probes} cards written as JSON numbers ({} cards × {} forms) left in no place",
        cards.len(),
        forms.len()
    );
    assert_eq!(found, cards.len() * forms.len());
}

//! `pii`'s gated scan against the reference scanner (every detector over
//! each text on its own, every non-ASCII text folded into a copy, the patterns
//! as they were: the scanner before the gates), on random and adversarial text, whole and
//! streamed; and the per-message verdicts `before_model` keeps between model
//! calls: a message is skipped only when its id and every field are as they
//! were scanned, so an edited message is scanned again.

use proptest::prelude::*;
use serde_json::json;
use tinyagents::harness::model::DeltaContent;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::MiddlewareHarness;

const STRATEGIES: [PiiStrategy; 4] = [
    PiiStrategy::Redact,
    PiiStrategy::Mask,
    PiiStrategy::Hash,
    PiiStrategy::Block,
];

/// Pieces that start, end, break or disguise values of every type.
const PIECES: &[&str] = &[
    "4111",
    "1111",
    "5500",
    "0000",
    "0004",
    "123",
    "45",
    "6789",
    "0",
    "7",
    "2001",
    "db8",
    "fe80",
    "::",
    ":",
    "1a",
    "2B",
    "ff",
    ".",
    "-",
    "/",
    " ",
    "  ",
    "\t",
    "\n",
    "+",
    "+1",
    "(415)",
    "555",
    "@",
    "ann",
    "example",
    ".com",
    "é",
    "…",
    "日本",
    "\u{a0}",
    "\u{200b}",
    "４",
    "１",
    "＠",
    "。",
    "\\u0040",
    "\\n",
    "\\\\",
    "\"",
    "'",
    "=",
    "sk-",
    "ghp_",
    "AKIA",
    "IOSFODNN7EXAMPLE",
    "eyJ",
    "hbGciOiJIUzI1NiJ9",
    "-----BEGIN RSA PRIVATE KEY-----",
    "Bearer ",
    "password",
    "api_key",
    "token",
    "\"secret\": \"",
    "https://",
    "www.",
    "GB82",
    "WEST",
    "1234",
    "5698",
    "7654",
    "32",
    "00:1A:2b:3C:4d:5E",
    "192.168.",
    "10.1.2.3",
    "078-05-1120",
    "abcdefghij",
    "ABCDEFGHIJ",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "x",
    "word",
    "_",
    ",",
    ";",
    "»",
    "Ω",
    "ß",
    "🦀",
];

fn text_of(picks: &[usize]) -> String {
    picks.iter().map(|&i| PIECES[i % PIECES.len()]).collect()
}

fn pair(strategy: PiiStrategy) -> (PiiMiddleware, PiiMiddleware) {
    let fast = PiiMiddleware::new(strategy);
    let reference = fast.clone().reference_scanner();
    (fast, reference)
}

fn assert_same(fast: &PiiMiddleware, reference: &PiiMiddleware, text: &str) {
    assert_eq!(
        fast.redact_text(text),
        reference.redact_text(text),
        "the gated scan and the reference differ on {text:?}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Text built from pieces that make, break and disguise values.
    #[test]
    fn the_gated_scan_finds_exactly_what_each_detector_finds(
        picks in proptest::collection::vec(0usize..1000, 0..40),
        s in 0usize..4,
    ) {
        let (fast, reference) = pair(STRATEGIES[s]);
        let text = text_of(&picks);
        prop_assert_eq!(fast.redact_text(&text), reference.redact_text(&text), "text {:?}", text);
    }

    /// Any characters at all (ASCII-heavy, with any Unicode mixed in).
    #[test]
    fn the_gated_scan_agrees_on_arbitrary_text(text in "(?s)[ -~\n\t]{0,80}|.{0,60}", s in 0usize..4) {
        let (fast, reference) = pair(STRATEGIES[s]);
        prop_assert_eq!(fast.redact_text(&text), reference.redact_text(&text), "text {:?}", text);
    }
}

proptest! {
    // each case builds its own combined set (slow in a debug build)
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A subset of the types plus user patterns (one with an anchor, one that can match empty).
    #[test]
    fn subsets_and_user_patterns_agree(
        picks in proptest::collection::vec(0usize..1000, 0..30),
        mask in 1u16..1024,
    ) {
        let types: Vec<&str> = [
            "secret", "email", "url", "credit_card", "iban", "ipv6", "mac_address", "ipv4", "ssn", "phone",
        ]
        .into_iter()
        .enumerate()
        .filter(|(i, _)| mask & (1 << i) != 0)
        .map(|(_, t)| t)
        .collect();
        let fast = PiiMiddleware::new(PiiStrategy::Redact)
            .only(&types)
            .unwrap()
            .with_pattern("employee", r"EMP-[0-9]{4}")
            .unwrap()
            .with_pattern("lead", r"^ann")
            .unwrap()
            .with_pattern("maybe", r"x*")
            .unwrap();
        let reference = fast.clone().reference_scanner();
        let text = format!("EMP-1234 {} EMP-99", text_of(&picks));
        prop_assert_eq!(fast.redact_text(&text), reference.redact_text(&text), "text {:?}", text);
    }
}

#[test]
fn the_gated_scan_agrees_on_adversarial_text() {
    let values = [
        "ann.lee+x@mail.example.co.uk",
        "jörg@bücher.de",
        "4111 1111 1111 1111 123",
        "４１１１１１１１１１１１１１１１",
        "4111\u{a0}1111\u{a0}1111\u{a0}1111",
        "GB82 WEST 1234 5698 7654 32",
        // an IBAN whose account part is all letters (two digits in all)
        "pay DE32ABCDEFGHIJK now",
        "2001:db8:85a3::8a2e:370:7334",
        "::ffff:192.168.1.1",
        "00:1A:2b:3C:4d:5E",
        "0a1b.2c3d.4e5f",
        "192.168.010.254",
        "1.2.3.4.5",
        "078-05-1120",
        "+1 (415) 555-2671",
        "2024-01-15 10.30.45",
        "https://example.com/a?b=c…",
        "AKIAIOSFODNN7EXAMPLE",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----",
        "{\"client_secret\": \"s\"}",
        "password = hunter22",
        "ann\\u0040example.com",
        "ann\\\\u0040example.com",
        "a\u{200b}nn@exa\u{ad}mple.com",
    ];
    let contexts = [
        ("", ""),
        ("see ", " now"),
        ("… ", " …"),
        ("日本語", "日本語"),
        ("x", "x"),
        ("1.", ".1"),
        ("4111 ", " 1111"),
        ("\"", "\""),
        ("Ω\u{2028}", "\u{3000}ß"),
    ];
    for strategy in STRATEGIES {
        let (fast, reference) = pair(strategy);
        for v in values {
            for (before, after) in contexts {
                assert_same(&fast, &reference, &format!("{before}{v}{after}"));
            }
        }
        // every value next to every other, with and without non-ASCII between
        for a in values {
            for b in values {
                assert_same(&fast, &reference, &format!("{a} {b}"));
                assert_same(&fast, &reference, &format!("{a}…{b}"));
            }
        }
    }
}

#[test]
fn non_ascii_prose_is_read_in_place_and_still_scrubbed() {
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    let (text, counts) = pii
        .redact_text("Résumé… of jörg: mail ann@example.com, card ４１１１ １１１１ １１１１ １１１１ — 日本語")
        .unwrap();
    assert_eq!(
        text,
        "Résumé… of jörg: mail [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD] — 日本語"
    );
    assert_eq!(counts["email"], 1);
    assert_eq!(counts["credit_card"], 1);
}

async fn stream(pii: PiiMiddleware, pieces: &[&str]) -> String {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(pii);
    let mut deltas = h.model_deltas(pieces.iter().copied()).await.unwrap();
    let mut finish = ModelDelta::finish(Default::default());
    h.stack
        .run_on_model_delta(&mut h.ctx, &h.state, &mut finish)
        .await
        .unwrap();
    deltas.extend(finish.take_released());
    deltas
        .iter()
        .filter_map(|d| match &d.content {
            DeltaContent::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_stream_with_non_ascii_text_redacts_as_the_reference_does() {
    let text = "résumé… ".repeat(40)
        + "mail ann@exa…mple.com or ann@example.com, card 4111 1111 1111 1111 … ip 10.1.2.3 … "
        + &"日本語 ".repeat(60)
        + "token ghp_abcdefghijklmnopqrstuvwxyz0123456789AB end";
    let chars: Vec<char> = text.chars().collect();
    for size in [1, 3, 7, 64, 500] {
        let pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
        let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
        let (fast, reference) = pair(PiiStrategy::Redact);
        let expected = reference.redact_text(&text).unwrap().0;
        assert_eq!(stream(fast, &pieces).await, expected, "pieces of {size}");
        assert_eq!(
            stream(reference, &pieces).await,
            expected,
            "pieces of {size} (reference)"
        );
    }
}

/// `text` as JSON `\u` escapes, one per character.
fn escaped(text: &str) -> String {
    text.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
}

/// Values stretched past the stream's hold with characters the detectors do
/// not see (zero-width spaces, escapes that decode to them): the hold counts
/// characters as the detectors see them, so no part of a value is emitted
/// before the rest arrives, however it is padded or split.
#[tokio::test]
async fn a_value_padded_with_invisible_characters_is_held_whole() {
    let zw = "\u{200b}".repeat(300);
    let texts = [
        format!("card 4111/1111/1111{zw}/1111 done"),
        format!("key ghp_abcdefghij{zw}klmnopqrstuvwxyz0123456789 done"),
        format!("mail ann{zw}lee@example.com done"),
        format!("call +1 415{zw} 555 2671 done"),
        format!("ssn 078-05{zw}-1120 done"),
        format!("ip 192.168{zw}.1.1 done"),
        format!("{{\"secret\": \"hunter2{zw}hunter2\"}} done"),
        // a token written as JSON escapes: 384 characters here, 64 as detected
        format!("key {} done", escaped(&format!("ghp_{}", "a1B2c3D4".repeat(8)))),
        // no value (a letter or digit touches the URL as the detectors see it),
        // and the context kept before a cut must see that too
        format!("after F4{zw}WWW.example.com/a done"),
    ];
    for (k, text) in texts.iter().enumerate() {
        let chars: Vec<char> = text.chars().collect();
        for size in [1, 5, 64] {
            let pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            let (fast, reference) = pair(PiiStrategy::Redact);
            let expected = reference.redact_text(text).unwrap().0;
            assert_eq!(
                &expected == text,
                k == texts.len() - 1,
                "what the whole text holds: {text:?}"
            );
            assert_eq!(stream(fast, &pieces).await, expected, "pieces of {size}: {text:?}");
            assert_eq!(
                stream(reference, &pieces).await,
                expected,
                "pieces of {size} (reference): {text:?}"
            );
        }
    }
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest::new(messages)
}

fn texts(request: &ModelRequest) -> Vec<String> {
    request.messages.iter().map(|m| m.text().into_owned()).collect()
}

fn request_reports(h: &MiddlewareHarness) -> Vec<serde_json::Value> {
    h.events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::Custom { name, data, .. } if name == "pii_detected" && data["where"] == "request" => {
                Some(data["counts"].clone())
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_message_edited_under_the_same_id_is_scanned_again() {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Redact));
    let clean = Message::user("hello there");
    let other = Message::assistant("nothing to see");
    let first = h
        .before_model(request(vec![clean.clone(), other.clone()]))
        .await
        .unwrap();
    assert_eq!(texts(&first), ["hello there", "nothing to see"]);
    // the same id, new text: not the verdict of the old text
    let mut edited = clean.clone();
    edited.set_text("mail ann@example.com");
    let second = h.before_model(request(vec![edited, other.clone()])).await.unwrap();
    assert_eq!(texts(&second), ["mail [REDACTED_EMAIL]", "nothing to see"]);
    // an edit of a field other than the text (a tool call's arguments) too
    let mut call = Message::assistant("");
    call.tool_calls.push(ToolCall::new("c1", "lookup", json!({"q": "x"})));
    let third = h.before_model(request(vec![call.clone()])).await.unwrap();
    assert_eq!(third.messages[0].tool_calls[0].arguments, json!({"q": "x"}));
    call.tool_calls[0].arguments = json!({"q": "bob@example.com"});
    let fourth = h.before_model(request(vec![call])).await.unwrap();
    assert_eq!(
        fourth.messages[0].tool_calls[0].arguments,
        json!({"q": "[REDACTED_EMAIL]"})
    );
}

#[tokio::test]
async fn a_remembered_message_is_scrubbed_and_reported_every_turn() {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Redact));
    let history = vec![
        Message::user("my card is 4111 1111 1111 1111"),
        Message::assistant("noted"),
        Message::user("and ann@example.com"),
    ];
    for _ in 0..3 {
        let out = h.before_model(request(history.clone())).await.unwrap();
        assert_eq!(
            texts(&out),
            ["my card is [REDACTED_CREDIT_CARD]", "noted", "and [REDACTED_EMAIL]"]
        );
    }
    let reports = request_reports(&h);
    assert_eq!(reports.len(), 3);
    assert!(
        reports.iter().all(|r| *r == json!({"credit_card": 1, "email": 1})),
        "{reports:?}"
    );
}

#[tokio::test]
async fn block_refuses_a_remembered_message_again_after_an_edit() {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Block));
    let mut m = Message::user("fine");
    h.before_model(request(vec![m.clone()])).await.unwrap();
    h.before_model(request(vec![m.clone()])).await.unwrap();
    m.set_text("card 4111 1111 1111 1111");
    let err = h.before_model(request(vec![m.clone()])).await.unwrap_err();
    assert!(err.to_string().contains("1 credit_card"), "{err}");
    // and again: a refusal is never remembered as clean
    assert!(h.before_model(request(vec![m])).await.is_err());
}

#[tokio::test]
async fn two_instances_keep_their_own_verdicts() {
    // The first redacts emails only; the second, everything. A verdict of the
    // first ("no email here") must not excuse the card from the second.
    let mut stack = MiddlewareStack::empty();
    stack
        .add_named(
            "pii-email",
            PiiMiddleware::new(PiiStrategy::Redact).only(["email"]).unwrap(),
        )
        .unwrap();
    stack
        .add_named("pii-all", PiiMiddleware::new(PiiStrategy::Redact))
        .unwrap();
    let mut h: MiddlewareHarness = MiddlewareHarness::with_stack(stack, (), ());
    let history = vec![Message::user("card 4111 1111 1111 1111, ann@example.com")];
    for _ in 0..2 {
        let out = h.before_model(request(history.clone())).await.unwrap();
        assert_eq!(texts(&out), ["card [REDACTED_CREDIT_CARD], [REDACTED_EMAIL]"]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 60, ..ProptestConfig::default() })]

    /// A history changed turn by turn (appended, edited under the same id,
    /// dropped, reordered): with remembered verdicts every request comes out
    /// as the reference scanner, which remembers nothing, makes it.
    #[test]
    fn remembered_verdicts_agree_with_scanning_everything(
        ops in proptest::collection::vec((0u8..5, 0usize..1000, proptest::collection::vec(0usize..1000, 0..12)), 1..25),
        s in 0usize..3,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let (fast, reference) = pair(STRATEGIES[s]);
            let mut hf: MiddlewareHarness = MiddlewareHarness::new(fast);
            let mut hr: MiddlewareHarness = MiddlewareHarness::new(reference);
            let mut history: Vec<Message> = Vec::new();
            for (op, at, picks) in ops {
                let text = text_of(&picks);
                match op {
                    0 | 1 => history.push(if op == 0 { Message::user(text) } else { Message::assistant(text) }),
                    2 if !history.is_empty() => {
                        let i = at % history.len();
                        history[i].set_text(text);
                    }
                    3 if !history.is_empty() => {
                        history.remove(at % history.len());
                    }
                    4 if history.len() > 1 => {
                        let i = at % history.len();
                        history.swap(0, i);
                    }
                    _ => {}
                }
                let a = hf.before_model(request(history.clone())).await.unwrap();
                let b = hr.before_model(request(history.clone())).await.unwrap();
                prop_assert_eq!(&a.messages, &b.messages);
            }
            prop_assert_eq!(request_reports(&hf), request_reports(&hr));
            Ok(())
        })?;
    }
}

//! Property tests of the wire decoders: the SSE parser, the OpenAI and
//! Anthropic stream decoders, and the whole driver (bytes in, deltas out).
//!
//! Properties: arbitrary bytes cut into arbitrary pieces never panic and never
//! hold more than the limits allow; a valid stream parses to the same events
//! and deltas however it is cut; every number from the wire (tool-call
//! indices, token counts) is checked. The seed is fixed, so a run is
//! reproducible and CI sees the same cases every time.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{json, Value};

use super::http::{drive, Decoder, HttpClient, MAX_TOOL_CALLS};
use super::sse::{SseEvent, SseParser};
use super::{anthropic, openai, ProviderConfig};
use crate::harness::model::{DeltaContent, ModelDelta, ResponseAccumulator};

fn config(cases: u32) -> Config {
    Config {
        cases,
        rng_seed: RngSeed::Fixed(0x7A_11_A6_E7),
        failure_persistence: None,
        ..Config::default()
    }
}

/// Cuts `bytes` at the given points (taken modulo its length).
fn cut(bytes: &[u8], points: &[usize]) -> Vec<Vec<u8>> {
    if bytes.is_empty() {
        return vec![];
    }
    let mut at: Vec<usize> = points.iter().map(|p| p % bytes.len()).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect()
}

fn parse_pieces(pieces: &[Vec<u8>]) -> (Vec<SseEvent>, Result<(), super::sse::SseError>, usize) {
    let mut p = SseParser::new();
    let mut out = VecDeque::new();
    let mut most = 0;
    for piece in pieces {
        if let Err(e) = p.push(piece, &mut out) {
            return (out.into(), Err(e), most);
        }
        most = most.max(p.buffered());
    }
    (out.into(), Ok(()), most)
}

/// Bytes that look like an event stream more often than noise does.
fn sse_ish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"event: ".to_vec()),
        Just(b": c".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just("é🌍".as_bytes().to_vec()),
        Just(vec![0xF0, 0x9F]),
        Just(vec![0xFF]),
        proptest::collection::vec(any::<u8>(), 0..12),
    ];
    proptest::collection::vec(token, 0..40).prop_map(|t| t.concat())
}

/// One valid event: an optional name and data lines (no line breaks inside).
fn event() -> impl Strategy<Value = SseEvent> {
    let line = "[a-zA-Z0-9 {}\":,é🌍\\[\\]]{0,20}";
    (
        proptest::option::of("[a-z_]{1,12}"),
        proptest::collection::vec(line, 1..4),
    )
        .prop_map(|(name, lines)| SseEvent {
            event: name.unwrap_or_default(),
            data: lines.join("\n"),
        })
}

/// The events as an event stream, each line ended by `\n`, `\r\n` or `\r`
/// as `endings` say (a `\r` followed by a `\n` ending would read as one
/// `\r\n`, so that `\n` is written as `\r\n`).
fn render(events: &[SseEvent], endings: &[u8]) -> Vec<u8> {
    let mut out = String::new();
    let mut i = 0;
    let mut eol = |out: &mut String| {
        let mut e = ["\n", "\r\n", "\r"][usize::from(endings[i % endings.len()] % 3)];
        if e == "\n" && out.ends_with('\r') {
            e = "\r\n";
        }
        out.push_str(e);
        i += 1;
    };
    for ev in events {
        if !ev.event.is_empty() {
            out.push_str(&format!("event: {}", ev.event));
            eol(&mut out);
        }
        for line in ev.data.split('\n') {
            out.push_str(&format!("data: {line}"));
            eol(&mut out);
        }
        eol(&mut out);
    }
    out.into_bytes()
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn sse_parser_never_panics_and_holds_at_most_one_event(
        bytes in sse_ish(),
        points in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let (events, _, most) = parse_pieces(&cut(&bytes, &points));
        prop_assert!(most <= SseParser::MAX_EVENT);
        let total: usize = events.iter().map(|e| e.data.len() + e.event.len()).sum();
        prop_assert!(total <= bytes.len(), "events hold no more than the bytes that came");
    }

    #[test]
    fn valid_event_streams_parse_the_same_under_any_split(
        events in proptest::collection::vec(event(), 0..8),
        endings in proptest::collection::vec(any::<u8>(), 1..8),
        points in proptest::collection::vec(any::<usize>(), 0..24),
    ) {
        let bytes = render(&events, &endings);
        let (whole, r, _) = parse_pieces(std::slice::from_ref(&bytes));
        prop_assert!(r.is_ok());
        // A `\r` ending cut from a following `\n` is the only ambiguity of the
        // format; the parser remembers it across pieces.
        let (pieces, r, _) = parse_pieces(&cut(&bytes, &points));
        prop_assert!(r.is_ok());
        prop_assert_eq!(&whole, &events);
        prop_assert_eq!(pieces, events);
    }
}

/// A tool-call piece of an OpenAI chunk with any index (huge ones included).
fn openai_chunk() -> impl Strategy<Value = String> {
    let index = prop_oneof![0u64..4, Just(u64::from(u32::MAX)), Just(10_000_000), any::<u64>()];
    let count = prop_oneof![
        (0u64..100).prop_map(|n| json!(n)),
        Just(json!(u64::MAX)),
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!(1e300)),
        Just(json!("7")),
    ];
    let piece = (
        proptest::option::of(index),
        proptest::option::of("[ab]"),
        proptest::option::of("[fg]"),
        "[{}\":a1]{0,6}",
    )
        .prop_map(|(index, id, name, args)| {
            let mut p = json!({"function": {"arguments": args}});
            if let Some(i) = index {
                p["index"] = json!(i);
            }
            if let Some(id) = id {
                p["id"] = json!(id);
            }
            if let Some(n) = name {
                p["function"]["name"] = json!(n);
            }
            p
        });
    prop_oneof![
        proptest::collection::vec(piece, 0..3)
            .prop_map(|calls| json!({"choices": [{"delta": {"tool_calls": calls}}]}).to_string()),
        "[a-z ]{0,8}".prop_map(|t| json!({"choices": [{"delta": {"content": t}}]}).to_string()),
        (count.clone(), count).prop_map(|(p, c)| {
            json!({"choices": [], "usage": {"prompt_tokens": p, "completion_tokens": c}}).to_string()
        }),
        Just(json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}).to_string()),
        Just("[DONE]".to_owned()),
        "[{}\\[\\]\":0-9a-z,]{0,24}",
    ]
}

/// An Anthropic event with any block index, kind and count.
fn anthropic_event() -> impl Strategy<Value = String> {
    let index = prop_oneof![0u64..4, Just(u64::from(u32::MAX)), any::<u64>()];
    let kind = prop_oneof![
        Just("text"),
        Just("thinking"),
        Just("tool_use"),
        Just("redacted_thinking"),
        Just("mystery"),
    ];
    let delta = prop_oneof![
        Just("text_delta"),
        Just("input_json_delta"),
        Just("signature_delta"),
        Just("mystery_delta"),
    ];
    let count = prop_oneof![
        (0u64..100).prop_map(|n| json!(n)),
        Just(json!(u64::MAX)),
        Just(json!(-3)),
        Just(json!(2.5))
    ];
    prop_oneof![
        (index.clone(), kind, proptest::option::of("[ab]")).prop_map(|(i, k, id)| json!({
            "type": "content_block_start", "index": i,
            "content_block": {"type": k, "id": id, "name": "f", "text": "t", "thinking": "r", "input": {}}
        })
        .to_string()),
        (index, delta, "[{}\":a1]{0,6}").prop_map(|(i, d, s)| json!({
            "type": "content_block_delta", "index": i,
            "delta": {"type": d, "text": s, "partial_json": s}
        })
        .to_string()),
        count
            .clone()
            .prop_map(|c| json!({"type": "message_start", "message": {"usage": {"input_tokens": c}}}).to_string()),
        count.prop_map(|c| {
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": c}})
                .to_string()
        }),
        Just(json!({"type": "message_stop"}).to_string()),
        Just(json!({"type": "ping"}).to_string()),
        "[{}\\[\\]\":0-9a-z,]{0,24}",
    ]
}

/// Feeds `events` to `decoder` and the deltas to an accumulator; checks the
/// bounds after every event. Returns how it ended.
fn decode<D: Decoder>(mut decoder: D, tracked: impl Fn(&D) -> usize, events: &[String]) -> Result<(), TestCaseError> {
    let mut out = VecDeque::new();
    let mut acc = ResponseAccumulator::new();
    for data in events {
        let r = decoder.event(
            SseEvent {
                event: String::new(),
                data: data.clone(),
            },
            &mut out,
        );
        prop_assert!(tracked(&decoder) <= MAX_TOOL_CALLS as usize);
        for d in out.drain(..) {
            if let DeltaContent::ToolCall { index, .. } = &d.content {
                prop_assert!(*index < MAX_TOOL_CALLS, "index {} reached the accumulator", index);
            }
            acc.push(&d);
        }
        if r.is_err() || decoder.done() {
            break;
        }
    }
    if let Ok(response) = acc.finish() {
        prop_assert!(response.message.tool_calls.len() <= MAX_TOOL_CALLS as usize);
        prop_assert!(response.usage.input_tokens <= super::http::MAX_TOKENS);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn openai_decoder_checks_every_number_and_never_panics(events in proptest::collection::vec(openai_chunk(), 0..12)) {
        decode(openai::StreamDecoder::new(Arc::from("openai:m")), openai::StreamDecoder::tracked, &events)?;
    }

    #[test]
    fn anthropic_decoder_checks_every_number_and_never_panics(events in proptest::collection::vec(anthropic_event(), 0..12)) {
        decode(anthropic::StreamDecoder::new(Arc::from("anthropic:m")), anthropic::StreamDecoder::tracked, &events)?;
    }
}

fn client() -> HttpClient {
    let config = ProviderConfig::parse("openai:m").unwrap().with_api_key("k");
    HttpClient::new(&config, vec![]).unwrap()
}

/// Runs the whole driver over `pieces` with a byte limit: the deltas, then
/// the error that ended the stream, if any.
fn run_driver<D: Decoder>(
    decoder: D,
    pieces: Vec<Vec<u8>>,
    max_read: u64,
) -> (Vec<ModelDelta>, Option<crate::TinyAgentsError>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        let body = futures::stream::iter(pieces.into_iter().map(Ok)).boxed();
        let mut stream = drive(client(), body, decoder, max_read);
        let mut deltas = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(d) => deltas.push(d),
                Err(e) => return (deltas, Some(e)),
            }
        }
        (deltas, None)
    })
}

fn openai_stream() -> Vec<u8> {
    let chunks = [
        json!({"choices": [{"delta": {"content": "Hé🌍llo"}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{\"x\""}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "b", "function": {"name": "g", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 9, "completion_tokens": 4}}),
    ];
    let mut out = String::new();
    for c in chunks {
        out.push_str(&format!("data: {c}\r\n\r\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn a_valid_stream_gives_the_same_deltas_under_any_split(points in proptest::collection::vec(any::<usize>(), 0..40)) {
        let bytes = openai_stream();
        let (whole, e) = run_driver(openai::StreamDecoder::new(Arc::from("openai:m")), vec![bytes.clone()], u64::MAX);
        prop_assert!(e.is_none());
        let (split, e) = run_driver(openai::StreamDecoder::new(Arc::from("openai:m")), cut(&bytes, &points), u64::MAX);
        prop_assert!(e.is_none());
        prop_assert_eq!(split, whole);
    }

    #[test]
    fn arbitrary_bytes_through_the_driver_end_in_deltas_or_a_classified_error(
        bytes in sse_ish(),
        points in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let (_, e) = run_driver(anthropic::StreamDecoder::new(Arc::from("anthropic:m")), cut(&bytes, &points), u64::MAX);
        if let Some(e) = e {
            prop_assert_eq!(e.kind(), crate::harness::error::ErrorKind::Model);
        }
    }
}

#[test]
fn the_driver_refuses_a_stream_past_its_byte_limit() {
    // Keep-alive comments for ever: nothing parses, but the bytes are counted.
    let pieces = vec![b": keep-alive\n".to_vec(); 1000];
    let (deltas, e) = run_driver(openai::StreamDecoder::new(Arc::from("openai:m")), pieces, 4096);
    let e = e.expect("refused");
    assert!(deltas.is_empty());
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("more than 4096 bytes"), "{e}");
}

#[test]
fn a_line_that_never_ends_is_refused_at_the_event_limit() {
    let mut p = SseParser::new();
    let mut out = VecDeque::new();
    let piece = vec![b'x'; 64 * 1024];
    let mut fed = 0;
    let err = loop {
        match p.push(&piece, &mut out) {
            Ok(()) => fed += piece.len(),
            Err(e) => break e,
        }
        assert!(p.buffered() <= SseParser::MAX_EVENT);
        assert!(fed <= SseParser::MAX_EVENT, "still accepting past the limit");
    };
    assert_eq!(err, super::sse::SseError::TooLarge(SseParser::MAX_EVENT));
    // Through the driver it is a classified, non-retryable model error.
    let (_, e) = run_driver(
        openai::StreamDecoder::new(Arc::from("openai:m")),
        vec![piece; SseParser::MAX_EVENT / (64 * 1024) + 2],
        u64::MAX,
    );
    let e = e.expect("refused");
    assert!(!e.is_retryable() && e.to_string().contains("larger than"), "{e}");
}

#[test]
fn invalid_utf8_split_across_pieces_is_reassembled_or_refused() {
    let globe = "data: 🌍\n\n".as_bytes();
    for at in 1..globe.len() {
        let (events, r, _) = parse_pieces(&[globe[..at].to_vec(), globe[at..].to_vec()]);
        assert!(r.is_ok());
        assert_eq!(events[0].data, "🌍");
    }
    let (_, r, _) = parse_pieces(&[b"data: \xF0\x9F".to_vec(), b"\n\n".to_vec()]);
    assert_eq!(r, Err(super::sse::SseError::Utf8));
}

#[test]
fn the_issue_examples_are_refused_without_allocating() {
    for index in [10_000_000u64, u64::from(u32::MAX)] {
        let chunk = json!({"choices": [{"delta": {"tool_calls": [{"index": index, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}}]});
        let mut d = openai::StreamDecoder::new(Arc::from("openai:m"));
        let mut out = VecDeque::new();
        let e = d
            .event(
                SseEvent {
                    event: String::new(),
                    data: chunk.to_string(),
                },
                &mut out,
            )
            .unwrap_err();
        assert!(!e.is_retryable(), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("tool-call index {index} is out of range")),
            "{e}"
        );
        assert!(out.is_empty() && d.tracked() == 0);
    }
    // The accumulator refuses the same index from any model, without resizing.
    let mut acc = ResponseAccumulator::new();
    acc.push(&ModelDelta::new(DeltaContent::ToolCall {
        index: 10_000_000,
        id: None,
        name: None,
        arguments: String::new(),
    }));
    assert!(acc
        .finish()
        .unwrap_err()
        .to_string()
        .contains("index 10000000, out of range"));
}

#[test]
fn duplicate_call_ids_are_refused() {
    let chunks = [
        json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{}"}}]}}]}),
        json!({"choices": [{"delta": {"tool_calls": [{"index": 1, "id": "a", "function": {"name": "g", "arguments": "{}"}}]}}]}),
    ];
    let mut d = openai::StreamDecoder::new(Arc::from("openai:m"));
    let mut out = VecDeque::new();
    d.event(
        SseEvent {
            event: String::new(),
            data: chunks[0].to_string(),
        },
        &mut out,
    )
    .unwrap();
    let e = d
        .event(
            SseEvent {
                event: String::new(),
                data: chunks[1].to_string(),
            },
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("share the id \"a\""), "{e}");

    let mut d = anthropic::StreamDecoder::new(Arc::from("anthropic:m"));
    let start = |i: u32| {
        json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": "a", "name": "f", "input": {}}}).to_string()
    };
    d.event(
        SseEvent {
            event: String::new(),
            data: start(0),
        },
        &mut out,
    )
    .unwrap();
    let e = d
        .event(
            SseEvent {
                event: String::new(),
                data: start(1),
            },
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("share the id \"a\""), "{e}");
}

#[test]
fn anthropic_unknown_blocks_and_orphan_tool_input_are_refused_not_dropped() {
    let ev = |v: Value| SseEvent {
        event: String::new(),
        data: v.to_string(),
    };
    let mut out = VecDeque::new();
    let mut d = anthropic::StreamDecoder::new(Arc::from("anthropic:m"));
    let e = d
        .event(
            ev(json!({"type": "content_block_start", "index": 0, "content_block": {"type": "hologram"}})),
            &mut out,
        )
        .unwrap_err();
    assert!(
        !e.is_retryable() && e.to_string().contains("unknown type \"hologram\""),
        "{e}"
    );
    let e = d
        .event(ev(json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{}"}})), &mut out)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("content block 3, which is not a started tool call"),
        "{e}"
    );
    let e = d
        .event(
            ev(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "smell_delta"}})),
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("unknown type \"smell_delta\""), "{e}");
    // Known kinds without content for the agent, and unknown event kinds, pass.
    d.event(ev(json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "x"}})), &mut out).unwrap();
    d.event(ev(json!({"type": "brand_new_event"})), &mut out).unwrap();
    d.event(
        ev(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": "s"}})),
        &mut out,
    )
    .unwrap();
    assert!(out.is_empty());
}

#[test]
fn absurd_token_counts_are_refused_and_bad_ones_are_malformed() {
    let mut out = VecDeque::new();
    let mut d = openai::StreamDecoder::new(Arc::from("openai:m"));
    let e = d
        .event(
            SseEvent {
                event: String::new(),
                data: json!({"choices": [], "usage": {"prompt_tokens": u64::MAX}}).to_string(),
            },
            &mut out,
        )
        .unwrap_err();
    assert!(
        !e.is_retryable()
            && e.to_string()
                .contains("usage field `prompt_tokens` is 18446744073709551615"),
        "{e}"
    );
    for bad in [json!(-1), json!(1.5), json!("NaN")] {
        let mut d = anthropic::StreamDecoder::new(Arc::from("anthropic:m"));
        let e = d
            .event(
                SseEvent {
                    event: String::new(),
                    data: json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": bad}}).to_string(),
                },
                &mut out,
            )
            .unwrap_err();
        assert!(e.to_string().contains("invalid JSON"), "{bad}: {e}");
    }
    // NaN and infinities are not JSON at all.
    let mut d = openai::StreamDecoder::new(Arc::from("openai:m"));
    let e = d
        .event(
            SseEvent {
                event: String::new(),
                data: r#"{"usage":{"prompt_tokens":NaN}}"#.into(),
            },
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("invalid JSON"), "{e}");
}

#[test]
fn deeply_nested_json_is_a_classified_error() {
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let mut out = VecDeque::new();
    let mut d = openai::StreamDecoder::new(Arc::from("openai:m"));
    // Nesting in a field that is kept as JSON stops at the parser's depth limit.
    let kept = format!("{{\"choices\":[{{\"delta\":{{\"reasoning\":{}}}}}]}}", nest(100_000));
    let e = d
        .event(
            SseEvent {
                event: String::new(),
                data: kept,
            },
            &mut out,
        )
        .unwrap_err();
    assert!(e.to_string().contains("recursion limit"), "{e}");
    assert!(e.to_string().len() < 1000, "the chunk is echoed shortened");
    // Nesting in an ignored field is skipped without recursion (no stack overflow).
    let mut d = openai::StreamDecoder::new(Arc::from("openai:m"));
    let skipped = format!("{{\"x\":{}}}", nest(100_000));
    d.event(
        SseEvent {
            event: String::new(),
            data: skipped,
        },
        &mut out,
    )
    .unwrap();
    assert!(out.is_empty());
    let deep = nest(100_000);
    // An error body nested as deep is shown as (shortened) text.
    let (code, detail) = super::http::error_detail(&deep);
    assert!(code.is_none() && detail.contains("bytes in all"), "{detail}");
}

#[test]
fn one_call_cannot_take_a_new_id_per_piece() {
    // Else the id map would grow with every piece.
    let mut out = VecDeque::new();
    let mut d = openai::StreamDecoder::new(Arc::from("openai:m"));
    let piece = |id: &str| SseEvent {
        event: String::new(),
        data: json!({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": id}]}}]}).to_string(),
    };
    d.event(piece("a"), &mut out).unwrap();
    d.event(piece("a"), &mut out).unwrap();
    let e = d.event(piece("b"), &mut out).unwrap_err();
    assert!(!e.is_retryable());
    assert!(e.to_string().contains("tool call 0 changed its id to \"b\""), "{e}");
    assert_eq!(d.tracked(), 1);
}

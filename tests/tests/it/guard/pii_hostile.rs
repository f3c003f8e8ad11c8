//! `pii` against a hostile stream and a stored transcript: text after the
//! finish delta, a value cut by the output limit and continued, a caller's
//! earlier turns of every role, duplicate call ids, and the held-back text of
//! a failed attempt (found by a red-team pass; each fails on the code before).

use std::sync::Arc;

use serde_json::json;
use tinyagents::harness::model::{FinishReason, ResponseAccumulator};
use tinyagents::harness::steering::{SteeringAction, SteeringCommand, SteeringHandle};
use tinyagents::prelude::*;

use super::pii_support::{redacting_stack, streamed_text, Fallback};

/// Text after a finish delta could complete a value whose start was flushed
/// as final: it is refused unsent, and the reply with it.
#[tokio::test]
async fn pii_text_after_a_finish_delta_cannot_complete_a_value_unredacted() {
    let model = ScriptedModel::new([ScriptedTurn::Deltas(vec![
        ModelDelta::text("Contact: ann@exa"),
        ModelDelta::finish(FinishReason::Stop),
        ModelDelta::text("mple.com"),
        ModelDelta::finish(FinishReason::Stop),
    ])]);
    let agent: Agent<()> = Agent::new(model).with_stack(redacting_stack());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let err = agent.run(&mut ctx, &(), "who?").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model, "{err}");
    assert!(err.to_string().contains("after its finish delta"), "{err}");
    let sent = streamed_text(&sink.events());
    assert!(
        !sent.contains("mple.com"),
        "nothing after the finish delta was sent: {sent:?}"
    );
    assert!(!format!("{:?}", sink.events()).contains("ann@example.com"));
}

/// A reply cut by the output limit keeps its tails held: the continuation
/// `output_limit_recovery` asks for (on by default) streams on where they
/// stopped, so a value cut in two is redacted whole, in the sink and in the
/// merged reply.
#[tokio::test]
async fn pii_a_value_cut_by_the_output_limit_is_redacted_in_the_merged_reply() {
    let model = ScriptedModel::new([
        ScriptedTurn::Deltas(vec![
            ModelDelta::text("Contact: ann@exa"),
            ModelDelta::finish(FinishReason::Length),
        ]),
        ScriptedTurn::Deltas(vec![
            ModelDelta::text("mple.com today"),
            ModelDelta::finish(FinishReason::Stop),
        ]),
    ]);
    let agent: Agent<()> = Agent::new(model).with_stack(redacting_stack());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "who?").await.unwrap();
    let streamed = streamed_text(&sink.events());
    let (text, sent) = (run.final_text(), streamed);
    assert!(
        !text.contains("ann@example.com") && !sent.contains("ann@example.com"),
        "the email is whole in the transcript ({text:?}) or in the sink's deltas ({sent:?})"
    );
}

/// The transcript handed back is scrubbed in every role: a caller's earlier
/// assistant and tool turns and a steering injection never passed `pii`.
#[tokio::test]
async fn pii_the_transcript_handed_back_scrubs_assistant_and_tool_turns_it_was_given() {
    let model = ScriptedModel::new([ScriptedTurn::text("ok")]);
    let agent: Agent<()> = Agent::new(model).with_stack(redacting_stack());
    let steering = SteeringHandle::new();
    steering.send(SteeringCommand::new(
        "s1",
        SteeringAction::InjectMessage {
            message: Message::assistant("noted: carol@example.com"),
        },
    ));
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_steering(steering);
    let input = vec![
        Message::user("mail the report"),
        Message::assistant("sending").with_tool_calls(vec![ToolCall::new(
            "c1",
            "send",
            json!({"to": "ann@example.com"}),
        )]),
        Message::tool("c1", "send", "delivered to bob@example.com"),
        Message::user("thanks"),
    ];
    let run = agent.run(&mut ctx, &(), input).await.unwrap();
    let transcript = format!("{:?}", run.messages);
    for tell in ["ann@example.com", "bob@example.com", "carol@example.com"] {
        assert!(!transcript.contains(tell), "`{tell}` is in the transcript handed back");
    }
}

/// An id names one call only, for every model: two calls with one id are a
/// model error (per-call ledgers — approvals, progress buffers — key on it).
#[test]
fn response_accumulator_refuses_two_tool_calls_with_one_id() {
    let mut acc = ResponseAccumulator::new();
    for (index, name) in [(0, "a"), (1, "b")] {
        acc.push(&ModelDelta::new(tinyagents::harness::model::DeltaContent::ToolCall {
            index,
            id: Some("1".into()),
            name: Some(name.into()),
            arguments: "{}".into(),
        }));
    }
    let result = acc.finish();
    assert!(
        result.is_err(),
        "two calls named by one id were accepted: {:?}",
        result.map(|r| r.message.tool_calls.clone())
    );
}

/// A failed stream's held-back text belongs to no reply: not even to a
/// textless one a wrap inside `pii` answers with instead.
#[tokio::test]
async fn pii_a_failed_stream_s_held_text_is_not_appended_to_a_textless_fallback_reply() {
    let model = ScriptedModel::new([
        ScriptedTurn::FailAfter(
            vec![ModelDelta::text("half-written secret plan")],
            TinyAgentsError::model("connection reset", false),
        ),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(
            ToolRegistry::new()
                .with(tinyagents::testing::RecordingTool::new("noop"))
                .unwrap(),
        )
        .with_stack(redacting_stack().with(Fallback).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    let transcript = format!("{:?}", run.messages);
    assert!(
        !transcript.contains("half-written"),
        "the failed attempt's held-back text is in the transcript: {transcript}"
    );
}

/// Two calls of one reply with one id never reach the tools (their progress
/// buffers, approvals and result ledgers key on the id).
#[tokio::test]
async fn two_calls_with_one_id_fail_the_reply_and_nothing_runs() {
    let a = tinyagents::testing::RecordingTool::new("a");
    let b = tinyagents::testing::RecordingTool::new("b");
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "a", json!({})),
            ToolCall::new("1", "b", json!({})),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(a.clone()).unwrap().with(b.clone()).unwrap())
        .with_stack(redacting_stack());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let err = agent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model, "{err}");
    assert!(err.to_string().contains("an id names one call only"), "{err}");
    assert!(a.calls().is_empty() && b.calls().is_empty(), "no call ran");
}

/// Invisible format characters (marks, invisible operators, variation
/// selectors, tag characters, bidi isolates) do not hide a value.
mod invisible_characters {
    use serde_json::json;

    use crate::guard::pii_support::pii_agent;

    use std::sync::Arc;
    use tinyagents::harness::model::{DeltaContent, FinishReason};
    use tinyagents::middleware::*;
    use tinyagents::prelude::*;
    use tinyagents::testing::RecordingTool;

    /// Invisible format characters the normaliser does not drop (it drops only
    /// U+00AD, U+200B–U+200D, U+2060, U+FEFF): the left-to-right and
    /// right-to-left marks, the invisible operators, the Mongolian vowel
    /// separator, the combining grapheme joiner, variation selectors, tag
    /// characters, bidi isolates. Each renders as nothing, so a reader (or a
    /// program that strips format characters) sees the value whole.
    const INVISIBLE: &[char] = &[
        '\u{200E}',
        '\u{200F}',
        '\u{2061}',
        '\u{2062}',
        '\u{2063}',
        '\u{2064}',
        '\u{180E}',
        '\u{034F}',
        '\u{FE0F}',
        '\u{E0020}',
        '\u{2066}',
        '\u{2069}',
        '\u{202A}',
        '\u{202C}',
    ];

    fn strip_invisible(s: &str) -> String {
        s.chars().filter(|c| !INVISIBLE.contains(c)).collect()
    }

    fn hidden_values(x: char) -> Vec<(&'static str, String, &'static str)> {
        vec![
            ("credit_card", format!("4111{x}1111{x}1111{x}1111"), "4111111111111111"),
            ("email", format!("ann{x}@example.com"), "ann@example.com"),
            ("ipv4", format!("192.168.{x}10.20"), "192.168.10.20"),
            ("phone", format!("+1 415{x} 555 0100"), "+1 415 555 0100"),
            (
                "secret",
                format!("ghp_{x}abcdefghijklmnopqrstuvwxyz0123456789"),
                "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            ),
        ]
    }

    #[test]
    fn pii_invisible_format_characters_do_not_hide_a_value() {
        let pii = PiiMiddleware::new(PiiStrategy::Redact);
        // the plain values are found
        for (_, _, plain) in hidden_values('x') {
            let (out, _) = pii.redact_text(&format!("value: {plain} ok")).unwrap();
            assert!(!out.contains(plain), "{plain} -> {out}");
        }
        let mut leaked = Vec::new();
        for &x in INVISIBLE {
            for (kind, hidden, plain) in hidden_values(x) {
                let (out, _) = pii.redact_text(&format!("value: {hidden} ok")).unwrap();
                if strip_invisible(&out).contains(plain) {
                    leaked.push(format!("{kind} with U+{:04X}", x as u32));
                }
            }
        }
        assert!(
            leaked.is_empty(),
            "{} values passed unredacted: {leaked:?}",
            leaked.len()
        );
    }

    /// End to end: a card and an email with a left-to-right mark (U+200E)
    /// streamed by the model reach the event sink, the returned `AgentRun` and
    /// a tool's arguments.
    #[tokio::test]
    async fn pii_a_left_to_right_mark_carries_a_card_and_an_email_everywhere() {
        let lrm = '\u{200E}';
        let card = format!("4111{lrm}1111{lrm}1111{lrm}1111");
        let email = format!("ann{lrm}@example.com");
        let send = RecordingTool::new("send").returning("sent");
        let model = ScriptedModel::new([
            ScriptedTurn::Deltas(vec![
                ModelDelta::text(format!("Paying with {card}, receipt to {email}.")),
                ModelDelta::new(DeltaContent::ToolCall {
                    index: 0,
                    id: Some("c1".into()),
                    name: Some("send".into()),
                    arguments: json!({ "to": email, "card": card }).to_string(),
                }),
                ModelDelta::finish(FinishReason::ToolCalls),
            ]),
            ScriptedTurn::text(format!("Done: {card}")),
        ]);
        let agent = pii_agent(model, send.clone(), PiiStrategy::Redact);
        let sink = Arc::new(CollectingSink::new());
        let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
        let run = agent.run(&mut ctx, &(), "pay").await.unwrap();
        // serialised (Debug would escape the marks as `\u{200e}`)
        let events = strip_invisible(&serde_json::to_string(&sink.events()).unwrap());
        let tool_args = strip_invisible(&serde_json::to_string(&send.calls()).unwrap());
        let returned = strip_invisible(&serde_json::to_string(&run.messages).unwrap());
        let mut leaks = Vec::new();
        for (place, text) in [
            ("event sink", &events),
            ("tool arguments", &tool_args),
            ("AgentRun", &returned),
        ] {
            for plain in ["4111111111111111", "ann@example.com"] {
                if text.contains(plain) {
                    leaks.push(format!("{plain} in the {place}"));
                }
            }
        }
        assert!(leaks.is_empty(), "{leaks:?}");
    }
}

/// Compatibility characters (NFKC) read as what they stand for, as the
/// fullwidth forms and the decimal digits of every script do: a value
/// written in mathematical alphanumerics, with dot leaders or ligatures, is
/// found, and its span in the original text is replaced exactly.
mod compatibility_forms {
    use tinyagents::middleware::*;

    fn redact(text: &str) -> String {
        PiiMiddleware::new(PiiStrategy::Redact).redact_text(text).unwrap().0
    }

    /// `text` with each ASCII letter and digit written in the mathematical
    /// alphanumerics block starting at `upper` (A), `lower` (a) and `digit` (0).
    fn styled(text: &str, upper: u32, lower: u32, digit: Option<u32>) -> String {
        text.chars()
            .map(|c| {
                let base = match c {
                    'A'..='Z' => upper + (c as u32 - 'A' as u32),
                    'a'..='z' => lower + (c as u32 - 'a' as u32),
                    '0'..='9' => match digit {
                        Some(d) => d + (c as u32 - '0' as u32),
                        None => return c,
                    },
                    _ => return c,
                };
                char::from_u32(base).unwrap()
            })
            .collect()
    }

    #[test]
    fn mathematical_letters_and_dot_leaders_do_not_hide_a_value() {
        for (text, needle) in [
            ("iban \u{1D403}\u{1D404}89370400440532013000", "0532"),
            ("token ghp_\u{1D41A}bcdefghijklmnopqrstuvwxyz0123456789", "ijklmnop"),
            ("card 4111\u{2024}1111\u{2024}1111\u{2024}1111", "1111"),
            ("card 4111\u{2025}1111\u{2025}1111\u{2025}1111", "1111"),
            ("card 4111\u{2026}1111\u{2026}1111\u{2026}1111", "1111"),
            ("mail ann@example\u{2024}com", "ann@"),
            ("mail ann\u{FE6B}example\u{FE52}com", "ann"),
            ("host 192\u{2024}168\u{2024}1\u{2024}1 up", "168"),
            // circled and superscript digits stand for digits too
            ("card \u{2463}111 1111 1111 1111", "1111"),
            ("call +\u{00B9} 415 555 2671", "555"),
        ] {
            let out = redact(text);
            assert!(!out.contains(needle), "{text:?} -> {out:?}");
        }
    }

    #[test]
    fn every_mathematical_alphabet_reads_as_ascii() {
        // bold, italic, bold italic, script bold, fraktur bold, sans, sans bold,
        // sans italic, sans bold italic, monospace (digits where the block has them)
        for (upper, lower, digit) in [
            (0x1D400, 0x1D41A, Some(0x1D7CE)),
            (0x1D5A0, 0x1D5BA, Some(0x1D7E2)),
            (0x1D5D4, 0x1D5EE, Some(0x1D7EC)),
            (0x1D608, 0x1D622, None),
            (0x1D63C, 0x1D656, None),
            (0x1D670, 0x1D68A, Some(0x1D7F6)),
            (0x1D4D0, 0x1D4EA, None),
            (0x1D56C, 0x1D586, None),
        ] {
            for (text, kind) in [
                ("key AKIAIOSFODNN7EXAMPLE here", "[REDACTED_SECRET]"),
                ("mail ann.lee@example.com now", "[REDACTED_EMAIL]"),
                ("iban GB82 WEST 1234 5698 7654 32 now", "[REDACTED_IBAN]"),
            ] {
                let styled = styled(text, upper, lower, digit);
                let out = redact(&styled);
                assert!(out.contains(kind), "{styled:?} -> {out:?}");
                // the words around it are kept as written
                let last = styled.split(' ').next_back().unwrap();
                assert!(out.ends_with(last), "{styled:?} -> {out:?}");
            }
        }
    }

    /// The fold changes what detection reads, never what is kept: prose in
    /// compatibility characters with no value in it passes as it is.
    #[test]
    fn compatibility_characters_without_a_value_pass_unchanged() {
        for text in [
            "\u{FB01}ne \u{2026} wait\u{2025} 10\u{00B2} m\u{00B2}, \u{00BD} cup",
            "\u{1D400}\u{1D401}\u{1D402} \u{2460}\u{2461}\u{2462} \u{2122}",
            "\u{3300} \u{33A1} \u{FF21}\u{FF22}",
        ] {
            assert_eq!(redact(text), text);
        }
    }
}

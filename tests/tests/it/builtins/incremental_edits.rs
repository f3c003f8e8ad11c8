//! Built-ins that rewrite the request's messages (`pii`, `context_editing`)
//! keep what they handed on last turn and extend it by what the history
//! added. Whatever happens to the history between turns — a turn appended,
//! an earlier message changed, the history cut short, the same messages in
//! a new list — what they hand on is what a fresh instance hands on for
//! the same request, and the history itself is never changed.

use proptest::prelude::*;
use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::SharedList;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::MiddlewareHarness;

/// What happens to the history before a model call.
#[derive(Debug, Clone)]
enum Step {
    /// A tool round: the call and its result (with an email address in it
    /// when `pii`), and with `ask` a user message after it.
    Turn { pii: bool, ask: bool },
    /// The message at this place (modulo the length) replaced.
    Edit(usize),
    /// The last `n` (modulo the length) messages dropped.
    Cut(usize),
    /// The same messages in a new list.
    Rebuild,
    /// A user message changed in place through `&mut Vec`.
    EditLast,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (any::<bool>(), any::<bool>()).prop_map(|(pii, ask)| Step::Turn { pii, ask }),
        1 => any::<usize>().prop_map(Step::Edit),
        1 => (1usize..6).prop_map(Step::Cut),
        1 => Just(Step::Rebuild),
        1 => Just(Step::EditLast),
    ]
}

fn apply(history: &mut SharedList<Message>, step: &Step, n: usize) {
    match *step {
        Step::Turn { pii, ask } => {
            let id = format!("c{n}");
            history.push(Message::assistant("").with_tool_calls(vec![ToolCall::new(
                &id,
                "search",
                json!({ "query": format!("item {n}") }),
            )]));
            let mut text = format!("result {n}: {}", "words ".repeat(40));
            if pii {
                text.push_str(&format!(" mail ann{n}@example.com"));
            }
            history.push(Message::tool(&id, "search", text));
            if ask {
                history.push(Message::user(format!("and then {n}?")));
            }
        }
        Step::Edit(i) if !history.is_empty() => {
            let i = i % history.len();
            history[i] = Message::user(format!("edited {n}, write to bob{n}@example.com"));
        }
        Step::Cut(k) if !history.is_empty() => {
            let keep = history.len() - k % history.len();
            history.truncate(keep);
        }
        Step::Rebuild => *history = history.iter().cloned().collect(),
        Step::EditLast => {
            if let Some(m) = history.last_mut() {
                *m = Message::user(format!("changed {n}"));
            }
        }
        _ => {}
    }
}

/// The messages `harness` hands on for a request of `history`.
async fn handed_on(harness: &mut MiddlewareHarness<(), ()>, history: &SharedList<Message>) -> SharedList<Message> {
    harness
        .before_model(request(history))
        .await
        .unwrap()
        .into_fields()
        .messages
}

fn request(history: &SharedList<Message>) -> ModelRequest {
    let mut r = ModelRequest::default();
    r.messages = history.clone();
    r
}

/// The counts of the last `pii_detected` event.
fn last_counts(events: &[AgentEvent]) -> Option<serde_json::Value> {
    events.iter().rev().find_map(|e| match e {
        AgentEvent::Custom { name, data, .. } if name == "pii_detected" => Some(data["counts"].clone()),
        _ => None,
    })
}

fn editing() -> ContextEditingMiddleware {
    from_toml_str::<ContextEditingConfig>("trigger_tokens = 300\nkeep = 2\nclear_tool_inputs = true")
        .unwrap()
        .build()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn kept_edits_hand_on_what_a_fresh_instance_would(steps in prop::collection::vec(step(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        rt.block_on(async {
            let mut history: SharedList<Message> = vec![Message::user("start")].into();
            let mut pii = MiddlewareHarness::<(), ()>::new(PiiMiddleware::new(PiiStrategy::Redact));
            let mut edit = MiddlewareHarness::<(), ()>::new(editing());
            for (n, s) in steps.iter().enumerate() {
                apply(&mut history, s, n);
                let before = history.to_vec();

                let kept = pii.before_model(request(&history)).await.unwrap();
                let mut fresh_pii = MiddlewareHarness::<(), ()>::new(PiiMiddleware::new(PiiStrategy::Redact));
                let fresh = fresh_pii.before_model(request(&history)).await.unwrap();
                prop_assert_eq!(&kept.messages, &fresh.messages, "pii after step {} ({:?})", n, s);
                prop_assert_eq!(
                    last_counts(&pii.events()).filter(|_| last_counts(&fresh_pii.events()).is_some()),
                    last_counts(&fresh_pii.events()),
                    "pii counts after step {}", n
                );

                let kept = edit.before_model(request(&history)).await.unwrap();
                let fresh = MiddlewareHarness::<(), ()>::new(editing())
                    .before_model(request(&history))
                    .await
                    .unwrap();
                prop_assert_eq!(&kept.messages, &fresh.messages, "context_editing after step {} ({:?})", n, s);

                prop_assert_eq!(&history.to_vec(), &before, "the history itself is never changed");
            }
            Ok(())
        })?;
    }
}

/// A history only appended to is recognised as such, so the kept rewrite
/// is extended, not rebuilt: what `pii` hands on is the list it handed on
/// last turn, appended to (and never the history itself, which keeps the
/// values).
#[tokio::test]
async fn a_history_appended_to_extends_the_list_handed_on_last_turn() {
    let mut history: SharedList<Message> = vec![Message::user("start, mail ann@example.com")].into();
    let mut pii = MiddlewareHarness::<(), ()>::new(PiiMiddleware::new(PiiStrategy::Redact));
    let mut last = None;
    for n in 0..8 {
        apply(
            &mut history,
            &Step::Turn {
                pii: n % 3 == 0,
                ask: false,
            },
            n,
        );
        let out = handed_on(&mut pii, &history).await;
        assert!(!out.ptr_eq(&history), "turn {n}: the redacted list is not the history");
        assert!(!out[0].text().contains("ann@example.com") && history[0].text().contains("ann@example.com"));
        if let Some(mark) = last {
            assert_eq!(
                out.appended_since(&mark),
                Some(out.len() - 2),
                "turn {n}: extended in place"
            );
        }
        last = Some(out.mark());
    }
    // a change anywhere but the end is not an append: the list is built anew
    history[1] = Message::user("changed");
    let out = handed_on(&mut pii, &history).await;
    assert_eq!(out.appended_since(&last.unwrap()), None);
    assert_eq!(out[1].text(), "changed");
}

/// Over the trigger with nothing to clear (a long chat without tool
/// results), `context_editing` hands the request on as it came and keeps no
/// handle on it: the run's history is then appended to in place, not copied
/// each turn. So is it under `pii` while nothing is found.
#[tokio::test]
async fn nothing_to_rewrite_keeps_no_handle_on_the_history() {
    let long = "words ".repeat(400);
    let mut history: SharedList<Message> = vec![Message::user(long.clone())].into();
    let mut edit = MiddlewareHarness::<(), ()>::new(editing());
    let mut pii = MiddlewareHarness::<(), ()>::new(PiiMiddleware::new(PiiStrategy::Redact));
    for n in 0..6 {
        for harness in [&mut edit, &mut pii] {
            let out = handed_on(harness, &history).await;
            assert!(out.ptr_eq(&history), "turn {n}: handed on as it came");
        }
        let mark = history.mark();
        history.push(Message::assistant(format!("reply {n}: {long}")));
        assert_eq!(
            history.appended_since(&mark),
            Some(mark.len()),
            "turn {n}: appended in place"
        );
    }
}

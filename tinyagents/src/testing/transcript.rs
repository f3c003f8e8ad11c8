//! A run's messages checked against the tool-call rules providers enforce.

use crate::harness::message::{Message, Role};

/// One rule of the tool-call protocol that a transcript breaks (see [`check_transcript`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptViolation {
    /// The index of the offending message.
    pub index: usize,
    /// What is wrong, naming the rule and the call id.
    pub message: String,
}

impl std::fmt::Display for TranscriptViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "message #{}: {}", self.index, self.message)
    }
}

/// Checks a transcript against the tool-call rules that OpenAI and Anthropic
/// enforce when a conversation is sent again:
///
/// * every tool call of an assistant message is answered by exactly one tool
///   message, and those answers come right after that assistant message, before
///   any other assistant, user or system message (the transcript may not end
///   with a call unanswered);
/// * a tool message answers a call of the assistant message just before its
///   run of tool messages: no tool message without its call, none twice;
/// * a tool call id is used by one call only.
///
/// Returns every violation found (an empty list: the transcript is well formed).
///
/// ```
/// use serde_json::json;
/// use tinyagents::prelude::*;
/// use tinyagents::testing::check_transcript;
///
/// let mut ask = Message::assistant("");
/// ask.tool_calls = vec![ToolCall::new("c1", "t", json!({})), ToolCall::new("c2", "t", json!({}))];
/// let good = vec![
///     Message::user("hi"),
///     ask.clone(),
///     Message::tool("c1", "t", "one"),
///     Message::tool("c2", "t", "two"),
///     Message::assistant("final"),
/// ];
/// assert!(check_transcript(&good).is_empty());
///
/// // the final answer lands before the results: providers reject this
/// let bad = vec![
///     Message::user("hi"),
///     ask,
///     Message::assistant("final"),
///     Message::tool("c1", "t", "one"),
///     Message::tool("c2", "t", "two"),
/// ];
/// // two calls unanswered before "final", then two results without their call
/// assert_eq!(check_transcript(&bad).len(), 4);
/// ```
pub fn check_transcript(messages: &[Message]) -> Vec<TranscriptViolation> {
    use std::collections::HashSet;

    let mut out = Vec::new();
    let mut seen_ids: HashSet<&str> = HashSet::new();
    // The calls of the current assistant message still waiting for their answer,
    // in order, and the ones already answered.
    let mut pending: Vec<&str> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut open_at: Option<usize> = None;
    let close = |pending: &mut Vec<&str>, open_at: Option<usize>, at: usize, out: &mut Vec<TranscriptViolation>| {
        for id in pending.drain(..) {
            out.push(TranscriptViolation {
                index: at,
                message: format!(
                    "tool call `{id}` of the assistant message #{} has no result before this message; \
                     every call must be answered right after its assistant message",
                    open_at.unwrap_or_default()
                ),
            });
        }
    };
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let Some(id) = m.tool_call_id.as_deref() else {
                out.push(TranscriptViolation {
                    index: i,
                    message: "a tool message without a `tool_call_id`: every tool message answers one call".to_owned(),
                });
                continue;
            };
            if let Some(pos) = pending.iter().position(|p| *p == id) {
                pending.remove(pos);
                answered.insert(id);
            } else if answered.contains(id) {
                out.push(TranscriptViolation {
                    index: i,
                    message: format!("tool call `{id}` is answered twice: each call gets exactly one result"),
                });
            } else {
                out.push(TranscriptViolation {
                    index: i,
                    message: format!(
                        "tool message for `{id}` does not answer a call of the assistant message just before it \
                         (no tool message without its call)"
                    ),
                });
            }
            continue;
        }
        close(&mut pending, open_at, i, &mut out);
        answered.clear();
        open_at = None;
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            open_at = Some(i);
            for call in &m.tool_calls {
                if !seen_ids.insert(call.id.as_str()) {
                    out.push(TranscriptViolation {
                        index: i,
                        message: format!("tool call id `{}` is used by more than one call", call.id),
                    });
                    continue;
                }
                pending.push(call.id.as_str());
            }
        }
    }
    close(&mut pending, open_at, messages.len(), &mut out);
    out
}

/// Panics, listing every violation, when `messages` break the tool-call rules
/// of [`check_transcript`].
///
/// # Panics
/// When the transcript is not well formed.
#[track_caller]
pub fn assert_valid_transcript(messages: &[Message]) {
    let violations = check_transcript(messages);
    if !violations.is_empty() {
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        let roles: Vec<String> = messages
            .iter()
            .map(|m| match (&m.tool_call_id, m.tool_calls.is_empty()) {
                (Some(id), _) => format!("tool({id})"),
                (None, false) => format!(
                    "assistant(tool_calls {})",
                    m.tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(",")
                ),
                (None, true) => format!("{:?}", m.role).to_lowercase(),
            })
            .collect();
        panic!(
            "the transcript breaks the tool-call rules providers enforce:\n  {}\ntranscript: [{}]",
            lines.join("\n  "),
            roles.join(", ")
        );
    }
}

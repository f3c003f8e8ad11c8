//! Internal helpers shared by the context built-ins: where a conversation may
//! be cut without separating an assistant tool-call message from its tool
//! results, and the summarising compaction used by `summarization` and `context`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::summarizer::{summarize_charged, Summarizer};
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::AgentEvent;
use crate::harness::message::{Message, MessageId, Role};
use crate::harness::model::ModelRequest;
use crate::harness::provenance::{CompactionPlan, CompressionProvenance};
use crate::harness::tokens::TokenCounter;

/// How many leading system messages `messages` starts with (the part of the
/// stable prefix that lives in the conversation; never cut, never summarised).
pub(crate) fn leading_system(messages: &[Message]) -> usize {
    messages.iter().take_while(|m| m.role == Role::System).count()
}

/// Whether a cut before index `i` keeps every tool result with the assistant
/// message that asked for it: a tool message always stays with what precedes it.
pub(crate) fn is_boundary(messages: &[Message], i: usize) -> bool {
    i >= messages.len() || messages[i].role != Role::Tool
}

/// The conversation as units: `(start, end)` ranges that are cut whole (an
/// assistant message with its tool results, or one message).
pub(crate) fn units(messages: &[Message], from: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = from;
    for i in from + 1..=messages.len() {
        if is_boundary(messages, i) {
            out.push((start, i));
            start = i;
        }
    }
    out
}

/// A fresh key for one middleware instance's per-run state.
pub(crate) fn instance_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The summary one instance keeps for a run: which messages it covers.
#[derive(Debug, Clone)]
struct SummaryState {
    covered: Vec<MessageId>,
    text: String,
    id: MessageId,
}

/// Per-run summaries, keyed by middleware instance (a run local).
#[derive(Debug, Default)]
pub(crate) struct Summaries(Mutex<HashMap<u64, SummaryState>>);

/// What a compaction did.
pub(crate) struct Compaction {
    /// Messages replaced by the summary.
    pub(crate) replaced: usize,
    /// Whether the summary was produced now (false: the run's previous summary was reused).
    pub(crate) fresh: bool,
}

/// The header that starts every summary message.
pub(crate) const SUMMARY_HEADER: &str = "[Summary of the earlier conversation]";

/// Replaces the older part of `request.messages` with one summary message,
/// keeping the leading system messages, every other system message, and at
/// least `keep_recent` of the newest messages verbatim, and never cutting
/// between an assistant tool-call message and its tool results.
///
/// The summary is a *user* message placed after the kept system messages, so
/// the stable prefix is untouched. Within a run, the previous summary is
/// reused when it covers the same messages and extended when more messages
/// age out; every new summary is recorded as provenance.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn compact<S, C>(
    ctx: &mut RunContext<C>,
    state: &S,
    request: &mut ModelRequest,
    key: u64,
    keep_recent: usize,
    summarizer: &dyn Summarizer,
    counter: &dyn TokenCounter,
    middleware: &str,
    policy: &str,
) -> Result<Option<Compaction>>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    let messages = &request.messages;
    let head = leading_system(messages);
    let latest = messages.len().saturating_sub(keep_recent);
    let Some(cut) = (head..=latest).rev().find(|&i| is_boundary(messages, i)) else {
        return Ok(None);
    };
    let (middle_system, old): (Vec<&Message>, Vec<&Message>) =
        messages[head..cut].iter().partition(|m| m.role == Role::System);
    if old.is_empty() {
        return Ok(None);
    }
    let old_ids: Vec<MessageId> = old.iter().map(|m| m.id.clone()).collect();
    let prefix_before = cache::fingerprint(request);

    let previous = ctx
        .local::<Summaries>()
        .0
        .lock()
        .expect("summaries lock")
        .get(&key)
        .cloned();
    // A new or extended summary is a compaction: the run's `pre_compact` hooks may block it.
    if previous.as_ref().is_none_or(|p| p.covered != old_ids) {
        let mut plan = CompactionPlan::new(middleware, policy, old_ids.len());
        crate::harness::compression::pre_compact(ctx, state, &mut plan).await?;
        if let Some(reason) = plan.blocked() {
            ctx.emit(AgentEvent::Notice {
                source: "pre_compact".into(),
                message: format!("`{middleware}` did not compact: a pre_compact hook blocked it: {reason}"),
                is_error: false,
            });
            return Ok(None);
        }
    }
    let (state, fresh) = match previous {
        Some(prev) if prev.covered == old_ids => (prev, false),
        prev => {
            let extend = prev.filter(|p| old_ids.starts_with(&p.covered));
            let (to_summarize, prior): (Vec<Message>, Option<&str>) = match &extend {
                Some(p) => (
                    old[p.covered.len()..].iter().map(|m| (*m).clone()).collect(),
                    Some(p.text.as_str()),
                ),
                None => (old.iter().map(|m| (*m).clone()).collect(), None),
            };
            let summary = summarize_charged(ctx, summarizer, &to_summarize, prior).await?;
            (
                SummaryState {
                    covered: old_ids.clone(),
                    text: summary.text,
                    id: MessageId::generate(),
                },
                true,
            )
        }
    };
    let summary_message = Message::user(format!("{SUMMARY_HEADER}\n{}", state.text)).with_id(state.id.clone());

    let original_tokens: u64 = old.iter().map(|m| counter.count_message(m)).sum();
    let compressed_tokens = counter.count_message(&summary_message);
    let replaced = old.len();
    let artifacts: Vec<String> = old
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let mut rebuilt = Vec::with_capacity(head + middle_system.len() + 1 + messages.len() - cut);
    rebuilt.extend(messages[..head].iter().cloned());
    rebuilt.extend(middle_system.into_iter().cloned());
    rebuilt.push(summary_message);
    rebuilt.extend(messages[cut..].iter().cloned());
    request.messages = rebuilt;

    if fresh {
        let mut p = CompressionProvenance::new(middleware, format!("{policy}+{}", summarizer.id()))
            .with_prefix(prefix_before, cache::fingerprint(request));
        p.source_message_ids = old_ids;
        p.source_artifact_ids = artifacts;
        p.replacement_message_id = Some(state.id.clone());
        p.original_tokens = original_tokens;
        p.compressed_tokens = compressed_tokens;
        p.prompt_segment_ids = request.system.iter().map(|s| s.id.clone()).collect();
        crate::harness::compression::record(ctx, p);
        ctx.local::<Summaries>()
            .0
            .lock()
            .expect("summaries lock")
            .insert(key, state);
    }
    Ok(Some(Compaction { replaced, fresh }))
}

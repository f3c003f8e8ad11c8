//! Internal helpers shared by the context built-ins: where a conversation may
//! be cut without separating an assistant tool-call message from its tool
//! results, and the summarising compaction used by `summarization` and `context_window`.

use super::summarizer::{summarize_charged, Summarizer};
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::AgentEvent;
use crate::harness::message::{Message, MessageId, Role};
use crate::harness::model::{ListMark, ModelRequest};
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

/// The summary one instance keeps for a run: which messages it covers, and
/// the summary message itself (put in each request: a reference count).
#[derive(Debug)]
struct SummaryState {
    covered: Vec<MessageId>,
    /// The summary message: [`SUMMARY_HEADER`], a line break, the summary text.
    message: Message,
    /// The messages between the leading system messages and the cut, as the
    /// last compaction saw them (held, so their addresses stay theirs). When
    /// the next request starts with exactly these (one address comparison
    /// each, no message read), what they hold is known — the covered
    /// messages are their non-system ones — and only the rest is read.
    seen: Vec<Message>,
    /// The system messages among `seen`.
    seen_system: Vec<Message>,
    /// The list the last compaction read: when a request's list is that
    /// one appended to, it starts with `seen` without comparing a message.
    mark: ListMark,
}

/// How the run's previous summary relates to the messages to summarise now.
enum Previous {
    /// There is none, or it covers other messages: summarise them all.
    None,
    /// It covers exactly them: reuse it.
    Same(Message),
    /// It covers the first `covered` of them: extend it with the rest.
    Prefix { covered: usize, message: Message },
}

/// The summary one registration keeps in a run (part of its `run_state`):
/// none until it first summarises.
#[derive(Debug, Default)]
pub(crate) struct Summary(Option<SummaryState>);

/// What a compaction did.
pub(crate) struct Compaction {
    /// Messages replaced by the summary.
    pub(crate) replaced: usize,
    /// Whether the summary was produced now (false: the run's previous summary was reused).
    pub(crate) fresh: bool,
}

/// The header that starts every summary message.
pub(crate) const SUMMARY_HEADER: &str = "[Summary of the earlier conversation]";

/// The summary message of `text`: a user message, [`SUMMARY_HEADER`] first.
fn summary_message(mut text: String) -> Message {
    // in place: a move within the string (the concatenating summariser leaves room)
    text.insert_str(0, &format!("{SUMMARY_HEADER}\n"));
    Message::user(text)
}

/// Replaces the older part of `request.messages` with one summary message,
/// keeping the leading system messages, every other system message, and at
/// least `keep_recent` of the newest messages verbatim, and never cutting
/// between an assistant tool-call message and its tool results.
///
/// The summary is a *user* message placed after the kept system messages, so
/// the stable prefix is untouched. Within a run, the previous summary is
/// reused when it covers the same messages and extended when more messages
/// age out (`summary` is the calling registration's run state); every new
/// summary is recorded as provenance.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn compact<S, C>(
    ctx: &mut RunContext<C>,
    state: &S,
    request: &mut ModelRequest,
    summary: &mut Summary,
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
    // The messages the last compaction saw, when this request starts with
    // them at their addresses (fields are shared only while unchanged).
    let known = summary.0.as_ref().filter(|p| {
        !p.seen.is_empty()
            && p.seen.len() <= cut - head
            && (messages
                .appended_since(&p.mark)
                .is_some_and(|n| n >= head + p.seen.len())
                || messages[head..head + p.seen.len()]
                    .iter()
                    .zip(&p.seen)
                    .all(|(m, s)| Message::ptr_eq(m, s)))
    });
    // `old` is read from `read_from`: the older non-system messages after
    // the `base` covered ones that are known without reading them.
    let (read_from, base) = known.map_or((head, 0), |p| (head + p.seen.len(), p.covered.len()));
    let mut middle_system: Vec<&Message> = known.map_or_else(Vec::new, |p| p.seen_system.iter().collect());
    let mut old: Vec<&Message> = Vec::with_capacity(cut - read_from);
    for m in &messages[read_from..cut] {
        if m.role == Role::System {
            middle_system.push(m);
        } else {
            old.push(m);
        }
    }
    if base + old.len() == 0 {
        return Ok(None);
    }
    let previous = match (known, &summary.0) {
        (Some(p), _) if old.is_empty() => Previous::Same(p.message.clone()),
        (Some(p), _) => Previous::Prefix {
            covered: base,
            message: p.message.clone(),
        },
        (None, Some(p)) => {
            let same_prefix = |covered: &[MessageId]| covered.iter().zip(&old).all(|(id, m)| *id == m.id);
            if p.covered.len() == old.len() && same_prefix(&p.covered) {
                Previous::Same(p.message.clone())
            } else if p.covered.len() < old.len() && same_prefix(&p.covered) {
                Previous::Prefix {
                    covered: p.covered.len(),
                    message: p.message.clone(),
                }
            } else {
                Previous::None
            }
        }
        (None, None) => Previous::None,
    };
    let fast = known.is_some();
    let prefix_before = cache::fingerprint(request);

    // A new or extended summary is a compaction: the run's `pre_compact` hooks may block it.
    if !matches!(previous, Previous::Same(_)) {
        let mut plan = CompactionPlan::new(middleware, policy, base + old.len());
        crate::harness::middleware::pre_compact(ctx, state, &mut plan).await?;
        if let Some(reason) = plan.blocked() {
            ctx.events().emit(AgentEvent::Notice {
                source: "pre_compact".into(),
                message: format!("`{middleware}` did not compact: a pre_compact hook blocked it: {reason}"),
                is_error: false,
            });
            return Ok(None);
        }
    }
    let replaced = base + old.len();
    let (summary_message, fresh) = match previous {
        Previous::Same(message) => (message, None),
        Previous::None => {
            let to_summarize: Vec<Message> = old.iter().map(|m| (*m).clone()).collect();
            let summary = summarize_charged(ctx, summarizer, &to_summarize, None).await?;
            let message = summary_message(summary.text);
            (message.clone(), Some((0, None, message)))
        }
        Previous::Prefix { covered, message } => {
            let to_summarize: Vec<Message> = old[covered - base..].iter().map(|m| (*m).clone()).collect();
            let text = message.text();
            let prior = text
                .strip_prefix(SUMMARY_HEADER)
                .map_or(&*text, |t| t.strip_prefix('\n').unwrap_or(t));
            let summary = summarize_charged(ctx, summarizer, &to_summarize, Some(prior)).await?;
            let next = summary_message(summary.text);
            (next.clone(), Some((covered, Some(message.clone()), next)))
        }
    };

    let mut rebuilt = Vec::with_capacity(head + middle_system.len() + 1 + messages.len() - cut);
    rebuilt.extend(messages[..head].iter().cloned());
    rebuilt.extend(middle_system.into_iter().cloned());
    rebuilt.push(summary_message);
    rebuilt.extend(messages[cut..].iter().cloned());
    let newly: Vec<Message> = match &fresh {
        Some((covered, _, _)) => old[*covered - base..].iter().map(|m| (*m).clone()).collect(),
        None => Vec::new(),
    };
    // What this request showed after what was already known (all of it,
    // when nothing was): the state's `seen` grows by it.
    let seen_now: Vec<Message> = messages[read_from..cut].to_vec();
    let seen_system_now: Vec<Message> = seen_now.iter().filter(|m| m.role == Role::System).cloned().collect();
    let mark = messages.mark();
    request.messages = rebuilt.into();

    let is_fresh = fresh.is_some();
    if let Some((covered, previous, message)) = fresh {
        // Provenance names what this summary replaced: the newly summarised
        // messages and, when it extends the run's previous summary, that
        // summary (whose own record names what it replaced), so each
        // message is named once in the run, not again on every extension.
        let mut p = CompressionProvenance::new(middleware, format!("{policy}+{}", summarizer.id()))
            .with_prefix(prefix_before, cache::fingerprint(request));
        p.source_message_ids = previous.iter().chain(&newly).map(|m| m.id.clone()).collect();
        p.source_artifact_ids = newly
            .iter()
            .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
            .collect();
        p.replacement_message_id = Some(message.id.clone());
        p.original_tokens = previous.iter().chain(&newly).map(|m| counter.count_message(m)).sum();
        p.compressed_tokens = counter.count_message(&message);
        p.prompt_segment_ids = request.system.iter().map(|s| s.id.clone()).collect();
        crate::harness::compression::record(ctx, p);
        let entry = summary.0.get_or_insert_with(|| SummaryState {
            covered: Vec::new(),
            message: message.clone(),
            seen: Vec::new(),
            seen_system: Vec::new(),
            mark: ListMark::default(),
        });
        entry.covered.truncate(covered);
        entry.covered.extend(newly.iter().map(|m| m.id.clone()));
        entry.message = message;
    }
    if let Some(entry) = summary.0.as_mut() {
        if fast {
            entry.seen.extend(seen_now);
            entry.seen_system.extend(seen_system_now);
        } else {
            entry.seen = seen_now;
            entry.seen_system = seen_system_now;
        }
        entry.mark = mark;
    }
    Ok(Some(Compaction {
        replaced,
        fresh: is_fresh,
    }))
}

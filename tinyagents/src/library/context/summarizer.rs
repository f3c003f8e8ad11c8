//! The [`Summarizer`] trait and its two implementations: the concatenating
//! default [`ConcatSummarizer`] and the model-backed [`ModelSummarizer`].

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;

use super::super::limits::PriceBudget;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{Message, Role};
use crate::harness::model::{ChatModel, ModelRequest, PromptSegment, ResponseAccumulator, Usage};

/// A summary and what producing it cost.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    /// The summary text.
    pub text: String,
    /// Token usage spent producing it (zero for a summariser that calls no model).
    pub usage: Usage,
}

/// Turns a run of messages into a summary, optionally extending a previous one.
///
/// Implement it to summarise your way; the context built-ins call it with the
/// messages they are about to replace, never with the stable prefix.
///
/// ```
/// use tinyagents::harness::message::Message;
/// use tinyagents::middleware::{ConcatSummarizer, Summarizer};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let s = ConcatSummarizer::default()
///     .summarize(&[Message::user("hi"), Message::assistant("hello")], None)
///     .await?;
/// assert_eq!(s.text, "user: hi\nassistant: hello");
/// # Ok::<(), tinyagents::TinyAgentsError>(()) }).unwrap();
/// ```
#[async_trait]
pub trait Summarizer: Send + Sync {
    /// A short identifier (`concat`, `model:<id>`), recorded in provenance policy versions.
    fn id(&self) -> &str;

    /// Summarises `messages`; `previous` is the summary they extend, when there is one.
    async fn summarize(&self, messages: &[Message], previous: Option<&str>) -> Result<Summary>;

    /// The model a summary is paid to, when producing one costs money (the
    /// built-in middleware then checks the run's price budget before asking,
    /// and charges the summary's usage to it). `None`, the default, for a
    /// summariser that calls no paid model.
    fn paid_model(&self) -> Option<&str> {
        None
    }
}

/// Asks `summarizer` on behalf of the run `ctx`: a paid summariser is
/// checked against the run's price budget before the call (a summary at the
/// cap is refused like any other paid attempt) and its usage is charged to
/// the budget and added to the run's usage. Every built-in that summarises
/// goes through here, so no summary is free.
pub(crate) async fn summarize_charged<C>(
    ctx: &mut RunContext<C>,
    summarizer: &dyn Summarizer,
    messages: &[Message],
    previous: Option<&str>,
) -> Result<Summary> {
    let Some(model) = summarizer.paid_model() else {
        let summary = summarizer.summarize(messages, previous).await?;
        ctx.add_usage(summary.usage);
        return Ok(summary);
    };
    let model = model.to_owned();
    let ticket = PriceBudget::of(ctx).dispatch(ctx, false)?;
    match summarizer.summarize(messages, previous).await {
        Ok(summary) => {
            ctx.add_usage(summary.usage);
            ticket.settle(ctx, &model, summary.usage)?;
            Ok(summary)
        }
        Err(e) => {
            ticket.settle_unknown(ctx, &e);
            Err(e)
        }
    }
}

/// One line per message: `role: text`, tool calls as `assistant called name(args)`,
/// tool results as `tool name: text`.
fn transcript_line(m: &Message, max_chars: usize) -> String {
    let text = m.text();
    let mut parts: Vec<String> = Vec::new();
    if !text.is_empty() || m.tool_calls.is_empty() {
        parts.push(clip(&text, max_chars).into_owned());
    }
    for call in &m.tool_calls {
        let args = call.arguments.to_string();
        parts.push(format!("called {}({})", call.name, clip(&args, max_chars)));
    }
    match m.role {
        Role::Tool => format!("tool {}: {}", m.name.as_deref().unwrap_or("?"), parts.join("; ")),
        role => format!("{}: {}", role.as_str(), parts.join("; ")),
    }
}

/// At most `max` characters of `text`, with an ellipsis when clipped.
pub(crate) fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((cut, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..cut])),
    }
}

/// The default summariser: no model call, one clipped line per message,
/// appended to the previous summary. Deterministic and free; it loses detail
/// but never invents any.
///
/// The summary is bounded: past [`max_summary_chars`](Self::with_max_summary_chars)
/// (8,000 by default) its oldest lines give way to the newest, behind one
/// `…` line, so a long run's summary — and the request that carries it —
/// stops growing, and extending it costs the same on turn 3,000 as on turn 100.
///
/// ```
/// use tinyagents::harness::message::Message;
/// use tinyagents::middleware::{ConcatSummarizer, Summarizer};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let s = ConcatSummarizer::new(20).with_max_summary_chars(40);
/// let mut summary = s.summarize(&[Message::user("first question")], None).await?.text;
/// for i in 0..10 {
///     summary = s.summarize(&[Message::user(format!("question {i}"))], Some(&summary)).await?.text;
/// }
/// assert!(summary.chars().count() <= 40);
/// assert!(summary.starts_with("…\n") && summary.ends_with("question 9"));
/// # Ok::<(), tinyagents::TinyAgentsError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConcatSummarizer {
    max_chars_per_message: usize,
    max_summary_chars: usize,
}

impl ConcatSummarizer {
    /// The default bound of a whole summary, in characters.
    pub const DEFAULT_MAX_SUMMARY_CHARS: usize = 8_000;

    /// A summariser clipping each message to `max_chars_per_message` characters.
    pub fn new(max_chars_per_message: usize) -> Self {
        Self {
            max_chars_per_message,
            max_summary_chars: Self::DEFAULT_MAX_SUMMARY_CHARS,
        }
    }

    /// The same, keeping at most `max` characters of summary (the newest
    /// lines; at least the newest line, clipped per message as usual).
    pub fn with_max_summary_chars(mut self, max: usize) -> Self {
        self.max_summary_chars = max;
        self
    }
}

impl Default for ConcatSummarizer {
    /// 200 characters per message, 8,000 per summary.
    fn default() -> Self {
        Self::new(200)
    }
}

/// The line that stands for the summary lines dropped to stay in bounds.
const DROPPED: &str = "…";

/// `text` cut to at most `max` characters by dropping whole lines from its
/// start (behind one [`DROPPED`] line); the last line is always kept.
fn keep_newest(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        return text;
    }
    // room for the marker line ("…" and a line break)
    let budget = max.saturating_sub(DROPPED.chars().count() + 1);
    // where the last `budget` characters begin
    let from = match budget {
        0 => text.len(),
        n => text.char_indices().rev().nth(n - 1).map_or(0, |(at, _)| at),
    };
    let last_line = text.rfind('\n').map_or(0, |n| n + 1);
    // the first whole line from there (the last line when even it is longer)
    let start = if from == 0 || text[..from].ends_with('\n') {
        from
    } else {
        text[from..].find('\n').map_or(last_line, |n| from + n + 1)
    }
    .min(last_line);
    let mut out = String::with_capacity(DROPPED.len() + 1 + text.len() - start);
    out.push_str(DROPPED);
    out.push('\n');
    out.push_str(&text[start..]);
    out
}

#[cfg(test)]
mod keep_newest_tests {
    use super::keep_newest;

    #[test]
    fn whole_lines_give_way_oldest_first_and_the_newest_line_stays() {
        let text = "aaaa\nbbbb\ncccc".to_string();
        assert_eq!(keep_newest(text.clone(), 14), text);
        assert_eq!(keep_newest(text.clone(), 11), "…\nbbbb\ncccc");
        assert_eq!(keep_newest(text.clone(), 10), "…\ncccc");
        assert_eq!(keep_newest(text.clone(), 3), "…\ncccc");
        assert_eq!(keep_newest("ééé\nüü".to_string(), 5), "…\nüü");
    }
}

#[async_trait]
impl Summarizer for ConcatSummarizer {
    fn id(&self) -> &str {
        "concat"
    }

    async fn summarize(&self, messages: &[Message], previous: Option<&str>) -> Result<Summary> {
        // one string, grown in place: the previous summary is copied once
        // (the lines joined by line breaks, as before)
        let mut text = String::with_capacity(previous.map_or(0, str::len) + 64 * messages.len());
        let lines = previous.map(Cow::Borrowed).into_iter().chain(
            messages
                .iter()
                .map(|m| Cow::Owned(transcript_line(m, self.max_chars_per_message))),
        );
        for (i, line) in lines.enumerate() {
            if i > 0 {
                text.push('\n');
            }
            text.push_str(&line);
        }
        Ok(Summary {
            text: keep_newest(text, self.max_summary_chars),
            usage: Usage::default(),
        })
    }
}

/// A summariser that asks a chat model. The model is called directly, not
/// through the agent's middleware stack (which would recurse); its usage is
/// returned, and the built-in middleware that call it add it to the run's
/// usage and charge it to the run's price budget ([`Summarizer::paid_model`]).
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::harness::message::Message;
/// use tinyagents::middleware::{ModelSummarizer, Summarizer};
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("The user greeted.")]));
/// let s = ModelSummarizer::new(model).summarize(&[Message::user("hi")], None).await?;
/// assert_eq!(s.text, "The user greeted.");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct ModelSummarizer {
    #[educe(Debug(ignore))]
    model: Arc<dyn ChatModel>,
    #[educe(Debug(ignore))]
    model_id: String,
    id: String,
    #[educe(Debug(ignore))]
    instructions: String,
}

impl ModelSummarizer {
    /// The default instructions.
    pub const DEFAULT_INSTRUCTIONS: &'static str = "Summarise the conversation below for the assistant that will \
        continue it. Keep every fact, decision, open task, file name, identifier and tool result that may matter \
        later; drop pleasantries. Answer with the summary only.";

    /// A summariser asking `model` with the default instructions.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        let model_id = model.id().to_owned();
        let id = format!("model:{model_id}");
        Self {
            model,
            model_id,
            id,
            instructions: Self::DEFAULT_INSTRUCTIONS.to_owned(),
        }
    }

    /// The same summariser with other instructions.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    fn id(&self) -> &str {
        &self.id
    }

    fn paid_model(&self) -> Option<&str> {
        Some(&self.model_id)
    }

    async fn summarize(&self, messages: &[Message], previous: Option<&str>) -> Result<Summary> {
        let mut body = String::new();
        if let Some(prev) = previous {
            body.push_str("Summary so far:\n");
            body.push_str(prev);
            body.push_str("\n\nNew messages:\n");
        }
        for m in messages {
            body.push_str(&transcript_line(m, usize::MAX));
            body.push('\n');
        }
        let request = ModelRequest::new(vec![Message::user(body)])
            .with_system(PromptSegment::stable("summarizer", self.instructions.clone()));
        let mut stream = self.model.stream(&request).await?;
        let mut acc = ResponseAccumulator::new();
        while let Some(delta) = stream.next().await {
            acc.push_owned(delta?);
        }
        let response = acc.finish()?;
        Ok(Summary {
            text: response.message.text().trim().to_owned(),
            usage: response.usage,
        })
    }
}

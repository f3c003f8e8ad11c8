//! [`ResponseAccumulator`]: folds deltas into a [`ModelResponse`].

use super::{DeltaContent, FinishReason, ModelDelta, ModelResponse, Usage};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::message::{ContentPart, Message};
use crate::harness::tool::ToolCall;

#[derive(Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// Appends `piece` to `to`, taking it whole when `to` is still empty.
fn append(to: &mut String, piece: String) {
    if to.is_empty() {
        *to = piece;
    } else {
        to.push_str(&piece);
    }
}

/// Folds a stream of [`ModelDelta`]s into the [`ModelResponse`] they describe.
///
/// ```
/// use tinyagents::harness::model::{ModelDelta, ResponseAccumulator};
///
/// let mut acc = ResponseAccumulator::new();
/// acc.push(&ModelDelta::text("Hel"));
/// acc.push(&ModelDelta::text("lo"));
/// let response = acc.finish().unwrap();
/// assert_eq!(response.message.text(), "Hello");
/// ```
///
/// Tool-call indices are checked before anything is allocated: an index past
/// [`MAX_TOOL_CALLS`](Self::MAX_TOOL_CALLS), or more than one past the calls
/// seen so far, is not stored and makes [`finish`](Self::finish) fail.
///
/// ```
/// use tinyagents::harness::model::{DeltaContent, ModelDelta, ResponseAccumulator};
///
/// let mut acc = ResponseAccumulator::new();
/// acc.push(&ModelDelta::new(DeltaContent::ToolCall {
///     index: 4_294_967_295, id: Some("c".into()), name: Some("f".into()), arguments: "{}".into(),
/// }));
/// let err = acc.finish().unwrap_err();
/// assert!(err.to_string().contains("out of range"), "{err}");
/// ```
#[derive(Default)]
pub struct ResponseAccumulator {
    text: String,
    reasoning: String,
    calls: Vec<PartialCall>,
    usage: Usage,
    usage_reported: bool,
    finish: Option<FinishReason>,
    /// The first tool-call index refused (and the calls seen then).
    bad_index: Option<(u32, usize)>,
    /// Content (text, reasoning, a tool call) arrived after the finish delta.
    after_finish: bool,
}

impl ResponseAccumulator {
    /// The most tool calls one reply may hold.
    pub const MAX_TOOL_CALLS: u32 = 128;

    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one delta. Suppressed deltas are ignored. (A caller that owns
    /// the delta and is done with it gives it whole:
    /// [`push_owned`](Self::push_owned) moves its text in.)
    pub fn push(&mut self, delta: &ModelDelta) {
        if !self.refuses(delta) {
            self.add(delta.content.clone());
        }
    }

    /// Adds one delta it may take apart: a piece that starts a text, a
    /// tool call's id, name or arguments is moved in, not copied (the agent
    /// loop's path, where the delta is not used after).
    ///
    /// ```
    /// use tinyagents::harness::model::{ModelDelta, ResponseAccumulator};
    ///
    /// let mut acc = ResponseAccumulator::new();
    /// acc.push_owned(ModelDelta::text("Hel"));
    /// acc.push(&ModelDelta::text("lo"));
    /// assert_eq!(acc.finish().unwrap().message.text(), "Hello");
    /// ```
    pub fn push_owned(&mut self, delta: ModelDelta) {
        if !self.refuses(&delta) {
            self.add(delta.content);
        }
    }

    /// Adds a delta's content (one [`refuses`](Self::refuses) let through).
    fn add(&mut self, content: DeltaContent) {
        match content {
            DeltaContent::Text { text } => append(&mut self.text, text),
            DeltaContent::Reasoning { text } => append(&mut self.reasoning, text),
            DeltaContent::ToolCall {
                index,
                id,
                name,
                arguments,
            } => self.call_piece(index, id, name, arguments),
            DeltaContent::Usage { usage } => {
                self.usage += usage;
                self.usage_reported = true;
            }
            DeltaContent::Finish { reason } => self.finish = Some(reason),
        }
    }

    /// Whether `delta` is not added: suppressed, or content after the finish
    /// delta (a reply ends at its finish delta: what comes after would
    /// reach the reply without passing what judged it as finished).
    fn refuses(&mut self, delta: &ModelDelta) -> bool {
        if delta.is_suppressed() {
            return true;
        }
        if self.finish.is_some()
            && matches!(
                delta.content,
                DeltaContent::Text { .. } | DeltaContent::Reasoning { .. } | DeltaContent::ToolCall { .. }
            )
        {
            self.after_finish = true;
            return true;
        }
        false
    }

    /// A piece of tool call `index`.
    fn call_piece(&mut self, index: u32, id: Option<String>, name: Option<String>, arguments: String) {
        let i = index as usize;
        if index >= Self::MAX_TOOL_CALLS || i > self.calls.len() + 1 {
            self.bad_index.get_or_insert((index, self.calls.len()));
            return;
        }
        if self.calls.len() <= i {
            self.calls.resize_with(i + 1, PartialCall::default);
        }
        let call = &mut self.calls[i];
        if id.is_some() {
            call.id = id;
        }
        if name.is_some() {
            call.name = name;
        }
        append(&mut call.arguments, arguments);
    }

    /// The text accumulated so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The response. A tool call whose arguments are not valid JSON, are
    /// nested deeper or are larger than the limits
    /// ([`MAX_ARGUMENT_DEPTH`](crate::harness::tool::MAX_ARGUMENT_DEPTH),
    /// [`MAX_ARGUMENT_BYTES`](crate::harness::tool::MAX_ARGUMENT_BYTES)), or that
    /// lacks an id or a name, is a retryable model error — unless the reply was
    /// cut off by the output limit, in which case the unfinished call is dropped
    /// (it must never run) and the finish reason stays [`FinishReason::Length`].
    ///
    /// A tool-call index that was refused, two calls with one id, or content
    /// after the finish delta is a model error that is not retryable (the
    /// reply breaks the delta format).
    pub fn finish(self) -> Result<ModelResponse> {
        if let Some((index, seen)) = self.bad_index {
            return Err(TinyAgentsError::model(
                format!(
                    "a tool-call delta has index {index}, out of range: an index may be at most one past \
                     the {seen} call(s) seen so far and below {}; the reply is refused",
                    Self::MAX_TOOL_CALLS
                ),
                false,
            ));
        }
        if self.after_finish {
            return Err(TinyAgentsError::model(
                "the model sent content after its finish delta; the reply is refused",
                false,
            ));
        }
        let cut_off = self.finish == Some(FinishReason::Length);
        let mut calls = Vec::with_capacity(self.calls.len());
        for (i, c) in self.calls.into_iter().enumerate() {
            let args = if c.arguments.trim().is_empty() {
                "{}"
            } else {
                c.arguments.as_str()
            };
            if let Err(why) = crate::harness::tool::check_argument_text(args) {
                return Err(TinyAgentsError::model(
                    format!(
                        "tool call #{i} from the model (id: {:?}, name: {:?}) is refused: {why}; nothing of the \
                         reply ran",
                        c.id.as_deref().unwrap_or("none"),
                        c.name.as_deref().unwrap_or("none")
                    ),
                    true,
                ));
            }
            let parsed = serde_json::from_str(args);
            match (c.id, c.name, parsed) {
                (Some(id), Some(name), Ok(arguments)) => calls.push(ToolCall { id, name, arguments }),
                _ if cut_off => {}
                (id, name, parsed) => {
                    return Err(TinyAgentsError::model(
                        format!(
                            "tool call #{i} from the model is malformed (id: {id:?}, name: {name:?}, arguments: {})",
                            parsed
                                .err()
                                .map_or_else(|| "ok".to_string(), |e| format!("invalid JSON: {e}"))
                        ),
                        true,
                    ))
                }
            }
        }
        if let Some(dup) = first_repeated_id(&calls) {
            return Err(TinyAgentsError::model(
                format!(
                    "two tool calls of the reply have the id `{}`: an id names one call only; the reply is refused",
                    dup.id
                ),
                false,
            ));
        }
        let mut message = Message::assistant(self.text);
        if !self.reasoning.is_empty() {
            message
                .content
                .insert(0, ContentPart::Reasoning { text: self.reasoning });
        }
        let finish_reason = self.finish.unwrap_or(if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        });
        message.tool_calls = calls;
        Ok(ModelResponse {
            message,
            usage: self.usage,
            usage_reported: self.usage_reported,
            finish_reason,
            model: None,
        })
    }
}

/// The first call whose id an earlier call of the reply has. A reply holds a
/// few calls: they are compared pairwise, without allocating; a long list
/// goes through a set.
fn first_repeated_id(calls: &[ToolCall]) -> Option<&ToolCall> {
    const PAIRWISE_UP_TO: usize = 16;
    if calls.len() <= PAIRWISE_UP_TO {
        return calls
            .iter()
            .enumerate()
            .find(|(i, c)| calls[..*i].iter().any(|d| d.id == c.id))
            .map(|(_, c)| c);
    }
    let mut ids = std::collections::HashSet::with_capacity(calls.len());
    calls.iter().find(|c| !ids.insert(c.id.as_str()))
}

#[cfg(test)]
mod tests {
    use super::first_repeated_id;
    use crate::harness::tool::ToolCall;

    fn calls(ids: &[&str]) -> Vec<ToolCall> {
        ids.iter()
            .map(|id| ToolCall::new(*id, "t", serde_json::json!({})))
            .collect()
    }

    #[test]
    fn a_repeated_id_is_found_in_short_and_long_replies() {
        for n in [1usize, 2, 16, 17, 40] {
            let ids: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
            let mut refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            assert!(first_repeated_id(&calls(&refs)).is_none(), "{n} distinct ids");
            refs.push("c0");
            let all = calls(&refs);
            let dup = first_repeated_id(&all).expect("the repeat is found");
            assert!(std::ptr::eq(dup, &all[n]), "the later call is named, {n} calls");
        }
    }
}

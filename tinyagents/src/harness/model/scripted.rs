//! [`ScriptedModel`]: a fake [`ChatModel`] that replays scripted replies as delta streams.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;

use async_trait::async_trait;
use futures::StreamExt;

use super::{ChatModel, DeltaContent, FinishReason, ModelDelta, ModelRequest, ModelResponse, ModelStream, Usage};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::message::ContentPart;
use crate::harness::tool::ToolCall;

/// One scripted reply.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ScriptedTurn {
    /// Stream this response (text split at word boundaries, tool-call
    /// arguments split in two, then usage and the finish reason).
    Reply(ModelResponse),
    /// Stream exactly these deltas.
    Deltas(Vec<ModelDelta>),
    /// Fail the call with this error before streaming anything.
    Fail(TinyAgentsError),
    /// Stream these deltas, then fail mid-stream.
    FailAfter(Vec<ModelDelta>, TinyAgentsError),
}

impl ScriptedTurn {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Reply(ModelResponse::text(text))
    }

    /// A reply asking for one tool call (id `call-<name>`).
    pub fn tool_call(name: &str, arguments: serde_json::Value) -> Self {
        Self::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
            format!("call-{name}"),
            name,
            arguments,
        )]))
    }

    /// A reply asking for several tool calls at once.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self::Reply(ModelResponse::tool_calls(calls))
    }
}

impl From<ModelResponse> for ScriptedTurn {
    fn from(response: ModelResponse) -> Self {
        Self::Reply(response)
    }
}

type Responder = dyn Fn(&ModelRequest) -> ScriptedTurn + Send + Sync;

enum Script {
    Queue(Mutex<VecDeque<ScriptedTurn>>, usize),
    Fn(Box<Responder>),
}

/// A fake [`ChatModel`] for tests and examples: it replays scripted turns as
/// real delta streams, and records every request it receives.
///
/// ```
/// use tinyagents::harness::model::{ChatModel, ModelRequest, ScriptedModel, ScriptedTurn};
/// use futures::StreamExt;
///
/// # tokio_test_block_on(async {
/// let model = ScriptedModel::new([ScriptedTurn::text("Hello there")]);
/// let mut stream = model.stream(&ModelRequest::default()).await.unwrap();
/// let mut n = 0;
/// while let Some(delta) = stream.next().await { delta.unwrap(); n += 1; }
/// assert!(n >= 3); // "Hello ", "there", finish
/// assert_eq!(model.calls(), 1);
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct ScriptedModel {
    id: String,
    #[educe(Debug(ignore))]
    script: Script,
    #[educe(Debug(ignore))]
    requests: Mutex<Vec<ModelRequest>>,
    #[educe(Debug(ignore))]
    record: bool,
}

impl ScriptedModel {
    /// A model that replays `turns` in order, then fails with a clear error.
    pub fn new(turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        let turns: VecDeque<_> = turns.into_iter().collect();
        let n = turns.len();
        Self {
            id: "scripted".into(),
            script: Script::Queue(Mutex::new(turns), n),
            requests: Mutex::new(Vec::new()),
            record: true,
        }
    }

    /// A model that answers each request with `f(request)`. It does not record
    /// requests (so it can serve many concurrent runs without growing).
    pub fn from_fn(f: impl Fn(&ModelRequest) -> ScriptedTurn + Send + Sync + 'static) -> Self {
        Self {
            id: "scripted".into(),
            script: Script::Fn(Box::new(f)),
            requests: Mutex::new(Vec::new()),
            record: false,
        }
    }

    /// The same model with another id (to tell models apart in fallback tests).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Every request received so far (scripted-queue models only).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().expect("scripted model lock").clone()
    }

    /// How many calls were made (scripted-queue models only).
    pub fn calls(&self) -> usize {
        self.requests.lock().expect("scripted model lock").len()
    }

    /// The deltas a [`ScriptedTurn::Reply`] of `response` streams: its text
    /// and reasoning split after each space, each tool call's arguments (as
    /// compact JSON) split in two, then usage (when reported) and the finish
    /// reason.
    pub fn deltas_for(response: &ModelResponse) -> Vec<ModelDelta> {
        ReplyDeltas::new(response.clone()).collect()
    }
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream> {
        let turn = match &self.script {
            Script::Fn(f) => f(request),
            Script::Queue(queue, total) => {
                if self.record {
                    self.requests.lock().expect("scripted model lock").push(request.clone());
                }
                let next = queue.lock().expect("scripted model lock").pop_front();
                next.ok_or_else(|| {
                    TinyAgentsError::model(
                        format!("scripted model `{}` has no reply left: all {total} scripted turns were used; script one more turn", self.id),
                        false,
                    )
                })?
            }
        };
        let (deltas, tail) = match turn {
            ScriptedTurn::Reply(response) => (Deltas::Reply(ReplyDeltas::new(response)), None),
            ScriptedTurn::Deltas(deltas) => (Deltas::Listed(deltas.into_iter()), None),
            ScriptedTurn::Fail(err) => return Err(err),
            ScriptedTurn::FailAfter(deltas, err) => (Deltas::Listed(deltas.into_iter()), Some(err)),
        };
        Ok(Replay { deltas, tail }.boxed())
    }
}

/// Where a replayed stream's deltas come from.
enum Deltas {
    /// A reply, cut into deltas as the stream is read.
    Reply(ReplyDeltas),
    /// Deltas scripted one by one.
    Listed(std::vec::IntoIter<ModelDelta>),
}

impl Iterator for Deltas {
    type Item = ModelDelta;

    fn next(&mut self) -> Option<ModelDelta> {
        match self {
            Self::Reply(reply) => reply.next(),
            Self::Listed(deltas) => deltas.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Self::Reply(reply) => (usize::from(reply.finish.is_some()), None),
            Self::Listed(deltas) => deltas.size_hint(),
        }
    }
}

/// A reply's deltas, cut from the reply as they are taken (no list of them
/// is built): each piece of text is copied out once, and the last piece of
/// each text, each call's id and name and the second half of its arguments
/// move out of the reply without a copy.
struct ReplyDeltas {
    parts: std::vec::IntoIter<ContentPart>,
    /// The text part being cut: its text, where the next piece starts, and
    /// whether it is reasoning.
    text: Option<(String, usize, bool)>,
    calls: std::iter::Enumerate<std::vec::IntoIter<ToolCall>>,
    /// The second half of a call's arguments: the call's index and the text.
    rest: Option<(u32, String)>,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
}

impl ReplyDeltas {
    fn new(response: ModelResponse) -> Self {
        let data = response.message.into_data();
        Self {
            parts: data.content.into_iter(),
            text: None,
            calls: data.tool_calls.into_iter().enumerate(),
            rest: None,
            usage: response.usage_reported.then_some(response.usage),
            finish: Some(response.finish_reason),
        }
    }

    /// The next piece of the text part being cut: up to and with its next
    /// space, or the rest of it (moved out, not copied).
    fn next_piece(&mut self) -> Option<ModelDelta> {
        let (text, start, reasoning) = self.text.as_mut()?;
        let reasoning = *reasoning;
        let piece = match text[*start..].find(' ').map(|space| *start + space + 1) {
            Some(end) if end < text.len() => {
                let piece = text[*start..end].to_owned();
                *start = end;
                piece
            }
            _ => {
                let (mut text, start, _) = self.text.take()?;
                text.drain(..start);
                text
            }
        };
        Some(if reasoning {
            ModelDelta::reasoning(piece)
        } else {
            ModelDelta::text(piece)
        })
    }
}

impl Iterator for ReplyDeltas {
    type Item = ModelDelta;

    fn next(&mut self) -> Option<ModelDelta> {
        loop {
            if let Some(piece) = self.next_piece() {
                return Some(piece);
            }
            match self.parts.next() {
                Some(ContentPart::Text { text }) if !text.is_empty() => self.text = Some((text, 0, false)),
                Some(ContentPart::Reasoning { text }) if !text.is_empty() => self.text = Some((text, 0, true)),
                Some(_) => {}
                None => break,
            }
        }
        if let Some((index, arguments)) = self.rest.take() {
            return Some(ModelDelta::new(DeltaContent::ToolCall {
                index,
                id: None,
                name: None,
                arguments,
            }));
        }
        if let Some((i, call)) = self.calls.next() {
            let index = i as u32;
            // room for small arguments without growing; writing JSON into
            // a `String` cannot fail
            let mut arguments = String::with_capacity(64);
            let _ = write!(arguments, "{}", call.arguments);
            let mid = arguments
                .char_indices()
                .nth(arguments.chars().count() / 2)
                .map_or(arguments.len(), |(b, _)| b);
            let first = arguments[..mid].to_owned();
            arguments.drain(..mid);
            self.rest = Some((index, arguments));
            return Some(ModelDelta::new(DeltaContent::ToolCall {
                index,
                id: Some(call.id),
                name: Some(call.name),
                arguments: first,
            }));
        }
        if let Some(usage) = self.usage.take() {
            return Some(ModelDelta::usage(usage));
        }
        self.finish.take().map(ModelDelta::finish)
    }
}

/// A scripted turn's stream: its deltas, then its error if it has one. (One
/// stream rather than adaptors over an iterator: each delta moves out of the
/// list once, not once per adaptor.)
struct Replay {
    deltas: Deltas,
    tail: Option<TinyAgentsError>,
}

impl futures::Stream for Replay {
    type Item = Result<ModelDelta>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<ModelDelta>>> {
        std::task::Poll::Ready(match self.deltas.next() {
            Some(delta) => Some(Ok(delta)),
            None => self.tail.take().map(Err),
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let tail = usize::from(self.tail.is_some());
        let (low, high) = self.deltas.size_hint();
        (low + tail, high.map(|n| n + tail))
    }
}

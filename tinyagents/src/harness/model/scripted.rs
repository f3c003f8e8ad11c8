//! [`ScriptedModel`]: a fake [`ChatModel`] that replays scripted replies as delta streams.

use std::collections::VecDeque;
use std::sync::Mutex;

use async_trait::async_trait;
use futures::StreamExt;

use super::{ChatModel, DeltaContent, ModelDelta, ModelRequest, ModelResponse, ModelStream};
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

    /// The deltas a [`ScriptedTurn::Reply`] of `response` streams.
    pub fn deltas_for(response: &ModelResponse) -> Vec<ModelDelta> {
        let mut out = Vec::new();
        for part in &response.message.content {
            match part {
                ContentPart::Reasoning { text } => out.extend(split_words(text).map(ModelDelta::reasoning)),
                ContentPart::Text { text } => out.extend(split_words(text).map(ModelDelta::text)),
                _ => {}
            }
        }
        for (i, call) in response.message.tool_calls.iter().enumerate() {
            let args = call.arguments.to_string();
            let mid = args
                .char_indices()
                .nth(args.chars().count() / 2)
                .map_or(args.len(), |(b, _)| b);
            out.push(ModelDelta::new(DeltaContent::ToolCall {
                index: i as u32,
                id: Some(call.id.clone()),
                name: Some(call.name.clone()),
                arguments: args[..mid].to_string(),
            }));
            out.push(ModelDelta::new(DeltaContent::ToolCall {
                index: i as u32,
                id: None,
                name: None,
                arguments: args[mid..].to_string(),
            }));
        }
        if response.usage_reported {
            out.push(ModelDelta::usage(response.usage));
        }
        out.push(ModelDelta::finish(response.finish_reason.clone()));
        out
    }
}

fn split_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split_inclusive(' ').map(str::to_string)
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
            ScriptedTurn::Reply(response) => (Self::deltas_for(&response), None),
            ScriptedTurn::Deltas(deltas) => (deltas, None),
            ScriptedTurn::Fail(err) => return Err(err),
            ScriptedTurn::FailAfter(deltas, err) => (deltas, Some(err)),
        };
        Ok(Replay {
            deltas: deltas.into_iter(),
            tail,
        }
        .boxed())
    }
}

/// A scripted turn's stream: its deltas, then its error if it has one. (One
/// stream rather than adaptors over an iterator: each delta moves out of the
/// list once, not once per adaptor.)
struct Replay {
    deltas: std::vec::IntoIter<ModelDelta>,
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
        let n = self.deltas.len() + usize::from(self.tail.is_some());
        (n, Some(n))
    }
}

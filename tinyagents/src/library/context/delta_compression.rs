//! [`DeltaCompressionMiddleware`]: coalesces streamed text deltas into fewer, larger
//! ones before they are forwarded to the sink, leaving the final accumulated
//! text byte-identical.

use tokio::time::{Duration, Instant};

use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::ContentPart;
use crate::harness::middleware::{ModelHandler, RunState};
use crate::harness::model::{DeltaContent, ModelDelta, ModelRequest, ModelResponse};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`DeltaCompressionMiddleware`] (`type = "delta_compression"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::DeltaCompressionConfig;
///
/// let c: DeltaCompressionConfig = from_toml_str("min_chars = 128\nmax_interval_ms = 50").unwrap();
/// assert_eq!(c.min_chars, 128);
/// assert!(from_toml_str::<DeltaCompressionConfig>("min_chars = 0").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "delta_compression", builds = DeltaCompressionMiddleware)]
pub struct DeltaCompressionConfig {
    /// Forward buffered text once it holds at least this many characters.
    #[config(default = 64, range = 1..)]
    pub min_chars: u32,
    /// Also forward what is buffered when this long passed since the last
    /// forward (checked as deltas arrive; 0: no time limit).
    #[config(default = 100)]
    pub max_interval_ms: u64,
}

impl From<DeltaCompressionConfig> for DeltaCompressionMiddleware {
    fn from(c: DeltaCompressionConfig) -> Self {
        Self {
            min_chars: c.min_chars as usize,
            max_interval: (c.max_interval_ms > 0).then(|| Duration::from_millis(c.max_interval_ms)),
        }
    }
}

/// Its run state: the buffers, tagged with the model call (attempt) they belong to.
#[derive(Debug, Default)]
struct BufferState {
    attempt: u32,
    text: String,
    reasoning: String,
    last_forward: Option<Instant>,
}

impl BufferState {
    /// Starts a new attempt's buffers (drops what a failed attempt left).
    fn sync(&mut self, attempt: u32) {
        if self.attempt != attempt {
            self.attempt = attempt;
            self.text.clear();
            self.reasoning.clear();
            self.last_forward = None;
        }
    }
}

/// Coalesces streamed text and reasoning deltas: a delta is held back (and
/// recorded as suppressed) until the held text reaches `min_chars` or
/// `max_interval_ms` passed, then forwarded as one delta carrying everything
/// held. Text is only ever delayed, never reordered or changed, so the
/// accumulated reply is byte-identical; what is still held when the stream
/// ends is appended to the reply and forwarded as a last delta by its
/// `wrap_model` layer. Tool-call, usage and finish deltas pass at once.
///
/// Register it *inside* every wrap that calls the model more than once
/// (retry, fallback, output-limit recovery, structured output): it declares
/// `after` them, so the stack puts it there when they are present.
///
/// ```
/// use tinyagents::config::{BuildMiddleware, MiddlewareConfig};
/// use tinyagents::middleware::{DeltaCompressionMiddleware, DeltaCompressionConfig};
/// use tinyagents::prelude::*;
///
/// let coalesce: DeltaCompressionMiddleware = DeltaCompressionConfig::defaults().unwrap().build();
/// let _stack: MiddlewareStack<()> = MiddlewareStack::new().with(coalesce).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaCompressionMiddleware {
    min_chars: usize,
    max_interval: Option<Duration>,
}

impl DeltaCompressionMiddleware {
    /// Coalescing to `min_chars` characters, forwarding at least every 100 ms
    /// (the config's `max_interval_ms` default; see [`without_max_interval`](Self::without_max_interval)).
    pub fn new(min_chars: usize) -> Self {
        Self {
            min_chars: min_chars.max(1),
            max_interval: Some(Duration::from_millis(100)),
        }
    }

    /// The same, with no time limit: text is forwarded only at `min_chars` and at the end.
    pub fn without_max_interval(mut self) -> Self {
        self.max_interval = None;
        self
    }

    /// The same, forwarding at least every `interval`.
    pub fn with_max_interval(mut self, interval: Duration) -> Self {
        self.max_interval = Some(interval);
        self
    }
}

/// Coalesces streamed text deltas before they are forwarded, keeping the final text byte-identical.
#[middleware(
    builtin,
    name = "delta_compression",
    run_state = BufferState,
    config = DeltaCompressionConfig,
    after_if_present = ["model_retry", "model_fallback", "timeout", "output_limit_recovery", "structured_output"],
    doc(
        mutation = "Holds back text and reasoning deltas (suppressing them) and prepends the held text to the delta that releases it; at the end of a model call appends what is still held to the reply's text or reasoning. The accumulated reply is byte-identical to the unbuffered one.",
        events = "`DeltaSuppressed` for each held delta (recorded by the stack); fewer, larger `ModelDelta` events; the held tail as a last `ModelDelta` of the attempt.",
        failure = "Cannot fail; a failed attempt's held text is dropped with the attempt (its deltas are discarded anyway).",
        streaming = "Its purpose: fewer, larger deltas reach the sink and persistence; text is delayed at most until `min_chars` or `max_interval_ms` (checked as deltas arrive), never reordered. Tool-call, usage and finish deltas are not delayed.",
        cache = "None: it does not touch the request.",
        retries = "Buffers are per attempt (keyed by the model-call counter) and its wrap flushes per attempt, so it must sit inside retry, fallback and recovery wraps; it declares `after` them."
    )
)]
impl DeltaCompressionMiddleware {
    #[on_model_delta]
    fn coalesce<C>(&self, ctx: &mut RunContext<C>, b: &mut BufferState, delta: &mut ModelDelta) -> Result<()> {
        let is_text = matches!(delta.content, DeltaContent::Text { .. });
        let (DeltaContent::Text { text: piece } | DeltaContent::Reasoning { text: piece }) = &mut delta.content else {
            return Ok(());
        };
        let attempt = ctx.counters().model_calls;
        b.sync(attempt);
        let now = Instant::now();
        let last = *b.last_forward.get_or_insert(now);
        let held = if is_text { &mut b.text } else { &mut b.reasoning };
        held.push_str(piece);
        let due = held.chars().count() >= self.min_chars || self.max_interval.is_some_and(|i| now - last >= i);
        if due {
            *piece = std::mem::take(held);
            b.last_forward = Some(now);
        } else {
            delta.suppress();
        }
        Ok(())
    }

    #[wrap_model]
    async fn flush<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        buffers: &RunState<BufferState>,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<ModelResponse> {
        let mut response = next.run(ctx, state, request).await?.into_response();
        let attempt = ctx.counters().model_calls;
        let (text, reasoning) = {
            let mut b = buffers.lock()?;
            if b.attempt != attempt {
                return Ok(response);
            }
            (std::mem::take(&mut b.text), std::mem::take(&mut b.reasoning))
        };
        if !reasoning.is_empty() {
            match response.message.content.iter_mut().find_map(|p| match p {
                ContentPart::Reasoning { text } => Some(text),
                _ => None,
            }) {
                Some(r) => r.push_str(&reasoning),
                None => response.message.content.insert(
                    0,
                    ContentPart::Reasoning {
                        text: reasoning.clone(),
                    },
                ),
            }
            ctx.events()
                .emit_with(EventKind::ModelDelta, || AgentEvent::ModelDelta {
                    run_id: ctx.run_id().clone(),
                    attempt,
                    delta: ModelDelta::reasoning(reasoning),
                });
        }
        if !text.is_empty() {
            match response.message.content.iter_mut().find_map(|p| match p {
                ContentPart::Text { text } => Some(text),
                _ => None,
            }) {
                Some(t) => t.push_str(&text),
                None => response.message.content.push(ContentPart::text(text.clone())),
            }
            ctx.events()
                .emit_with(EventKind::ModelDelta, || AgentEvent::ModelDelta {
                    run_id: ctx.run_id().clone(),
                    attempt,
                    delta: ModelDelta::text(text),
                });
        }
        Ok(response)
    }
}

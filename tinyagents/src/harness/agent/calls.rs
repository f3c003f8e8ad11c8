//! The innermost layers the agent supplies to the onions: the streamed model
//! call and the tool call. With no wrap layer there is no onion, and the
//! loop awaits them in place.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;

use async_trait::async_trait;
use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc::unbounded_channel;

use super::Agent;
use crate::harness::context::RunContext;
use crate::harness::error::{ErrorKind, Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind, EventSink};
use crate::harness::middleware::{HookKind, ModelBaseCall, ToolBaseCall};
use crate::harness::model::{ModelRequest, ModelResponse, ResponseAccumulator};
use crate::harness::run::FailedAttemptUsage;
use crate::harness::tool::{ToolCall, ToolContext, ToolDelta, ToolResult};

/// The real model call: stream, delta hooks, sink, accumulate.
pub(super) struct ModelCall<'a, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    pub(super) agent: &'a Agent<S, C>,
}

#[async_trait]
impl<S, C> ModelBaseCall<S, C> for ModelCall<'_, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    async fn call(&self, ctx: &mut RunContext<C>, state: &S, request: ModelRequest) -> Result<ModelResponse> {
        self.run(ctx, state, request).await
    }
}

impl<S, C> ModelCall<'_, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The call itself. The loop awaits it in place when the stack has no
    /// wrap layer (no boxed future); the onion calls it through
    /// [`ModelBaseCall`].
    pub(super) async fn run(&self, ctx: &mut RunContext<C>, state: &S, request: ModelRequest) -> Result<ModelResponse> {
        if ctx.flow().is_cancelled() {
            return Err(TinyAgentsError::cancelled("the run was cancelled before a model call"));
        }
        let stack = &self.agent.stack;
        let model = request.route.as_ref().map_or(&self.agent.model, |r| &r.0);
        ctx.counters_mut().model_calls += 1;
        let attempt = ctx.next_attempt();
        let step = ctx.counters().steps;
        ctx.events()
            .emit_with(EventKind::ModelCallStarted, || AgentEvent::ModelCallStarted {
                run_id: ctx.run_id().clone(),
                step,
                attempt,
                model: if request.route.is_some() {
                    model.id().into()
                } else {
                    self.agent.model_id.clone()
                },
            });
        ctx.emit_request(step, attempt, &request);
        let guard = AttemptGuard::arm(ctx, step, attempt);
        // Usage the provider reported during this attempt: charged even when the attempt fails.
        let mut streamed = crate::harness::model::Usage::default();
        let result = AssertUnwindSafe(async {
            let cancelled = || TinyAgentsError::cancelled("the run was cancelled during a model call");
            let token = ctx.flow().cancellation().clone();
            // One cancellation future for the whole call, polled only while
            // the model has nothing ready (so a call whose start and deltas
            // are ready never registers with the token): the run was checked
            // for cancellation on entry, and each delta checks it again.
            let cancel = token.cancelled();
            tokio::pin!(cancel);
            let mut start = model.stream(&request);
            let mut stream = std::future::poll_fn(|cx| match start.as_mut().poll(cx) {
                Poll::Pending => cancel.as_mut().poll(cx).map(|()| Err(cancelled())),
                ready => ready,
            })
            .await?;
            drop(start);
            let mut acc = ResponseAccumulator::new();
            let forward = ctx.events().wants(EventKind::ModelDelta);
            loop {
                // A cancelled run takes no more items; a stalled stream is
                // dropped (closing its connection) as soon as the run is
                // cancelled (the cancellation comes out as the item's error,
                // returned below). The cancellation future is polled only
                // while the stream has nothing ready: a ready item costs one
                // check of the token, not a poll of its waiter list.
                if token.is_cancelled() {
                    return Err(cancelled());
                }
                let item = std::future::poll_fn(|cx| match stream.poll_next_unpin(cx) {
                    Poll::Pending => cancel.as_mut().poll(cx).map(|()| Some(Err(cancelled()))),
                    ready => ready,
                })
                .await;
                let Some(item) = item else { break };
                let mut delta = item?;
                if let crate::harness::model::DeltaContent::Usage { usage } = &delta.content {
                    streamed += *usage;
                }
                stack.run_on_model_delta(ctx, state, &mut delta).await?;
                if delta.has_released() {
                    // Text a hook held back and releases now (ahead of this delta).
                    for released in delta.take_released() {
                        if forward {
                            ctx.events().sink().emit(AgentEvent::ModelDelta {
                                run_id: ctx.run_id().clone(),
                                attempt,
                                delta: released.clone(),
                            });
                        }
                        acc.push_owned(released);
                    }
                }
                if delta.is_suppressed() {
                    continue;
                }
                if forward {
                    ctx.events().sink().emit(AgentEvent::ModelDelta {
                        run_id: ctx.run_id().clone(),
                        attempt,
                        delta: delta.clone(),
                    });
                }
                acc.push_owned(delta);
            }
            let mut response = acc.finish()?;
            response.model = Some(model.id().to_owned());
            Ok(response)
        })
        .catch_unwind()
        .await
        .unwrap_or_else(|payload| Err(model_panicked(model.id(), &*payload)));
        guard.disarm();
        match &result {
            Ok(response) => {
                ctx.add_usage(response.usage);
                ctx.events()
                    .emit_with(EventKind::ModelCallCompleted, || AgentEvent::ModelCallCompleted {
                        run_id: ctx.run_id().clone(),
                        step,
                        attempt,
                        usage: response.usage,
                        usage_reported: response.usage_reported,
                        finish_reason: Some(response.finish_reason.clone()),
                        error: None,
                    });
            }
            Err(e) => {
                ctx.locals()
                    .local::<crate::harness::run::LastFailedAttempt>()
                    .0
                    .store(ctx.counters().model_calls, std::sync::atomic::Ordering::Relaxed);
                if !streamed.is_zero() {
                    // A paid attempt is not free because it failed: the run's usage and
                    // the budget (through `FailedAttemptUsage`) count what it reported.
                    ctx.add_usage(streamed);
                    *ctx.locals()
                        .local::<FailedAttemptUsage>()
                        .0
                        .lock()
                        .expect("failed attempt usage lock") += streamed;
                }
                ctx.events()
                    .emit_with(EventKind::ModelCallCompleted, || AgentEvent::ModelCallCompleted {
                        run_id: ctx.run_id().clone(),
                        step,
                        attempt,
                        usage: streamed,
                        usage_reported: !streamed.is_zero(),
                        finish_reason: None,
                        error: Some(e.kind()),
                    });
                ctx.events()
                    .emit_with(EventKind::AttemptDiscarded, || AgentEvent::AttemptDiscarded {
                        run_id: ctx.run_id().clone(),
                        attempt,
                        reason: "the model call failed; drop the deltas streamed by this attempt".into(),
                    });
            }
        }
        result
    }
}

/// Ends an attempt's events when its future is dropped before it finishes (a
/// timeout or a cancellation outside it): `ModelCallCompleted` with a
/// `cancelled` error, then `AttemptDiscarded`, so started/completed stay
/// balanced. Holds nothing when the sink wants neither event.
struct AttemptGuard {
    sink: Option<Arc<dyn EventSink>>,
    run_id: Arc<str>,
    step: u32,
    attempt: u32,
    completed: bool,
    discarded: bool,
}

impl AttemptGuard {
    fn arm<C>(ctx: &RunContext<C>, step: u32, attempt: u32) -> Self {
        let completed = ctx.events().wants(EventKind::ModelCallCompleted);
        let discarded = ctx.events().wants(EventKind::AttemptDiscarded);
        Self {
            sink: (completed || discarded).then(|| ctx.events().sink().clone()),
            run_id: ctx.run_id().clone(),
            step,
            attempt,
            completed,
            discarded,
        }
    }

    fn disarm(mut self) {
        self.sink = None;
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let Some(sink) = self.sink.take() else { return };
        if self.completed {
            sink.emit(AgentEvent::ModelCallCompleted {
                run_id: self.run_id.clone(),
                step: self.step,
                attempt: self.attempt,
                usage: Default::default(),
                usage_reported: false,
                finish_reason: None,
                error: Some(ErrorKind::Cancelled),
            });
        }
        if self.discarded {
            sink.emit(AgentEvent::AttemptDiscarded {
                run_id: self.run_id.clone(),
                attempt: self.attempt,
                reason: "the model call was abandoned before it finished (a timeout or cancellation outside it); \
                         drop the deltas streamed by this attempt"
                    .into(),
            });
        }
    }
}

/// The real tool call: look up, run with progress through the delta hooks.
pub(super) struct ToolCallBase<'a, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    pub(super) agent: &'a Agent<S, C>,
}

#[async_trait]
impl<S, C> ToolBaseCall<S, C> for ToolCallBase<'_, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    async fn call(&self, ctx: &mut RunContext<C>, state: &S, call: ToolCall) -> Result<ToolResult> {
        self.run(ctx, state, call).await.map_err(|failed| failed.error)
    }
}

/// A tool call that failed, with the id and name it moved out of the call
/// (so its error can answer it without a copy of them).
pub(super) struct FailedCall {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) error: TinyAgentsError,
}

impl FailedCall {
    /// The error as the call's result.
    pub(super) fn into_result(self) -> ToolResult {
        ToolResult::error_for(self.id, self.name, self.error.to_string())
    }
}

impl<S, C> ToolCallBase<'_, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The call itself. The loop awaits it in place when the stack has no
    /// wrap layer (no boxed future, and a failure hands back the call's id
    /// and name); the onion calls it through [`ToolBaseCall`].
    pub(super) async fn run(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        call: ToolCall,
    ) -> std::result::Result<ToolResult, FailedCall> {
        match self.checked(ctx, &call).await {
            Ok(tool) => self.output(ctx, state, call, tool).await,
            Err(error) => Err(FailedCall {
                id: call.id,
                name: call.name,
                error,
            }),
        }
    }

    /// The call's tool, once the runtime's last gates let the call through.
    async fn checked(
        &self,
        ctx: &mut RunContext<C>,
        call: &ToolCall,
    ) -> Result<&'_ Arc<dyn crate::harness::tool::Tool>> {
        if ctx.flow().is_cancelled() {
            return Err(TinyAgentsError::cancelled("the run was cancelled before a tool call"));
        }
        let Some(tool) = self.agent.tools.get(&call.name) else {
            let known: Vec<&str> = self.agent.tools.names().collect();
            return Err(TinyAgentsError::tool(
                &call.name,
                format!(
                    "there is no tool named `{}`; the tools are: {}",
                    call.name,
                    known.join(", ")
                ),
            ));
        };
        // The last gate before the tool: approvals bound to the exact call, and the parent run's
        // restrictions whatever this run's stack holds.
        let refused = |reason: String| {
            TinyAgentsError::validation(format!(
                "the runtime refused the call `{}` to `{}`: {reason}",
                call.id, call.name
            ))
        };
        ctx.policy().check_call(call, Some(&tool.policy())).map_err(refused)?;
        ctx.policy().check_call_async(call).await.map_err(refused)?;
        ctx.use_approval(&call.id).map_err(refused)?;
        Ok(tool)
    }

    /// Runs `tool` with progress through the delta hooks.
    async fn output(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        call: ToolCall,
        tool: &Arc<dyn crate::harness::tool::Tool>,
    ) -> std::result::Result<ToolResult, FailedCall> {
        let stack = &self.agent.stack;
        let wants_deltas = stack.has(HookKind::OnToolDelta) || ctx.events().wants(EventKind::ToolDelta);
        let (tx, mut rx) = if wants_deltas {
            let (tx, rx) = unbounded_channel::<ToolDelta>();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        // The call is this layer's own: its arguments move into the tool and
        // its id and name into the result (or the failure), nothing is copied
        // but the id the tool's context keeps.
        let ToolCall { id, name, arguments } = call;
        let cx = ToolContext::new(id.clone(), ctx.as_parent(), tx);
        // A panicking tool is the tool's failure (a classified `Tool` error
        // naming it), not a panic of whatever wrap layer happens to be innermost.
        let fut = AssertUnwindSafe(tool.call(cx, arguments))
            .catch_unwind()
            .map(|out| out.unwrap_or_else(|payload| Err(tool_panicked(&name, &*payload))));
        tokio::pin!(fut);
        let output = async {
            loop {
                let Some(rx_ref) = rx.as_mut() else { break fut.await };
                tokio::select! {
                    biased;
                    out = &mut fut => {
                        // Deliver progress sent just before the tool returned.
                        while let Ok(mut d) = rx_ref.try_recv() {
                            stack.run_on_tool_delta(ctx, state, &mut d).await?;
                            forward_tool_delta(ctx, d);
                        }
                        break out;
                    }
                    Some(mut d) = rx_ref.recv() => {
                        stack.run_on_tool_delta(ctx, state, &mut d).await?;
                        forward_tool_delta(ctx, d);
                    }
                }
            }
        }
        .await;
        match output {
            Ok(output) => {
                if let Some(usage) = output.usage {
                    ctx.add_usage(usage);
                }
                Ok(ToolResult {
                    call_id: id,
                    name,
                    content: output.content,
                    error: None,
                    data: output.data,
                })
            }
            Err(error) => Err(FailedCall { id, name, error }),
        }
    }
}

/// The text of a panic payload.
fn panic_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string panic payload".to_owned())
}

/// The classified error for a tool that panicked.
#[cold]
fn tool_panicked(name: &str, payload: &(dyn Any + Send)) -> TinyAgentsError {
    TinyAgentsError::tool(
        name,
        format!(
            "the tool `{name}` panicked: {}; the call has no output (fix the tool: a tool returns an error, it does not panic)",
            panic_text(payload)
        ),
    )
}

/// The classified error for a model whose call or stream panicked.
#[cold]
fn model_panicked(model: &str, payload: &(dyn Any + Send)) -> TinyAgentsError {
    TinyAgentsError::model(
        format!(
            "the model `{model}` panicked while streaming its reply: {}; the attempt is discarded \
             (fix the model implementation: it should return an error, not panic)",
            panic_text(payload)
        ),
        false,
    )
}

fn forward_tool_delta<C>(ctx: &RunContext<C>, delta: ToolDelta) {
    if !delta.is_suppressed() {
        ctx.events().emit_with(EventKind::ToolDelta, || AgentEvent::ToolDelta {
            run_id: ctx.run_id().clone(),
            delta,
        });
    }
}

/// The `ToolCallStarted`/`ToolCallCompleted` pair of one call: started when
/// opened, completed exactly once — by [`close`](Self::close), or on drop
/// (an error that ends the run, a dropped future) as an error.
pub(super) struct ToolCallEvents {
    pending: Option<(
        std::sync::Arc<dyn crate::harness::event::EventSink>,
        std::sync::Arc<str>,
    )>,
    call_id: String,
    tool: String,
}

impl ToolCallEvents {
    pub(super) fn open<C>(ctx: &RunContext<C>, call_id: &str, tool: &str, arguments: &serde_json::Value) -> Self {
        ctx.events()
            .emit_with(EventKind::ToolCallStarted, || AgentEvent::ToolCallStarted {
                run_id: ctx.run_id().clone(),
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                arguments: arguments.clone(),
            });
        let wants = ctx.events().wants(EventKind::ToolCallCompleted);
        Self {
            pending: wants.then(|| (ctx.events().sink().clone(), ctx.run_id().clone())),
            call_id: if wants { call_id.to_owned() } else { String::new() },
            tool: if wants { tool.to_owned() } else { String::new() },
        }
    }

    /// Ends the call's events with its result.
    pub(super) fn close(mut self, result: &ToolResult) {
        if self.pending.is_some() {
            self.complete(result.is_error(), result.content.clone());
        }
    }

    fn complete(&mut self, is_error: bool, content: String) {
        if let Some((sink, run_id)) = self.pending.take() {
            sink.emit(AgentEvent::ToolCallCompleted {
                run_id,
                call_id: std::mem::take(&mut self.call_id),
                tool: std::mem::take(&mut self.tool),
                is_error,
                content,
            });
        }
    }
}

impl Drop for ToolCallEvents {
    fn drop(&mut self) {
        self.complete(true, String::new());
    }
}

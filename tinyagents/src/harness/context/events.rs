//! The events facet of a run context: where a hook's events go.

use super::*;

/// The run's events: the sink and the kinds it wants, from [`RunContext::events`].
///
/// A hook that reports something builds the event only when the sink wants it:
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::harness::context::{RunConfig, RunContext};
/// use tinyagents::harness::event::{AgentEvent, CollectingSink, EventKind};
///
/// let sink = Arc::new(CollectingSink::new());
/// let ctx: RunContext = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
/// assert!(ctx.events().wants(EventKind::StateUpdated));
/// ctx.events().emit_with(EventKind::StateUpdated, || AgentEvent::StateUpdated {
///     key: "mode".into(),
///     by: None,
///     value: "plan".into(),
/// });
/// assert_eq!(sink.events().len(), 1);
/// ```
pub struct Events<'a, Ctx = ()> {
    pub(super) ctx: &'a RunContext<Ctx>,
}

impl<'a, Ctx> Events<'a, Ctx> {
    /// The run's event sink.
    pub fn sink(self) -> &'a Arc<dyn EventSink> {
        &self.ctx.sink
    }

    /// Whether the sink wants events of `kind`.
    #[inline]
    pub fn wants(self, kind: EventKind) -> bool {
        self.ctx.mask.contains(kind)
    }

    /// Emits an event if the sink wants its kind.
    pub fn emit(self, event: AgentEvent) {
        if self.ctx.mask.contains(event.kind()) {
            self.ctx.sink.emit(event);
        }
    }

    /// Builds and emits an event only if the sink wants `kind`.
    #[inline]
    pub fn emit_with(self, kind: EventKind, build: impl FnOnce() -> AgentEvent) {
        if self.ctx.mask.contains(kind) {
            self.ctx.sink.emit(build());
        }
    }
}

impl<Ctx> Clone for Events<'_, Ctx> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Ctx> Copy for Events<'_, Ctx> {}

//! [`EventSink`] and its implementations.

use std::sync::Mutex;

use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::{AgentEvent, EventKind};

/// A set of [`EventKind`]s a sink wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventMask(u64);

impl EventMask {
    /// Every kind but the opt-in ones: [`EventKind::ModelRequest`], which
    /// carries the conversation, goes only to a sink that names it
    /// (`EventMask::ALL.with(EventKind::ModelRequest)`).
    pub const ALL: Self = Self(!Self::bit(EventKind::ModelRequest));
    /// No kind: the runtime builds no event at all.
    pub const NONE: Self = Self(0);

    const fn bit(kind: EventKind) -> u64 {
        1u64 << (kind as u32)
    }

    /// Exactly these kinds.
    pub fn only(kinds: impl IntoIterator<Item = EventKind>) -> Self {
        Self(kinds.into_iter().fold(0, |m, k| m | Self::bit(k)))
    }

    /// Every kind of [`ALL`](Self::ALL) but these.
    pub fn except(kinds: impl IntoIterator<Item = EventKind>) -> Self {
        Self(Self::ALL.0 & !Self::only(kinds).0)
    }

    /// This set and `kind` (how a sink opts in to an opt-in kind).
    pub const fn with(self, kind: EventKind) -> Self {
        Self(self.0 | Self::bit(kind))
    }

    /// Whether `kind` is in the set.
    #[inline]
    pub const fn contains(self, kind: EventKind) -> bool {
        self.0 & Self::bit(kind) != 0
    }

    /// Whether the set is empty.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// Where a run's events go.
///
/// `interest` is read once when a run context is made; `emit` is called only
/// for kinds in it.
pub trait EventSink: Send + Sync {
    /// Receives one event.
    fn emit(&self, event: AgentEvent);

    /// The kinds this sink wants (default: [`EventMask::ALL`], every kind
    /// but the opt-in `ModelRequest`).
    fn interest(&self) -> EventMask {
        EventMask::ALL
    }
}

/// A sink that wants nothing: no event is ever built for it.
#[derive(Debug, Clone, Copy, Default)]
pub struct NullSink;

impl EventSink for NullSink {
    fn emit(&self, _event: AgentEvent) {}

    fn interest(&self) -> EventMask {
        EventMask::NONE
    }
}

/// A sink that keeps every event in memory, for tests and traces.
///
/// ```
/// use tinyagents::harness::event::{AgentEvent, CollectingSink, EventSink};
///
/// let sink = CollectingSink::new();
/// sink.emit(AgentEvent::Notice { source: "demo".into(), message: "hi".into(), is_error: false });
/// assert_eq!(sink.events().len(), 1);
/// ```
#[derive(Debug)]
pub struct CollectingSink {
    events: Mutex<Vec<AgentEvent>>,
    mask: EventMask,
}

impl Default for CollectingSink {
    fn default() -> Self {
        Self::new()
    }
}

impl CollectingSink {
    /// A sink collecting every kind.
    pub fn new() -> Self {
        Self {
            events: Mutex::new(Vec::new()),
            mask: EventMask::ALL,
        }
    }

    /// A sink collecting only the kinds in `mask`.
    pub fn with_mask(mask: EventMask) -> Self {
        Self {
            events: Mutex::new(Vec::new()),
            mask,
        }
    }

    /// A copy of the events so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.events.lock().expect("collecting sink lock").clone()
    }

    /// Takes the events so far, leaving the sink empty.
    pub fn take(&self) -> Vec<AgentEvent> {
        std::mem::take(&mut *self.events.lock().expect("collecting sink lock"))
    }

    /// How many events were collected.
    pub fn len(&self) -> usize {
        self.events.lock().expect("collecting sink lock").len()
    }

    /// Whether no event was collected.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl EventSink for CollectingSink {
    fn emit(&self, event: AgentEvent) {
        self.events.lock().expect("collecting sink lock").push(event);
    }

    fn interest(&self) -> EventMask {
        self.mask
    }
}

/// A sink that sends events into a tokio channel, for a consumer task (a UI, a log writer).
#[derive(Debug, Clone)]
pub struct ChannelSink {
    tx: UnboundedSender<AgentEvent>,
}

impl ChannelSink {
    /// A sink and the receiver of its events.
    pub fn new() -> (Self, UnboundedReceiver<AgentEvent>) {
        let (tx, rx) = unbounded_channel();
        (Self { tx }, rx)
    }
}

impl EventSink for ChannelSink {
    fn emit(&self, event: AgentEvent) {
        // A dropped receiver means nobody listens any more; the run goes on.
        let _ = self.tx.send(event);
    }

    fn interest(&self) -> EventMask {
        if self.tx.is_closed() {
            EventMask::NONE
        } else {
            EventMask::ALL
        }
    }
}

/// A sink that forwards events to `tracing` at DEBUG level (target `tinyagents::event`).
///
/// It wants nothing when no subscriber listens at that level.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingSink;

impl EventSink for TracingSink {
    fn emit(&self, event: AgentEvent) {
        tracing::debug!(target: "tinyagents::event", kind = ?event.kind(), event = ?event);
    }

    fn interest(&self) -> EventMask {
        if tracing::enabled!(target: "tinyagents::event", tracing::Level::DEBUG) {
            EventMask::ALL
        } else {
            EventMask::NONE
        }
    }
}

/// A sink made from a closure.
///
/// ```
/// use tinyagents::harness::event::{AgentEvent, EventSink, FnSink};
/// let sink = FnSink::new(|e: AgentEvent| println!("{e:?}"));
/// sink.emit(AgentEvent::Notice { source: "demo".into(), message: "hi".into(), is_error: false });
/// ```
pub struct FnSink<F>(F);

impl<F: Fn(AgentEvent) + Send + Sync> FnSink<F> {
    /// A sink calling `f` for every event.
    pub fn new(f: F) -> Self {
        Self(f)
    }
}

impl<F: Fn(AgentEvent) + Send + Sync> EventSink for FnSink<F> {
    fn emit(&self, event: AgentEvent) {
        (self.0)(event);
    }
}

//! A capturing `tracing` subscriber for the observability tests: every span
//! (with the fields recorded on it, at creation and later, and its parent)
//! and every event (level, target, fields), kept in memory.
//!
//! # Why one global subscriber
//!
//! `tracing` caches each callsite's interest globally, the first time the
//! callsite is hit, from the subscribers alive at that moment — and when only
//! one subscriber exists, from *the default of the thread that hits it*. A
//! per-test `set_default` capture therefore loses every callsite that some
//! other thread (a test running in parallel, a runtime worker, a spawned task)
//! reached first: that callsite is cached as "never" and stays so. A test then
//! fails or passes depending on which thread won the race.
//!
//! So this module installs, once per test binary, one global subscriber that
//! is interested in every callsite (no callsite is ever cached as "never"),
//! and routes each span and event to the capture it belongs to:
//!
//! 1. a span or event inside a captured span (its explicit or contextual
//!    parent) goes to that span's capture, on whatever thread it is emitted —
//!    so work spawned onto other threads inside a captured span is captured;
//! 2. otherwise, one carrying `run_id = <id>` (the `logging` built-in's
//!    events) or `gen_ai.agent.id = <id>` (the `tracing` built-in's run span)
//!    goes to the capture that [follows](Captured::follow_run) that run, from
//!    any thread;
//! 3. otherwise it goes to the capture installed on the emitting thread by
//!    [`capture`] (a `#[tokio::test]` runs on one thread: its current-thread
//!    runtime polls spawned tasks there too), and nowhere if there is none.
//!
//! Tests running in parallel never see each other's output.

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, OnceLock};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::{LookupSpan, SpanRef};
use tracing_subscriber::Layer;

/// One captured span.
#[derive(Debug, Clone, Default)]
pub struct SpanRecord {
    pub name: String,
    pub parent: Option<String>,
    pub fields: BTreeMap<String, String>,
}

/// One captured event.
#[derive(Debug, Clone)]
pub struct EventRecord {
    pub level: Level,
    pub target: String,
    pub fields: BTreeMap<String, String>,
}

impl EventRecord {
    pub fn message(&self) -> &str {
        self.fields.get("message").map(String::as_str).unwrap_or("")
    }
}

#[derive(Default)]
struct Store {
    spans: Vec<SpanRecord>,
    events: Vec<EventRecord>,
}

/// The captured spans and events.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Store>>);

impl Captured {
    pub fn spans(&self) -> Vec<SpanRecord> {
        self.lock().spans.clone()
    }

    pub fn spans_named(&self, name: &str) -> Vec<SpanRecord> {
        self.spans().into_iter().filter(|s| s.name == name).collect()
    }

    pub fn events(&self) -> Vec<EventRecord> {
        self.lock().events.clone()
    }

    /// Also captures, from any thread, the events carrying `run_id = run_id`
    /// and the spans carrying `gen_ai.agent.id = run_id` (with everything
    /// inside them), until this capture's guard drops. Use a run id no other
    /// test uses.
    pub fn follow_run(&self, run_id: &str) {
        let mut runs = followed().lock().unwrap();
        assert!(
            !runs.iter().any(|(id, _)| id == run_id),
            "two live captures follow run id {run_id:?}: give each test its own run id"
        );
        runs.push((run_id.to_owned(), self.clone()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.0.lock().unwrap()
    }

    fn same(&self, other: &Captured) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

thread_local! {
    /// The captures installed on this thread, innermost last.
    static CURRENT: RefCell<Vec<Captured>> = const { RefCell::new(Vec::new()) };
}

/// The followed run ids and their captures.
fn followed() -> &'static Mutex<Vec<(String, Captured)>> {
    static FOLLOWED: OnceLock<Mutex<Vec<(String, Captured)>>> = OnceLock::new();
    FOLLOWED.get_or_init(Default::default)
}

fn current_thread_capture() -> Option<Captured> {
    CURRENT.try_with(|c| c.borrow().last().cloned()).ok().flatten()
}

fn capture_following(fields: &BTreeMap<String, String>) -> Option<Captured> {
    let id = fields.get("run_id").or_else(|| fields.get("gen_ai.agent.id"))?;
    let runs = followed().lock().unwrap();
    runs.iter().find(|(run, _)| run == id).map(|(_, c)| c.clone())
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

/// Where a captured span's record lives: its capture and its index there.
struct Route {
    captured: Captured,
    index: usize,
}

/// The routing layer of the global subscriber (see the module docs).
struct RouteLayer;

impl RouteLayer {
    /// The capture of `span`, if it was captured.
    fn capture_of<S>(span: &SpanRef<'_, S>) -> Option<Captured>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let extensions = span.extensions();

        extensions.get::<Route>().map(|r| r.captured.clone())
    }
}

impl<S> Layer<S> for RouteLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = if let Some(p) = attrs.parent() {
            ctx.span(p)
        } else if attrs.is_contextual() {
            ctx.lookup_current()
        } else {
            None
        };
        let mut rec = SpanRecord {
            name: attrs.metadata().name().to_owned(),
            parent: parent.as_ref().map(|p| p.name().to_owned()),
            ..Default::default()
        };
        attrs.record(&mut Fields(&mut rec.fields));
        let from_parent = parent.as_ref().and_then(Self::capture_of);
        let Some(captured) = from_parent
            .or_else(|| capture_following(&rec.fields))
            .or_else(current_thread_capture)
        else {
            return;
        };
        let index = {
            let mut store = captured.lock();
            store.spans.push(rec);
            store.spans.len() - 1
        };
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(Route { captured, index });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let extensions = span.extensions();
        if let Some(route) = extensions.get::<Route>() {
            let mut store = route.captured.lock();
            values.record(&mut Fields(&mut store.spans[route.index].fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let parent = if let Some(p) = event.parent() {
            ctx.span(p)
        } else if event.is_contextual() {
            ctx.lookup_current()
        } else {
            None
        };
        let from_parent = parent.as_ref().and_then(Self::capture_of);
        let Some(captured) = from_parent
            .or_else(|| capture_following(&fields))
            .or_else(current_thread_capture)
        else {
            return;
        };
        captured.lock().events.push(EventRecord {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
}

/// Installs the routing subscriber as the global default, once per binary.
fn install() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(RouteLayer)).expect(
            "the capture's routing subscriber must be the global default: \
             nothing else in a test binary that uses `capture` may set one",
        );
    });
}

/// Uninstalls a capture from its thread (and its followed runs) when dropped.
/// Not `Send`: it belongs to the thread it was installed on.
pub struct CaptureGuard {
    captured: Captured,
    _not_send: PhantomData<*const ()>,
}

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.borrow_mut().retain(|x| !x.same(&self.captured)));
        if let Ok(mut runs) = followed().lock() {
            runs.retain(|(_, c)| !c.same(&self.captured));
        }
    }
}

/// Captures what the current thread emits (and what is emitted inside the
/// spans it captures, on any thread) until the guard drops. A
/// `#[tokio::test]` runs on one thread, its spawned tasks included.
pub fn capture() -> (Captured, CaptureGuard) {
    install();
    let captured = Captured::default();
    CURRENT.with(|c| c.borrow_mut().push(captured.clone()));
    let guard = CaptureGuard {
        captured: captured.clone(),
        _not_send: PhantomData,
    };
    (captured, guard)
}

/// The `logging` built-in's messages, in order, for a run of one tool call
/// between two model calls.
pub const LOGGING_ONE_TOOL_CALL: [&str; 8] = [
    "run started",
    "model request",
    "model response",
    "tool call",
    "tool result",
    "model request",
    "model response",
    "run ended",
];

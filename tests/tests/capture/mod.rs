//! A capturing `tracing` subscriber for the observability tests: every span
//! (with the fields recorded on it, at creation and later, and its parent)
//! and every event (level, target, fields), kept in memory.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
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
    ids: BTreeMap<u64, usize>,
    events: Vec<EventRecord>,
}

/// The captured spans and events.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Store>>);

impl Captured {
    pub fn spans(&self) -> Vec<SpanRecord> {
        self.0.lock().unwrap().spans.clone()
    }

    pub fn spans_named(&self, name: &str) -> Vec<SpanRecord> {
        self.spans().into_iter().filter(|s| s.name == name).collect()
    }

    pub fn events(&self) -> Vec<EventRecord> {
        self.0.lock().unwrap().events.clone()
    }
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

struct CaptureLayer(Captured);

impl<S> Layer<S> for CaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut rec = SpanRecord {
            name: attrs.metadata().name().to_owned(),
            ..Default::default()
        };
        attrs.record(&mut Fields(&mut rec.fields));
        let parent = if let Some(p) = attrs.parent() {
            ctx.span(p).map(|s| s.name().to_owned())
        } else if attrs.is_contextual() {
            ctx.lookup_current().map(|s| s.name().to_owned())
        } else {
            None
        };
        rec.parent = parent;
        let mut store = (self.0).0.lock().unwrap();
        let i = store.spans.len();
        store.spans.push(rec);
        store.ids.insert(id.into_u64(), i);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _ctx: Context<'_, S>) {
        let mut store = (self.0).0.lock().unwrap();
        if let Some(&i) = store.ids.get(&id.into_u64()) {
            values.record(&mut Fields(&mut store.spans[i].fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        (self.0).0.lock().unwrap().events.push(EventRecord {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
}

/// Installs a capturing subscriber for the current thread (a `#[tokio::test]`
/// runs on one thread) until the guard drops.
pub fn capture() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry().with(CaptureLayer(captured.clone()));
    let guard = tracing::subscriber::set_default(subscriber);
    (captured, guard)
}

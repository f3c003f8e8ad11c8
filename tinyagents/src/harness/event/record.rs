//! A recorded run: [`RunRecorder`] writes a run's events as JSON Lines,
//! [`RecordedRun::read`] reads them back, checked.
//!
//! # The format (version [`RECORD_VERSION`])
//!
//! The first line is a header, every other line one event with the time it
//! was recorded, in microseconds since the recorder was made:
//!
//! ```text
//! {"format":"tinyagents-run","version":1,"tinyagents":"0.1.0"}
//! {"t_us":12,"event":{"type":"run_started","run_id":"run-1","parent_run_id":null,"depth":0}}
//! {"t_us":85,"event":{"type":"middleware_started","run_id":"run-1","middleware":"pii","hook":"before_model"}}
//! ```
//!
//! `event` is an [`AgentEvent`] in the JSON shape `docs/events.md` documents.
//! The version counts changes of this envelope; an event gaining a field
//! keeps it. A reader refuses a log of a newer version, an event kind it
//! does not know, and any line that is not what the format says, naming the
//! line.
//!
//! ```
//! use std::sync::Arc;
//! use tinyagents::harness::event::{AgentEvent, EventSink, EventKind, RecordedRun, RunRecorder};
//!
//! let recorder = RunRecorder::new(Vec::new()).unwrap();
//! recorder.emit(AgentEvent::RunStarted { run_id: Arc::from("run-1"), parent_run_id: None, depth: 0 });
//! let bytes = recorder.finish().unwrap();
//! let run = RecordedRun::read(bytes.as_slice()).unwrap();
//! assert_eq!(run.events.len(), 1);
//! assert_eq!(run.events[0].kind, EventKind::RunStarted);
//! assert_eq!(run.events[0].event["run_id"], "run-1");
//! ```

use std::io::{BufRead, Write};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

use super::{AgentEvent, EventKind, EventMask, EventSink};

/// The `format` member of a recorded run's header line.
pub const RECORD_FORMAT: &str = "tinyagents-run";

/// The version of the recorded-run format this build writes and the newest it reads.
pub const RECORD_VERSION: u32 = 1;

/// The longest line [`RecordedRun::read`] accepts, in bytes (a bound on what
/// one damaged line can make the reader hold).
pub const MAX_RECORD_LINE: usize = 16 * 1024 * 1024;

/// An [`EventSink`] that writes every event as one JSON line (the format of
/// this module), after a header line; the requests the model received
/// ([`AgentEvent::ModelRequest`]) included, unless
/// [`without_requests`](Self::without_requests).
///
/// A write error does not stop the run: the first one is kept and returned
/// by [`finish`](Self::finish), and nothing more is written after it.
pub struct RunRecorder<W: Write + Send> {
    inner: Mutex<Writer<W>>,
    start: Instant,
    mask: EventMask,
}

struct Writer<W: Write> {
    out: std::io::BufWriter<W>,
    error: Option<std::io::Error>,
}

impl<W: Write + Send> RunRecorder<W> {
    /// A recorder writing to `out`; the header line is written now.
    ///
    /// # Errors
    ///
    /// The error of writing the header.
    pub fn new(out: W) -> std::io::Result<Self> {
        let mut out = std::io::BufWriter::new(out);
        let header = serde_json::json!({
            "format": RECORD_FORMAT,
            "version": RECORD_VERSION,
            "tinyagents": env!("CARGO_PKG_VERSION"),
        });
        writeln!(out, "{header}")?;
        Ok(Self {
            inner: Mutex::new(Writer { out, error: None }),
            start: Instant::now(),
            mask: EventMask::ALL.with(EventKind::ModelRequest),
        })
    }

    /// The same recorder leaving out the requests the model received
    /// ([`AgentEvent::ModelRequest`], which a recorder writes by default:
    /// whoever records a run asked to see it). The log then holds the
    /// replies, tool arguments and results, but not the prompts.
    pub fn without_requests(mut self) -> Self {
        self.mask = EventMask::ALL;
        self
    }

    /// Flushes the log and hands back the writer.
    ///
    /// # Errors
    ///
    /// The first error met writing any line, or the error of flushing.
    pub fn finish(self) -> std::io::Result<W> {
        let inner = self
            .inner
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = inner.error {
            return Err(e);
        }
        inner.out.into_inner().map_err(std::io::IntoInnerError::into_error)
    }

    /// Flushes what was written so far (the log stays open).
    ///
    /// # Errors
    ///
    /// The first error met writing any line, or the error of flushing.
    pub fn flush(&self) -> std::io::Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(e) = &inner.error {
            return Err(std::io::Error::new(e.kind(), e.to_string()));
        }
        inner.out.flush()
    }
}

impl<W: Write + Send> EventSink for RunRecorder<W> {
    fn emit(&self, event: AgentEvent) {
        let t_us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        let line = serde_json::json!({ "t_us": t_us, "event": event });
        let mut inner = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if inner.error.is_none()
            && let Err(e) = writeln!(inner.out, "{line}")
        {
            inner.error = Some(e);
        }
    }

    fn interest(&self) -> EventMask {
        self.mask
    }
}

/// The header line of a recorded run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecordHeader {
    /// Always [`RECORD_FORMAT`].
    pub format: String,
    /// The format version (at most [`RECORD_VERSION`] for this build to read it).
    pub version: u32,
    /// The version of tinyagents that wrote it.
    pub tinyagents: String,
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RecordedEvent {
    /// When it was recorded, in microseconds since the recorder was made.
    pub t_us: u64,
    /// Its kind (checked against the kinds this build knows).
    #[serde(skip)]
    pub kind: EventKind,
    /// The event, in the JSON shape of `docs/events.md` (an object whose `type` names `kind`).
    pub event: Value,
}

/// A recorded run, read back.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RecordedRun {
    /// Its header.
    pub header: RecordHeader,
    /// Its events, in the order they were recorded.
    pub events: Vec<RecordedEvent>,
}

/// Why a recorded run could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// Reading failed.
    #[error("cannot read the recorded run: {0}")]
    Io(#[from] std::io::Error),
    /// A line is not what the format says.
    #[error("line {line} of the recorded run: {problem}")]
    Line {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it and what to do.
        problem: String,
    },
}

impl RecordedRun {
    /// Reads a recorded run, checking every line: the header's format and
    /// version, then that each line is `{"t_us": N, "event": {"type": KIND, …}}`
    /// with a kind this build knows. An empty line is skipped; a line longer
    /// than [`MAX_RECORD_LINE`] is refused.
    ///
    /// # Errors
    ///
    /// [`RecordError::Line`] naming the first line that is wrong (a damaged
    /// log, or one written by a newer tinyagents), or [`RecordError::Io`].
    pub fn read(mut input: impl BufRead) -> Result<Self, RecordError> {
        let mut header = None;
        let mut events = Vec::new();
        let mut buf = Vec::new();
        let mut line = 0usize;
        loop {
            buf.clear();
            let n = std::io::Read::take(&mut input, MAX_RECORD_LINE as u64 + 1).read_until(b'\n', &mut buf)?;
            if n == 0 {
                break;
            }
            line += 1;
            let bad = |problem: String| RecordError::Line { line, problem };
            if buf.len() > MAX_RECORD_LINE {
                return Err(bad(format!(
                    "longer than {MAX_RECORD_LINE} bytes, the most a line may hold: the log is damaged"
                )));
            }
            let text = std::str::from_utf8(&buf)
                .map_err(|e| bad(format!("not UTF-8 ({e}): the log is damaged")))?
                .trim();
            if text.is_empty() {
                continue;
            }
            let Some(header) = &header else {
                header = Some(parse_header(text).map_err(bad)?);
                continue;
            };
            events.push(parse_event(text, header).map_err(bad)?);
        }
        let header = header.ok_or(RecordError::Line {
            line: line.max(1),
            problem: format!(
                "the log is empty: a recorded run starts with a `{{\"format\": \"{RECORD_FORMAT}\", …}}` header line"
            ),
        })?;
        Ok(Self { header, events })
    }
}

fn parse_header(text: &str) -> Result<RecordHeader, String> {
    let not_a_log = || {
        format!(
            "not a recorded run's header: the first line must be `{{\"format\": \"{RECORD_FORMAT}\", \"version\": N, \
             \"tinyagents\": \"X.Y.Z\"}}` (write logs with `tinyagents run --record` or `RunRecorder`)"
        )
    };
    let header: RecordHeader = serde_json::from_str(text).map_err(|_| not_a_log())?;
    if header.format != RECORD_FORMAT {
        return Err(not_a_log());
    }
    if header.version > RECORD_VERSION || header.version == 0 {
        return Err(format!(
            "the log is format version {}, written by tinyagents {}; this tinyagents ({}) reads format \
             versions up to {RECORD_VERSION}: read it with a tinyagents at least as new as the one that wrote it",
            header.version,
            header.tinyagents,
            env!("CARGO_PKG_VERSION")
        ));
    }
    Ok(header)
}

fn parse_event(text: &str, header: &RecordHeader) -> Result<RecordedEvent, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Line {
        t_us: u64,
        event: Value,
    }
    let Line { t_us, event } = serde_json::from_str(text)
        .map_err(|e| format!("not an event line `{{\"t_us\": N, \"event\": {{…}}}}` ({e}): the log is damaged"))?;
    let Some(tag) = event.as_object().and_then(|o| o.get("type")) else {
        return Err("the event is not an object with a `type` member: the log is damaged".to_owned());
    };
    let kind = serde_json::from_value::<EventKind>(tag.clone()).map_err(|_| {
        let ours = env!("CARGO_PKG_VERSION");
        if header.tinyagents == ours {
            format!("unknown event type {tag}, not a kind tinyagents {ours} emits: the log is damaged")
        } else {
            format!(
                "unknown event type {tag}: the log was written by tinyagents {}, this is {ours}; read it with \
                 the version that wrote it or a newer one",
                header.tinyagents
            )
        }
    })?;
    Ok(RecordedEvent { t_us, kind, event })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const HEADER: &str = r#"{"format":"tinyagents-run","version":1,"tinyagents":"0.1.0"}"#;

    #[test]
    fn a_recorder_asks_for_the_requests_unless_told_not_to() {
        let recorder = RunRecorder::new(Vec::new()).unwrap();
        assert!(recorder.interest().contains(EventKind::ModelRequest));
        assert!(recorder.interest().contains(EventKind::ModelDelta));
        let recorder = recorder.without_requests();
        assert!(!recorder.interest().contains(EventKind::ModelRequest));
        assert_eq!(recorder.interest(), EventMask::ALL);
    }

    fn line_error(text: &str) -> (usize, String) {
        match RecordedRun::read(text.as_bytes()) {
            Err(RecordError::Line { line, problem }) => (line, problem),
            other => panic!("expected a line error, got {other:?}"),
        }
    }

    #[test]
    fn a_recorded_run_reads_back_with_its_times_in_order() {
        let recorder = RunRecorder::new(Vec::new()).unwrap();
        recorder.emit(AgentEvent::RunStarted {
            run_id: Arc::from("r"),
            parent_run_id: None,
            depth: 0,
        });
        recorder.emit(AgentEvent::RunCompleted {
            run_id: Arc::from("r"),
            error: None,
        });
        let bytes = recorder.finish().unwrap();
        let run = RecordedRun::read(bytes.as_slice()).unwrap();
        assert_eq!(run.header.version, RECORD_VERSION);
        assert_eq!(run.header.tinyagents, env!("CARGO_PKG_VERSION"));
        let kinds: Vec<_> = run.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventKind::RunStarted, EventKind::RunCompleted]);
        assert!(run.events[0].t_us <= run.events[1].t_us);
        assert_eq!(
            run.events[1].event,
            serde_json::json!({"type": "run_completed", "run_id": "r", "error": null})
        );
    }

    #[test]
    fn a_damaged_or_newer_log_is_refused_naming_the_line() {
        let (line, problem) = line_error("");
        assert_eq!(line, 1);
        assert!(problem.contains("empty"), "{problem}");

        let (line, problem) = line_error("{\"type\":\"run_started\"}\n");
        assert_eq!(line, 1);
        assert!(problem.contains("not a recorded run's header"), "{problem}");

        let newer = r#"{"format":"tinyagents-run","version":2,"tinyagents":"9.0.0"}"#;
        let (line, problem) = line_error(newer);
        assert_eq!(line, 1);
        assert!(
            problem.contains("format version 2, written by tinyagents 9.0.0"),
            "{problem}"
        );

        let cut =
            format!("{HEADER}\n{{\"t_us\":1,\"event\":{{\"type\":\"notice\",\"source\":\"x\"}}}}\n{{\"t_us\":2,\"ev");
        let (line, problem) = line_error(&cut);
        assert_eq!(line, 3);
        assert!(problem.contains("the log is damaged"), "{problem}");

        let unknown = format!("{HEADER}\n\n{{\"t_us\":1,\"event\":{{\"type\":\"teleported\"}}}}\n");
        let (line, problem) = line_error(&unknown);
        assert_eq!(line, 3, "empty lines are counted");
        assert!(problem.contains("unknown event type \"teleported\""), "{problem}");
        let ours = HEADER.replace("0.1.0", env!("CARGO_PKG_VERSION"));
        let (_, problem) = line_error(&unknown.replace(HEADER, &ours));
        assert!(problem.contains("the log is damaged"), "{problem}");
        let (_, problem) = line_error(&unknown.replace(HEADER, &HEADER.replace("0.1.0", "9.9.9")));
        assert!(problem.contains("written by tinyagents 9.9.9"), "{problem}");

        let no_type = format!("{HEADER}\n{{\"t_us\":1,\"event\":[1]}}\n");
        assert_eq!(line_error(&no_type).0, 2);

        let extra = format!("{HEADER}\n{{\"t_us\":1,\"event\":{{\"type\":\"notice\"}},\"x\":1}}\n");
        assert_eq!(line_error(&extra).0, 2, "an envelope member this version does not know");
    }

    #[test]
    fn a_line_longer_than_the_bound_is_refused_without_reading_it_all() {
        let mut text = format!("{HEADER}\n{{\"t_us\":1,\"event\":{{\"type\":\"notice\",\"message\":\"");
        text.push_str(&"a".repeat(MAX_RECORD_LINE));
        text.push_str("\"}}\n");
        let (line, problem) = line_error(&text);
        assert_eq!(line, 2);
        assert!(problem.contains("longer than"), "{problem}");
    }

    #[test]
    fn a_write_error_is_kept_and_reported_by_finish() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        // The header fits the buffer; the events overflow it and fail.
        let recorder = RunRecorder::new(Full).unwrap();
        for _ in 0..200 {
            recorder.emit(AgentEvent::Notice {
                source: "x".into(),
                message: "y".repeat(100),
                is_error: false,
            });
        }
        let err = recorder.finish().err().expect("the error is reported");
        assert_eq!(err.kind(), std::io::ErrorKind::StorageFull);
    }
}

//! `tinyagents view LOG -o PAGE` and `run --record LOG --html PAGE`: a run
//! recorded as JSON Lines (`tinyagents::harness::event::RunRecorder`) and
//! the self-contained HTML page that shows it.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use tinyagents::harness::event::{render_html, AgentEvent, EventMask, EventSink, RecordedRun, RunRecorder};

/// Where `run` keeps its events besides printing them.
#[derive(Debug, Clone, Default)]
pub struct Keep {
    /// `--record`: the JSON-lines log.
    pub record: Option<PathBuf>,
    /// `--html`: the viewer page.
    pub html: Option<PathBuf>,
}

impl Keep {
    /// Whether anything is kept.
    pub fn any(&self) -> bool {
        self.record.is_some() || self.html.is_some()
    }
}

/// The log's bytes: a file (`--record`) or memory (`--html` alone).
pub enum Target {
    File(File),
    Memory(Vec<u8>),
}

impl Write for Target {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::File(f) => f.write(buf),
            Self::Memory(v) => v.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::File(f) => f.flush(),
            Self::Memory(_) => Ok(()),
        }
    }
}

/// A sink sending each event the printer's sink wants to it, and every event the
/// recorder wants (the requests the model received included) to the recorder.
pub struct Tee {
    pub first: Arc<dyn EventSink>,
    pub recorder: Arc<RunRecorder<Target>>,
}

impl EventSink for Tee {
    fn emit(&self, event: AgentEvent) {
        if self.first.interest().contains(event.kind()) {
            self.first.emit(event.clone());
        }
        self.recorder.emit(event);
    }

    fn interest(&self) -> EventMask {
        // the recorder's: every kind, and the requests the model received
        self.recorder.interest()
    }
}

/// Opens the recorder `keep` asks for.
pub fn open(keep: &Keep) -> Result<RunRecorder<Target>, String> {
    let target = match &keep.record {
        Some(path) => Target::File(
            File::create(path).map_err(|e| format!("cannot create the run log `{}`: {e}", path.display()))?,
        ),
        None => Target::Memory(Vec::new()),
    };
    RunRecorder::new(target).map_err(|e| format!("cannot write the run log's header: {e}"))
}

/// Ends the recording: flushes the log, and writes the page when `--html` asked for one.
pub fn finish(keep: &Keep, recorder: RunRecorder<Target>) -> Result<(), String> {
    let target = recorder.finish().map_err(|e| match &keep.record {
        Some(p) => format!("cannot write the run log `{}`: {e}", p.display()),
        None => format!("cannot keep the run's events: {e}"),
    })?;
    let Some(html) = &keep.html else {
        return Ok(());
    };
    let (run, title) = match (target, &keep.record) {
        (Target::Memory(bytes), _) => (
            RecordedRun::read(bytes.as_slice()).map_err(|e| e.to_string())?,
            "tinyagents run".to_owned(),
        ),
        (Target::File(_), Some(path)) => (read(path)?, title_of(path)),
        (Target::File(_), None) => unreachable!("a file target comes from --record"),
    };
    write_page(&run, &title, html)
}

fn title_of(path: &Path) -> String {
    format!(
        "tinyagents run · {}",
        path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default()
    )
}

fn read(path: &Path) -> Result<RecordedRun, String> {
    let file = File::open(path).map_err(|e| format!("cannot open the run log `{}`: {e}", path.display()))?;
    RecordedRun::read(BufReader::new(file)).map_err(|e| format!("`{}`: {e}", path.display()))
}

fn write_page(run: &RecordedRun, title: &str, out: &Path) -> Result<(), String> {
    std::fs::write(out, render_html(run, title)).map_err(|e| format!("cannot write the page `{}`: {e}", out.display()))
}

/// `tinyagents view LOG [-o PAGE]`: the page for a recorded run (default:
/// the log's path with the extension `.html`).
pub fn view(log: &Path, out: Option<&Path>) -> ExitCode {
    let out = out.map_or_else(|| log.with_extension("html"), Path::to_path_buf);
    if out == log {
        eprintln!(
            "error: the page would overwrite the log `{}`: name another file with `-o`",
            log.display()
        );
        return ExitCode::FAILURE;
    }
    let result = read(log).and_then(|run| {
        write_page(&run, &title_of(log), &out)?;
        Ok(run.events.len())
    });
    match result {
        Ok(n) => {
            outln!("{}: {n} events → {}", log.display(), out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

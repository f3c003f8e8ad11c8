//! Readable event lines for `tinyagents run`, and the progress line.

use std::io::Write;
use std::time::Duration;

use tinyagents::harness::event::HookOutcome;
use tinyagents::harness::model::DeltaContent;
use tinyagents::prelude::*;

/// Renders events as they arrive: streamed text inline, one line per
/// model call, tool call, notice and control; hooks only when verbose.
#[derive(Debug)]
pub struct Renderer {
    verbose: bool,
    /// Whether streamed text is open on the current line.
    in_text: bool,
    /// Whether a progress line is showing on stderr.
    progress_shown: bool,
    steps: u32,
    model_calls: u32,
    tool_calls: u32,
    /// Tool calls started and not yet completed.
    started: std::collections::HashSet<String>,
}

impl Renderer {
    /// A renderer; `verbose` also shows every middleware hook.
    pub fn new(verbose: bool) -> Self {
        Self {
            verbose,
            in_text: false,
            progress_shown: false,
            steps: 0,
            model_calls: 0,
            tool_calls: 0,
            started: std::collections::HashSet::new(),
        }
    }

    fn clear_progress(&mut self) {
        if self.progress_shown {
            eprint!("\r\x1b[2K");
            self.progress_shown = false;
        }
    }

    fn line(&mut self, text: String) {
        self.clear_progress();
        if self.in_text {
            outln!();
            self.in_text = false;
        }
        outln!("{text}");
    }

    /// Renders one event.
    pub fn event(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::RunStarted { run_id, depth, .. } => {
                let indent = "  ".repeat(*depth as usize);
                self.line(format!(
                    "{indent}▶ run {run_id}{}",
                    if *depth > 0 { " (sub-agent)" } else { "" }
                ));
            }
            AgentEvent::RunCompleted { run_id, error } => match error {
                None => self.line(format!("■ run {run_id} completed")),
                Some(kind) => self.line(format!("■ run {run_id} failed ({kind})")),
            },
            AgentEvent::ModelCallStarted { step, model, .. } => {
                self.steps = self.steps.max(*step);
                self.model_calls += 1;
                self.line(format!("… model {model} (step {step})"));
            }
            AgentEvent::ModelDelta { delta, .. } => {
                if let DeltaContent::Text { text } = &delta.content {
                    self.clear_progress();
                    if !self.in_text {
                        out!("  ");
                        self.in_text = true;
                    }
                    out!("{text}");
                    let _ = std::io::stdout().flush();
                }
            }
            AgentEvent::ModelCallCompleted { error: Some(kind), .. } => {
                self.line(format!("  ✗ model call failed ({kind})"))
            }
            AgentEvent::ModelCallCompleted { usage_reported, .. } => {
                if self.in_text {
                    outln!();
                    self.in_text = false;
                }
                if !usage_reported {
                    self.line("  ℹ usage: not reported by the model".to_owned());
                }
            }
            AgentEvent::ToolCallStarted { tool, call_id, .. } => {
                self.tool_calls += 1;
                self.started.insert(call_id.clone());
                self.line(format!("  ⚙ {tool} ({call_id})"));
            }
            AgentEvent::ToolCallRefused { tool, call_id, .. } => {
                self.line(format!("  ✗ {tool} ({call_id}) refused before it ran"));
            }
            AgentEvent::ToolCallCompleted {
                tool,
                is_error,
                call_id,
                ..
            } => {
                if self.started.remove(call_id.as_str()) {
                    self.line(format!("  {} {tool}", if *is_error { "✗" } else { "✓" }));
                } else {
                    self.line(format!("  ✗ {tool} ({call_id}) refused before it ran"));
                }
            }
            AgentEvent::Notice {
                source,
                message,
                is_error,
            } => self.line(format!("  {} {source}: {message}", if *is_error { "⚠" } else { "ℹ" })),
            AgentEvent::MiddlewareStarted { middleware, hook, .. } if self.verbose => {
                self.line(format!("    · {middleware}.{hook}"))
            }
            AgentEvent::MiddlewareCompleted {
                middleware,
                hook,
                outcome,
                ..
            } => match outcome {
                HookOutcome::Ok if !self.verbose => {}
                HookOutcome::Ok => self.line(format!("    · {middleware}.{hook} ok")),
                HookOutcome::Error(kind) => self.line(format!("  ✗ {middleware}.{hook}: {kind}")),
                HookOutcome::Panicked => self.line(format!("  ✗ {middleware}.{hook} panicked")),
                HookOutcome::Cancelled => self.line(format!("  ✗ {middleware}.{hook} cancelled")),
                _ => self.line(format!("  ✗ {middleware}.{hook} {outcome:?}")),
            },
            AgentEvent::MiddlewareStarted { .. } => {}
            other => {
                if let Some(line) = tinyagents::testing::trace_line(other) {
                    self.line(format!("  {line}"));
                }
            }
        }
    }

    /// Shows (or refreshes) the progress line on stderr.
    pub fn progress(&mut self, elapsed: Duration) {
        if self.in_text {
            return;
        }
        eprint!(
            "\r\x1b[2K  [{:.1}s · step {} · {} model call{} · {} tool call{}]",
            elapsed.as_secs_f64(),
            self.steps,
            self.model_calls,
            if self.model_calls == 1 { "" } else { "s" },
            self.tool_calls,
            if self.tool_calls == 1 { "" } else { "s" },
        );
        let _ = std::io::stderr().flush();
        self.progress_shown = true;
    }

    /// Ends the output (clears the progress line, closes open text).
    pub fn finish(&mut self) {
        self.clear_progress();
        if self.in_text {
            outln!();
            self.in_text = false;
        }
    }
}

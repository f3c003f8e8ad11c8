//! Testing kit: how to test your own middleware with fake models, tools and
//! event sinks, without a real provider.
//!
//! * [`ScriptedModel`] replays scripted replies as real delta streams.
//! * [`RecordingTool`] is a fake tool that records every call it gets.
//! * [`CollectingSink`] keeps every event; [`trace`] turns events into short
//!   readable lines to assert on.
//! * [`MiddlewareHarness`] runs one middleware's hooks in isolation (a stack
//!   of one, a context with a collecting sink) and hands back the edited value:
//!   one method per hook, generated from the hook table.
//! * [`Recorder`] is a middleware that keeps every value every hook passes it,
//!   in order, to assert on what a stack saw.
//! * [`Scenario`] is a whole run in one expression: scripted replies, tools,
//!   middleware and a collecting sink; it hands back the run, its events and
//!   the tools' calls.
//! * [`model_base`] and [`tool_base`] make the innermost call of a wrap onion
//!   from a closure, to test wrap middleware.
//! * [`check_transcript`] and [`assert_valid_transcript`] check a run's
//!   messages against the tool-call rules OpenAI and Anthropic enforce.
//!
//! ```
//! use tinyagents::prelude::*;
//! use tinyagents::testing::{trace, MiddlewareHarness};
//!
//! struct Upper;
//! #[async_trait::async_trait]
//! impl Middleware<()> for Upper {
//!     fn hooks(&self) -> HookSet { HookSet::AFTER_MODEL }
//!     async fn after_model(&self, _: &mut RunContext, _: &(), r: &mut ModelResponse) -> Result<()> {
//!         let t = r.message.text().to_uppercase();
//!         r.message.set_text(t);
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut h = MiddlewareHarness::new(Upper);
//! let response = h.after_model(ModelResponse::text("hi")).await.unwrap();
//! assert_eq!(response.message.text(), "HI");
//! assert_eq!(trace(&h.events()), ["started Upper.after_model", "completed Upper.after_model ok"]);
//! # });
//! ```

mod bases;
mod harness;
mod recorder;
mod recording_tool;
mod scenario;
mod trace;
mod transcript;

pub use crate::harness::event::CollectingSink;
pub use crate::harness::model::{ScriptedModel, ScriptedTurn};

pub use bases::{model_base, tool_base, FnModelBase, FnToolBase};
pub use harness::MiddlewareHarness;
pub use recorder::{Recorded, Recorder};
pub use recording_tool::RecordingTool;
pub use scenario::{Scenario, ScenarioRun};
pub use trace::{trace, trace_line};
pub use transcript::{assert_valid_transcript, check_transcript, TranscriptViolation};

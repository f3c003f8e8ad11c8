//! # tinyagents
//!
//! Agent middleware declared as plain annotated async functions, run in a
//! fast, observable, fail-safe stack.
//!
//! ```
//! use tinyagents::prelude::*;
//!
//! /// Adds today's date to the volatile tail of the system prompt.
//! #[before_model]
//! async fn add_date(request: &mut ModelRequest) -> Result<()> {
//!     request.set_volatile("date", "Today is Monday.");
//!     Ok(())
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let model = ScriptedModel::new([ScriptedTurn::text("Hi!")]);
//! let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(AddDate)?);
//! let run = agent.run(&mut RunContext::new(RunConfig::new("run-1"), ()), &(), "Hello").await?;
//! assert_eq!(run.final_text(), "Hi!");
//! # Ok::<(), TinyAgentsError>(()) }).unwrap();
//! ```
//!
//! Start at [`prelude`]; the module map follows the concepts:
//! [`harness::middleware`] (traits, stack, built-ins), [`harness::agent`]
//! (the loop), [`harness::model`], [`harness::tool`], [`harness::context`],
//! [`harness::event`], [`harness::error`], [`sandbox`] (commands run
//! confined by the OS, and the `ShellTool`), and [`testing`] for testing your
//! own middleware.
#![cfg_attr(docsrs, feature(doc_cfg))]

// The built-ins are written with the DSL, whose output names `::tinyagents::…`.
extern crate self as tinyagents;

pub mod config;
pub mod docs;
pub mod graph;
pub mod harness;
/// External command hooks: the `external_hooks` built-in (it lives with the
/// other built-ins, in `harness::middleware::library::external_hooks`).
pub use harness::middleware::library::external_hooks as hooks;
pub mod patch;
pub mod prelude;
pub mod protected;
#[cfg(unix)]
#[cfg_attr(docsrs, doc(cfg(unix)))]
pub mod sandbox;
pub mod store;
pub mod testing;

#[doc(hidden)]
pub mod __private;

/// The built-in middleware and the documentation catalog: the one path to
/// every built-in. Each is a `…Middleware` type built from its `…Config`,
/// whose `type` is the built-in's catalog and stack name; the names the seed
/// documents use are here too (`ContextCompressionMiddleware`,
/// `SummarizationPolicy`, `SummaryRecord`, `summarization::trim_messages`),
/// mapped in `docs/middleware.md`.
pub mod middleware {
    pub use crate::harness::middleware::library::*;
}

#[cfg(feature = "macros")]
pub use tinyagents_macros::*;

pub use harness::error::{Result, TinyAgentsError};

/// The `schemars` tinyagents makes JSON Schemas with (typed tools, typed
/// structured output), built without its `derive` feature: to derive
/// `JsonSchema` for your argument and output types, depend on
/// `schemars = "1"` yourself (the same major, so the trait is this one).
pub use schemars;

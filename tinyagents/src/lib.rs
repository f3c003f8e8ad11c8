//! # tinyagents
//!
//! Agent middleware declared as plain annotated async functions, run in a
//! fast, observable, fail-safe stack.
//!
//! ## Use it in your crate
//!
//! The crates are not published on crates.io (the `tinyagents` crate there
//! is an unrelated project): depend on a checkout of this repository by path
//! (or by git, with the repository's URL). Tokio runs the agent
//! (`#[tokio::main]` needs its `macros` and `rt-multi-thread` features),
//! `serde_json` writes tool arguments, and `schemars` derives the JSON
//! Schemas of your own argument and output types:
//!
//! ```toml
//! [dependencies]
//! tinyagents = { path = "../tinyagents/tinyagents" }   # or { git = "…" }: this repository
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! serde_json = "1"
//! schemars = "1"
//! ```
//!
//! A complete program: a tool, a middleware, and an agent on the built-in
//! scripted model (for a real one, turn on the `providers` feature and build
//! the agent with `Agent::from_shared(model_from_env("openai:gpt-4o-mini")?)`,
//! `harness::model::providers::model_from_env`).
//!
//! ```
//! use tinyagents::prelude::*;
//!
//! /// Returns the weather in a city.
//! #[tool]
//! async fn get_weather(/** The city's name. */ city: String) -> Result<String> {
//!     Ok(format!("{city}: sunny"))
//! }
//!
//! /// Writes today's date into the volatile tail of the system prompt.
//! #[before_model]
//! fn add_date(request: &mut ModelRequest) -> Result<()> {
//!     request.set_volatile("date", "Today is Monday.");
//!     Ok(())
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<()> {
//!     let model = ScriptedModel::new(vec![
//!         ScriptedTurn::tool_calls(vec![ToolCall::new("call-1", "get_weather", serde_json::json!({"city": "Lyon"}))]),
//!         ScriptedTurn::text("It is sunny in Lyon."),
//!     ]);
//!     let agent: Agent<()> = Agent::new(model)
//!         .with_tools(ToolRegistry::new().with(GetWeather)?)
//!         .with_stack(MiddlewareStack::new().with(AddDate)?);
//!     let mut ctx = RunContext::new(RunConfig::new("demo"), ());
//!     let run = agent.run(&mut ctx, &(), "What is the weather in Lyon?").await?;
//!     println!("{}", run.final_text());
//!     Ok(())
//! }
//! ```
//!
//! ## Where to go next
//!
//! Start at [`prelude`]; the module map follows the concepts:
//! [`harness::middleware`] (traits, stack, built-ins), [`harness::agent`]
//! (the loop), [`harness::model`], [`harness::tool`], [`harness::context`],
//! [`harness::event`], [`harness::error`], [`sandbox`] (commands run
//! confined by the OS, and the `ShellTool`), [`config`] (agent files),
//! [`graph`] (state graphs, checkpoints, resuming), [`store`] (shared
//! state across processes), and [`testing`] for testing your own middleware.
//!
//! The guides are in the repository's `docs/` directory, next to this crate:
//!
//! | page | what it covers |
//! | --- | --- |
//! | `docs/middleware.md` | every built-in middleware, its options and hooks (generated from [`middleware::catalog`]) |
//! | `docs/agent-files.md` | agent files, external command hooks, the `tinyagents` command |
//! | `docs/events.md` | events as JSON, and the tracing spans |
//! | `docs/context.md` | the context and compression built-ins, and their order |
//! | `docs/security.md` | the shell/filesystem guard, the OS sandbox, hooks' bounds, PII |
//! | `docs/scale-out.md` | shared stores (Redis, PostgreSQL, SQLite) and many workers |
//! | `docs/protocols.md` | the protocols built-ins implement: pause and resume ([`harness::interrupt`]), approvals, child runs |
//! | `docs/common-mistakes.md` | the DSL's compile errors and their fixes |
//! | `docs/PERFORMANCE.md` | what each benchmark measures, the results, how to rerun |
//! | `docs/querymt.md` | coming from QueryMT: [`compat::querymt`], `Agent::single()`, [`presets`] |
#![cfg_attr(docsrs, feature(doc_cfg))]

// The built-ins are written with the DSL, whose output names `::tinyagents::…`.
extern crate self as tinyagents;

pub mod compat;
pub mod config;
pub mod docs;
pub mod graph;
pub mod harness;
// The built-in middleware: one public path, `tinyagents::middleware`.
pub(crate) mod library;
/// External command hooks: the `external_hooks` built-in and the command
/// protocol it speaks (it lives with the other built-ins; the hook table of
/// the stack is `harness::hooks`).
pub use library::external_hooks;
pub mod patch;
pub mod prelude;
pub mod presets;
pub mod single;
pub use tinyagents_sandbox::protected;
#[cfg(all(unix, feature = "commands"))]
#[cfg_attr(docsrs, doc(cfg(all(unix, feature = "commands"))))]
pub mod sandbox;
pub mod store;
pub mod testing;
pub mod tools;

#[doc(hidden)]
pub mod __private;

/// The built-in middleware and the documentation catalog: the one path to
/// every built-in. Each is a `…Middleware` type built from its `…Config`,
/// whose `type` is the built-in's catalog and stack name; the names the
/// design documents use are here too (`ContextCompressionMiddleware`,
/// `SummarizationPolicy`, `SummaryRecord`, `summarization::trim_messages`),
/// listed with every alias in `docs/names.md`.
pub mod middleware {
    pub use crate::library::*;
}

#[cfg(feature = "macros")]
pub use tinyagents_macros::*;

pub use harness::error::{Result, TinyAgentsError};

/// The `schemars` tinyagents makes JSON Schemas with (typed tools, typed
/// structured output), built without its `derive` feature: to derive
/// `JsonSchema` for your argument and output types, depend on
/// `schemars = "1"` yourself (the same major, so the trait is this one).
pub use schemars;

//! The `#[middleware]` and `#[tool]` DSL: what the macros accept and generate, their diagnostics, the generated docs page, sync hooks, typed tools and outputs.

mod config;
mod diagnostics;
mod docs;
mod hooks;
mod middleware;
mod run_state;
mod sync_dispatch;
mod typed_outputs;
mod typed_tools;

//! `Agent::single()`: one agent built from names (provider, workspace,
//! built-in tools, middleware, presets), and the presets.

mod builder;
mod presets;

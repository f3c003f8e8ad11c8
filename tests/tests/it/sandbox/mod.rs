//! The OS sandbox: ordinary commands still work, escapes are stopped, protected paths hold.

mod commands;
mod escapes;
mod protected;
mod protected_depth;
pub(crate) mod support;

//! The OS sandbox: ordinary commands still work, escapes are stopped, protected paths hold.

mod commands;
mod escapes;
mod protected;
pub(crate) mod support;

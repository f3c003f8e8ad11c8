//! The harness: every type a run is made of, the middleware traits and
//! stack, and the agent loop.

pub mod agent;
pub mod approvals;
pub mod cache;
pub mod child_run;
pub mod compression;
pub mod context;
pub mod control;
pub mod error;
pub mod event;
pub(crate) mod hooks;
pub mod interrupt;
pub(crate) mod locals;
pub mod message;
pub mod middleware;
pub mod model;
pub mod provenance;
pub mod run;
pub mod secrets;
pub(crate) mod shorten;
pub mod steering;
pub mod tokens;
pub mod tool;
pub mod workspace;

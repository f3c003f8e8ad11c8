//! The graph runtime: execution and the agent/graph boundary.

mod boundary;
mod execution;
mod steering_boundary;
mod steering_commands;

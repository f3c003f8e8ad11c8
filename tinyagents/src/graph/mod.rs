//! The graph boundary and a small state-graph runtime.
//!
//! * [`Command`] is what a node returns: `Continue`, `Goto(node)`, `End`,
//!   `Interrupt`, `Update(update)`, `Fork(branches)`; [`to_command`] maps
//!   the harness's native control outcomes onto commands, so middleware never
//!   needs to know which runtime it is in.
//! * [`StateGraph`] declares nodes over a context `G`, plain and conditional
//!   edges, per-field [`Reducer`]s and a step bound; [`CompiledGraph`] runs
//!   it, durably through a [`Checkpointer`] (a checkpoint before every node,
//!   at an interrupt and at the end) and resumes it after an interrupt or a
//!   crash.
//! * [`AgentGraph`] runs an [`Agent`](crate::harness::agent::Agent) as a
//!   graph of a `model` node and a `tools` node with the same middleware;
//!   [`AgentNode`] runs one as a single node of a larger graph, routed by
//!   [`GraphRoute`] requests (`Goto`, `Fork`) and steering's `Goto`.

mod agent;
mod agent_node;
mod builder;
pub(crate) mod checkpoint;
mod command;
mod node;
mod route;
mod run;
mod state;

pub use agent::AgentGraph;
pub use agent_node::{AgentNode, AGENT_MESSAGES};
pub use builder::{Router, StateGraph, END};
pub use checkpoint::{
    Checkpoint, Checkpointer, FileCheckpointer, InterruptRecord, MemoryCheckpointer, UpdateRecord,
    CHECKPOINT_FORMAT_VERSION, MAX_CHECKPOINT_SEQ,
};
pub use command::{to_command, BoundaryAction, Branch, Command, HarnessOutcome, MODEL_NODE, TOOLS_NODE};
pub use node::{node_fn, FnNode, Node};
pub use route::GraphRoute;
pub use run::{CompiledGraph, GraphOutcome, GraphRun};
pub use state::{update, GraphState, MergeFn, Reducer, Update};

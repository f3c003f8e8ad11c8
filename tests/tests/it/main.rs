//! The behaviour tests of tinyagents, through its public API only, in one
//! test binary: one link instead of one per file (the suite built in a
//! fraction of the time on two cores). Each folder is one concern (the DSL,
//! the stack, the loop, the built-ins, the guards, the sandbox, external
//! hooks, providers, stores, the graph, agent files), each file one built-in
//! or one part of the concern; `support` (transcript readers, a retry,
//! unique names) and `capture` serve every folder, and a folder's own
//! `support` (`external_hooks`, `sandbox`, `providers`) serves its files.
//!
//! Seven suites stay their own binaries because they need the whole process:
//! `alloc_idle_hooks`, `alloc_shared_history`, `alloc_turn` and
//! `hooks_isolation` install a counting global allocator (and the latter plants environment variables), `approval_restart`,
//! `checkpoint_crash` and `store_processes` re-execute themselves as child
//! processes.

mod capture;
mod support;

mod agent_loop;
mod builtins;
mod compat;
mod config;
mod dsl;
mod external_hooks;
mod graph;
mod guard;
mod providers;
mod sandbox;
mod single_agent;
mod stack;
mod stores;

//! The agent loop: turns, limits, the promises the docs make about a run, properties, steering, checkpoints and resume, token counting, argument limits, restrictions a child inherits, spend across a run tree, retries.

mod approvals_across_resumes;
mod argument_limits;
mod checkpoint_integrity;
mod checkpoint_resume;
mod documented_promises;
mod limits;
mod policy_inheritance;
mod promises;
mod properties;
mod retries_with_limits_and_approvals;
mod retry_builders;
mod spend_tree;
mod steering;
mod tokens_exact;
mod tool_aliases;
mod turns;

//! [`AgentConfig`]: what a [`MiddlewareFactory`](super::MiddlewareFactory)
//! knows of the agent it builds a driver for.

use std::path::PathBuf;

/// The agent a driver is built for: its provider, model, workspace and tools.
///
/// `Agent::single()` keeps the builder's values here
/// ([`SingleAgent::config`](crate::single::SingleAgent::config));
/// a stack built from a configuration (an agent file, a
/// [`MiddlewareRegistry`](crate::config::MiddlewareRegistry)) passes its
/// factories `AgentConfig::default()`, as the registry does not know the
/// agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// The provider's name (`anthropic`, `openai`, …), when one is set.
    pub provider: Option<String>,
    /// The model's name, when one is set.
    pub model: Option<String>,
    /// The workspace root every file tool, guard and sandbox works in.
    pub cwd: PathBuf,
    /// The names of the agent's built-in tools.
    pub tools: Vec<String>,
}

impl Default for AgentConfig {
    /// No provider, no tools, the current directory as the workspace.
    fn default() -> Self {
        Self {
            provider: None,
            model: None,
            cwd: PathBuf::from("."),
            tools: Vec::new(),
        }
    }
}

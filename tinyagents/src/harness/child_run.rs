//! What a parent run's middleware does around its child runs (sub-agents
//! run as tools, [`AgentTool`](crate::harness::agent::AgentTool)): the
//! protocol the sub-agent tool calls, whatever middleware the parent holds.
//!
//! A middleware installs a [`ChildRunHook`] in its run
//! ([`ChildRunHooks::install`], at
//! [`Locals::child_run_hooks`](crate::harness::context::Locals::child_run_hooks));
//! each child run of that run then asks it for a [resume](ChildRunHook::resume_child)
//! before it starts, gives it its [pause](ChildRunHook::carry_pause) when it
//! pauses, and its [usage](ChildRunHook::child_finished) when it finishes.
//! Restrictions a child inherits travel on their own, in
//! [`ParentRun::restrictions`](crate::harness::tool::ParentRun::restrictions).

use std::sync::{Arc, Mutex};

use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::interrupt::{Interrupt, Resume};
use crate::harness::locals::RunLocalsHandle;
use crate::harness::model::Usage;
use crate::harness::run::AgentInput;
use crate::harness::tool::ParentRun;

/// One child run, as the parent's hooks see it.
#[derive(Debug)]
pub struct ChildRun<'a> {
    /// The parent's call that runs the child.
    pub call_id: &'a str,
    /// The sub-agent tool's name.
    pub tool: &'a str,
    /// [`call_digest`](crate::harness::tool::call_digest) of the parent's call.
    pub digest: &'a str,
    /// The child run's id.
    pub run_id: &'a str,
    /// The child's model id.
    pub model: &'a str,
    /// The parent run.
    pub parent: &'a ParentRun,
    /// The child run's per-run state.
    pub locals: &'a RunLocalsHandle,
}

/// What a parent run's middleware does around its child runs. Every method
/// has a default that does nothing.
pub trait ChildRunHook: Send + Sync + 'static {
    /// Before the child starts: an answer to an earlier pause of this child
    /// (decided in the parent's resume), with the input the child starts
    /// from. An answer given for another call than this one is an error and
    /// the child does not run.
    fn resume_child(&self, child: &ChildRun<'_>) -> Result<Option<(AgentInput, Box<dyn Resume>)>> {
        let _ = child;
        Ok(None)
    }

    /// The child paused with `interrupt`: `Ok(error)`, the parent's own
    /// pause, when this hook carries the interrupt up into the parent's;
    /// `Err(interrupt)` gives it back for another hook.
    fn carry_pause(
        &self,
        child: &ChildRun<'_>,
        interrupt: Interrupt,
    ) -> std::result::Result<TinyAgentsError, Interrupt> {
        let _ = child;
        Err(interrupt)
    }

    /// The child finished, having used `usage` (its whole run tree's).
    fn child_finished(&self, child: &ChildRun<'_>, usage: Usage) -> Result<()> {
        let _ = (child, usage);
        Ok(())
    }
}

/// The child-run hooks installed in one run (a run-local value).
#[derive(Default)]
pub struct ChildRunHooks(Mutex<Vec<Arc<dyn ChildRunHook>>>);

impl std::fmt::Debug for ChildRunHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ChildRunHooks")
            .field(&self.0.lock().expect("child hooks lock").len())
            .finish()
    }
}

impl ChildRunHooks {
    /// Installs `hook` (once: the same `Arc` again is not repeated).
    pub fn install(&self, hook: Arc<dyn ChildRunHook>) {
        let mut hooks = self.0.lock().expect("child hooks lock");
        if !hooks.iter().any(|h| Arc::ptr_eq(h, &hook)) {
            hooks.push(hook);
        }
    }

    /// The hooks installed, in installation order.
    pub fn all(&self) -> Vec<Arc<dyn ChildRunHook>> {
        self.0.lock().expect("child hooks lock").clone()
    }
}

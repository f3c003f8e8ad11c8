//! The plans the shell guard admitted in a run, by call id: the guard
//! records each, the shell tool reads it back ([`admitted_plan`]), so the
//! model only ever supplies the command line.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value;

use super::ShellPlan;
use crate::harness::tool::ToolContext;

/// The most plans kept for a run (the oldest is dropped first): a tool reads
/// its plan right after the guard admitted the call.
const KEPT_PLANS: usize = 1024;

/// The plans the shell guard admitted in a run, by call id, each with the
/// digest of the arguments it judged (a run-local value: the model cannot
/// write it).
#[derive(Debug, Default)]
pub(crate) struct AdmittedPlans(Mutex<Kept>);

/// The plans by call id (with the digest of the judged arguments), and the
/// ids oldest first.
type Kept = (HashMap<String, (u64, ShellPlan)>, VecDeque<String>);

impl AdmittedPlans {
    /// Records `plan` as the one admitted for call `id` with `arguments`.
    pub(crate) fn record(&self, id: &str, arguments: &Value, plan: ShellPlan) {
        let mut g = self.0.lock().expect("admitted plans lock");
        let (map, order) = &mut *g;
        if map.insert(id.to_owned(), (digest(arguments), plan)).is_none() {
            order.push_back(id.to_owned());
            while order.len() > KEPT_PLANS {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
    }

    /// Whether the guard judged call `id` (with whatever arguments).
    pub(crate) fn judged(&self, id: &str) -> bool {
        self.0.lock().expect("admitted plans lock").0.contains_key(id)
    }

    /// The plan admitted for call `id`, if it was admitted with exactly `arguments`.
    pub(crate) fn get(&self, id: &str, arguments: &Value) -> Option<ShellPlan> {
        let g = self.0.lock().expect("admitted plans lock");
        match g.0.get(id) {
            Some((d, plan)) if *d == digest(arguments) => Some(plan.clone()),
            _ => None,
        }
    }
}

fn digest(arguments: &Value) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    arguments.to_string().hash(&mut h);
    h.finish()
}

/// The plan the shell guard admitted for the call `cx` runs, when the guard
/// judged exactly these `arguments` (a middleware that rewrote them after
/// the guard voids the plan: `None`). A shell tool of your own runs it with
/// [`Sandbox::run_plan`](super::Sandbox::run_plan) — or, without the
/// library's sandbox, by spawning each stage's [`argv`](super::PlanStage::argv)
/// itself, never by handing [`line`](ShellPlan::line) to a shell.
///
/// ```no_run
/// use async_trait::async_trait;
/// use serde_json::Value;
/// use tinyagents::harness::tool::{Tool, ToolContext, ToolOutput, ToolSchema};
/// use tinyagents::sandbox::{admitted_plan, Sandbox};
/// use tinyagents::{Result, TinyAgentsError};
///
/// struct MyShell {
///     schema: ToolSchema,
///     sandbox: Sandbox,
/// }
///
/// #[async_trait]
/// impl Tool for MyShell {
///     fn schema(&self) -> &ToolSchema {
///         &self.schema
///     }
///
///     async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
///         // Only what the guard checked runs: no plan, no run.
///         let Some(plan) = admitted_plan(&cx, &arguments) else {
///             return Err(TinyAgentsError::validation("no command admitted by shell_fs_guard for this call"));
///         };
///         let out = self.sandbox.run_plan(&plan).await?;
///         Ok(ToolOutput::from(out.render()))
///     }
/// }
/// ```
pub fn admitted_plan(cx: &ToolContext, arguments: &Value) -> Option<ShellPlan> {
    cx.parent()
        .locals
        .0
        .try_get::<AdmittedPlans>()?
        .get(cx.call_id(), arguments)
}

/// Whether the shell guard judged the call `cx` runs with arguments other
/// than `arguments` (something after the guard rewrote them): such a call
/// must not run, since what the guard checked is not what would run.
pub(crate) fn judged_otherwise(cx: &ToolContext, arguments: &Value) -> bool {
    let Some(plans) = cx.parent().locals.0.try_get::<AdmittedPlans>() else {
        return false;
    };
    plans.judged(cx.call_id()) && plans.get(cx.call_id(), arguments).is_none()
}

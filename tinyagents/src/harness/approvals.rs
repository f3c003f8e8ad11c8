//! The run's approvals ledger: which tool calls a person approved, as shown
//! and as they will run. A middleware that asks a person (`human_in_the_loop`,
//! or one of your own) grants approvals here; a policy that requires them
//! (`tool_policy`'s `approval_required`) and the agent loop's last check
//! before a tool runs read them. The runtime holds the ledger
//! ([`Approvals`], at [`Policy::approvals`](crate::harness::context::Policy::approvals));
//! the in-memory [`MemoryApprovals`] is the default, and a middleware may
//! [install](Approvals::install) another [`ApprovalLedger`].
//!
//! ```
//! use tinyagents::harness::context::{RunConfig, RunContext};
//! use tinyagents::harness::tool::{Approval, ToolCall};
//!
//! let ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
//! let shown = ToolCall::new("c1", "delete", serde_json::json!({"path": "a"}));
//! let edited = ToolCall::new("c1", "delete", serde_json::json!({"path": "b"}));
//! ctx.policy().approvals().ledger().grant("c1", &shown, &edited);
//! assert_eq!(ctx.policy().approvals().ledger().approval_of(&edited, true), Approval::Granted);
//! assert_eq!(ctx.policy().approvals().ledger().approval_of(&shown, true), Approval::Missing); // not as it runs
//! assert_eq!(ctx.policy().approvals().ledger().approval_of(&shown, false), Approval::Granted); // as shown
//! ```

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use crate::harness::tool::{call_digest, Approval, ToolCall};

/// Where a run's approvals live. An approval is bound to the digest of the
/// call shown and of the call as it runs (an edit), is good for the tool
/// batch it was given in, and runs its call once.
pub trait ApprovalLedger: Send + Sync + 'static {
    /// Records that a person approved call `call_id`: it was shown as
    /// `shown` (tool and arguments) and runs as `effective` (an edit).
    fn grant(&self, call_id: &str, shown: &ToolCall, effective: &ToolCall);

    /// Whether a person approved this exact call. `strict` accepts only the
    /// call as it will run; otherwise the call as shown is accepted too (a
    /// guard that runs before an edit is applied).
    fn approval_of(&self, call: &ToolCall, strict: bool) -> Approval;

    /// `Err(reason)` when `call` was approved and its tool or arguments
    /// changed since (they are not the call approved to run).
    fn check_unchanged(&self, call: &ToolCall) -> Result<(), String>;

    /// Records that the approved call `call_id` runs now: `Err(reason)`
    /// when it already ran under this approval (a retry inside the call).
    /// A call nobody approved is `Ok`.
    fn use_approval(&self, call_id: &str) -> Result<(), String>;

    /// Spends every approval granted so far: the batch they were given for has run.
    fn spend_all(&self);
}

/// The in-memory ledger, the default: call id → (digest of the call shown,
/// digest of the call to run), and the approved calls of the batch at hand
/// that already ran once.
#[derive(Debug, Default)]
pub struct MemoryApprovals {
    grants: Mutex<HashMap<String, (String, String)>>,
    used: Mutex<HashSet<String>>,
}

impl ApprovalLedger for MemoryApprovals {
    fn grant(&self, call_id: &str, shown: &ToolCall, effective: &ToolCall) {
        self.grants.lock().expect("grants lock").insert(
            call_id.to_owned(),
            (
                call_digest(&shown.name, &shown.arguments),
                call_digest(&effective.name, &effective.arguments),
            ),
        );
    }

    fn approval_of(&self, call: &ToolCall, strict: bool) -> Approval {
        let grants = self.grants.lock().expect("grants lock");
        match grants.get(&call.id) {
            Some((shown, effective)) => {
                let digest = call_digest(&call.name, &call.arguments);
                if digest == *effective || (!strict && digest == *shown) {
                    Approval::Granted
                } else {
                    Approval::Missing
                }
            }
            None => Approval::Missing,
        }
    }

    fn check_unchanged(&self, call: &ToolCall) -> Result<(), String> {
        let grants = self.grants.lock().expect("grants lock");
        match grants.get(&call.id) {
            Some((_, effective)) if call_digest(&call.name, &call.arguments) != *effective => Err(format!(
                "call `{}` to `{}` changed after a person approved it (its tool or arguments differ from the call \
                 approved)",
                call.id, call.name
            )),
            _ => Ok(()),
        }
    }

    fn use_approval(&self, call_id: &str) -> Result<(), String> {
        if !self.grants.lock().expect("grants lock").contains_key(call_id) {
            return Ok(());
        }
        if self.used.lock().expect("grants lock").insert(call_id.to_owned()) {
            Ok(())
        } else {
            Err(format!(
                "call `{call_id}` already ran under the approval a person gave it, and an approval runs its call \
                 once: a retry of it needs a new approval (keep approved tools out of `tool_retry`'s `tools`)"
            ))
        }
    }

    fn spend_all(&self) {
        self.grants.lock().expect("grants lock").clear();
        self.used.lock().expect("grants lock").clear();
    }
}

/// The run's ledger slot (a run-local value): the ledger a middleware
/// installed, or a [`MemoryApprovals`] made on first use.
#[derive(Default)]
pub struct Approvals(Mutex<Option<Arc<dyn ApprovalLedger>>>);

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let installed = self.0.lock().expect("approvals lock").is_some();
        f.debug_struct("Approvals").field("installed", &installed).finish()
    }
}

impl Approvals {
    /// Makes `ledger` the run's ledger. Install it before anything is
    /// granted (in `before_agent`): approvals granted in the ledger it
    /// replaces are not carried over.
    pub fn install(&self, ledger: Arc<dyn ApprovalLedger>) {
        *self.0.lock().expect("approvals lock") = Some(ledger);
    }

    /// The run's ledger.
    pub fn ledger(&self) -> Arc<dyn ApprovalLedger> {
        self.0
            .lock()
            .expect("approvals lock")
            .get_or_insert_with(|| Arc::new(MemoryApprovals::default()))
            .clone()
    }
}

//! The policy facet of a run context: restrictions, approvals and the
//! agent loop's last check of a tool call.

use super::*;

/// The run's restrictions and approvals, read-only, from [`RunContext::policy`].
///
/// ```
/// use tinyagents::harness::context::{RunConfig, RunContext};
/// use tinyagents::harness::tool::{Restriction, ToolCall, ToolLists};
///
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
/// let lists = ToolLists::new(None::<Vec<String>>, ["shell"]);
/// ctx.policy_mut().restrict("my_guard", Some(Restriction::Tools(lists)));
/// assert!(!ctx.policy().is_restricted()); // nothing inherited
/// assert!(!ctx.policy().restrictions().is_empty());
/// let call = ToolCall::new("c1", "search", serde_json::json!({}));
/// assert!(ctx.policy().check_call(&call, None).is_ok());
/// ```
pub struct Policy<'a, Ctx = ()> {
    pub(super) ctx: &'a RunContext<Ctx>,
}

impl<'a, Ctx> Policy<'a, Ctx> {
    /// The restrictions this run inherited from its parent.
    pub fn inherited_restrictions(self) -> &'a RunRestrictions {
        &self.ctx.config.inherited
    }

    /// Every restriction of the run: inherited, then its own guards'.
    pub fn restrictions(self) -> RunRestrictions {
        self.ctx.config.inherited.and(self.ctx.own.iter().cloned())
    }

    /// Whether the run inherited any restriction.
    #[inline]
    pub fn is_restricted(self) -> bool {
        !self.ctx.config.inherited.is_empty()
    }

    /// The run's approvals ledger ([`Approvals`](crate::harness::approvals::Approvals)):
    /// what a person approved, where a middleware that asks grants and a
    /// policy that requires approval reads.
    pub fn approvals(self) -> Arc<crate::harness::approvals::Approvals> {
        self.ctx.locals().local()
    }

    /// Records that a person approved call `call_id`: it was shown as
    /// `shown` (tool and arguments) and runs as `effective` (an edit). The
    /// same as `approvals().ledger().grant(…)`.
    pub fn grant_approval(self, call_id: &str, shown: &ToolCall, effective: &ToolCall) {
        self.approvals().ledger().grant(call_id, shown, effective);
    }

    /// Whether a person approved this exact call. `strict` accepts only the
    /// call as it will run (after an edit); otherwise the call as shown is
    /// accepted too (a guard that runs before the edit is applied).
    pub fn approval_of(self, call: &ToolCall, strict: bool) -> Approval {
        self.ctx
            .ledger()
            .map_or(Approval::Missing, |ledger| ledger.approval_of(call, strict))
    }

    /// Whether a person can be asked to approve calls to `tool` in this run
    /// (a middleware of this run recorded a [`Restriction::Approval`] gate on it).
    pub fn can_ask_approval(self, tool: &str) -> bool {
        self.ctx
            .own
            .iter()
            .any(|(_, r)| matches!(r, Restriction::Approval(tools) if tools.contains(tool)))
    }

    /// `Ok` when the restrictions the run inherited let the model be shown
    /// tool `name` (an approval it can ask for counts).
    pub fn exposes_inherited(self, name: &str, declared: Option<&ToolPolicy>) -> bool {
        let approval = if self.can_ask_approval(name) {
            Approval::Obtainable
        } else {
            Approval::Missing
        };
        self.ctx
            .config
            .inherited
            .check(name, declared, self.ctx.workspace(), approval)
            .is_ok()
    }

    /// `Err(reason)` when `call` may not run as it is now: the agent loop's
    /// own check, the last before the tool runs. A call a person approved
    /// must be exactly the call approved (or the person's edit of it); a
    /// tool whose policy requires approval (this run's `tool_policy`) needs
    /// that approval of this exact call; and the restrictions the run
    /// inherited must all admit it.
    pub fn check_call(self, call: &ToolCall, declared: Option<&ToolPolicy>) -> std::result::Result<(), String> {
        if let Some(ledger) = self.ctx.ledger() {
            ledger.check_unchanged(call)?;
        }
        for (by, r) in &self.ctx.own {
            if matches!(r, Restriction::Policy(_))
                && RunRestrictions::new()
                    .with(by.clone(), r.clone())
                    .needs_approval(&call.name, declared)
                && self.approval_of(call, true) != Approval::Granted
            {
                return Err(format!(
                    "tool `{}` requires approval and no person approved this exact call (restriction of `{by}`)",
                    call.name
                ));
            }
        }
        if self.ctx.config.inherited.is_empty() {
            return Ok(());
        }
        let approval = if self.ctx.config.inherited.needs_approval(&call.name, declared) {
            self.approval_of(call, true)
        } else {
            Approval::Missing
        };
        let plan = self
            .ctx
            .config
            .inherited
            .check_call_planned(call, declared, self.ctx.workspace(), approval)
            .map_err(|reason| format!("{reason}; it is inherited from the parent run, and a sub-agent can only narrow its parent's restrictions"))?;
        // The plan an inherited shell guard admitted is what the shell tool
        // runs (the child's own stack may hold no such guard).
        #[cfg(all(unix, feature = "commands"))]
        if let Some(plan) = plan {
            self.ctx
                .locals()
                .local::<crate::sandbox::AdmittedPlans>()
                .record(&call.id, &call.arguments, plan);
        }
        #[cfg(not(all(unix, feature = "commands")))]
        let _ = plan;
        Ok(())
    }

    /// `Err(reason)` when a guard the run inherited that asks something
    /// outside the process ([`Restriction::AsyncGuard`]: a parent's external
    /// `pre_tool_use` hooks) refuses `call`: the agent loop awaits this after
    /// [`check_call`](Policy::check_call), the last thing before a tool runs. A
    /// guard the run also holds itself (a sub-agent sharing its parent's
    /// stack) already judged the call in `before_tool` and is not asked twice.
    pub async fn check_call_async(self, call: &ToolCall) -> std::result::Result<(), String> {
        if self.ctx.config.inherited.is_empty() {
            return Ok(());
        }
        let run = crate::harness::tool::GuardedRun {
            run_id: &self.ctx.config.run_id,
            depth: self.ctx.config.depth,
            workspace: self.ctx.workspace.as_ref(),
            batch: self.ctx.batch,
        };
        let own = |r: &Restriction| self.ctx.own.iter().any(|(_, mine)| mine == r);
        let mut asked: Vec<usize> = Vec::new();
        for (by, guard) in self.ctx.config.inherited.async_guards(own) {
            // a guard inherited through several levels is asked once
            if asked.contains(&guard.key()) {
                continue;
            }
            asked.push(guard.key());
            guard.check_call(call, &run).await.map_err(|reason| {
                format!(
                    "{reason} (restriction of `{by}`, inherited from the parent run: a sub-agent can only narrow \
                     its parent's restrictions)"
                )
            })?;
        }
        Ok(())
    }
}

/// Records a guard's restriction on the run, from [`RunContext::policy_mut`];
/// child runs inherit it.
///
/// ```
/// use tinyagents::harness::context::{RunConfig, RunContext};
/// use tinyagents::harness::tool::{Restriction, ToolLists};
///
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
/// let lists = ToolLists::new(None::<Vec<String>>, ["shell"]);
/// ctx.policy_mut().add_restriction("my_guard", Restriction::Tools(lists.clone()));
/// ctx.policy_mut().add_restriction("my_guard", Restriction::Tools(lists));
/// assert!(!ctx.policy().restrictions().is_empty());
/// ctx.policy_mut().restrict("my_guard", None);
/// assert!(ctx.policy().restrictions().is_empty());
/// ```
pub struct PolicyMut<'a, Ctx = ()> {
    pub(super) ctx: &'a mut RunContext<Ctx>,
}

impl<'a, Ctx> PolicyMut<'a, Ctx> {
    /// Records (`Some`) or clears (`None`) the restriction of guard `by` on
    /// this run. Child runs inherit it; it never loosens what was inherited.
    ///
    /// ```
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    /// use tinyagents::harness::tool::{Approval, Restriction};
    /// use tinyagents::harness::tool::ToolLists;
    ///
    /// let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    /// let lists = ToolLists::new(None::<Vec<String>>, ["shell"]);
    /// ctx.policy_mut().restrict("my_guard", Some(Restriction::Tools(lists)));
    /// assert!(ctx.as_parent().restrictions.check("shell", None, None, Approval::Missing).is_err());
    /// ```
    pub fn restrict(&mut self, by: &str, restriction: Option<Restriction>) {
        self.ctx.own.retain(|(name, _)| &**name != by);
        if let Some(r) = restriction {
            self.ctx.own.push((Arc::from(by), r));
        }
    }

    /// Adds the restriction of guard `by` to this run (once: an equal one
    /// already recorded is not repeated). Child runs inherit it.
    pub fn add_restriction(&mut self, by: &str, restriction: Restriction) {
        if !self.ctx.own.iter().any(|(name, r)| &**name == by && *r == restriction) {
            self.ctx.own.push((Arc::from(by), restriction));
        }
    }
}

impl<Ctx> Clone for Policy<'_, Ctx> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Ctx> Copy for Policy<'_, Ctx> {}

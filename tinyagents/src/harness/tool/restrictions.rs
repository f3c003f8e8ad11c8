//! Restrictions that ride on a run and are inherited by every child run:
//! [`Restriction`], [`RunRestrictions`], the tool-policy rules they share
//! with `tool_policy` ([`PolicyRules`]), and the digest that binds a person's
//! approval to the exact call shown ([`call_digest`]).
//!
//! A guard (`tool_allowlist`, `tool_policy`, `agent_mode`,
//! `human_in_the_loop`) records its restriction on the run with
//! [`PolicyMut::restrict`](crate::harness::context::PolicyMut::restrict).
//! A child run started by a tool (a sub-agent, [`AgentTool`](crate::harness::agent::AgentTool))
//! inherits all of them, and the agent loop itself enforces the inherited
//! ones at exposure and at the innermost tool call, whatever the child's
//! own stack holds. Restrictions only add up: a child can narrow its
//! parent's, never widen them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{SandboxMode, SideEffects, ToolCall, ToolLists, ToolPolicy};
use crate::harness::workspace::WorkspaceDescriptor;

/// The side-effect names a policy may deny, and their flags.
pub(crate) const SIDE_EFFECT_NAMES: &[(&str, SideEffects)] = &[
    ("read", SideEffects::READ),
    ("write", SideEffects::WRITE),
    ("network", SideEffects::NETWORK),
    ("execute", SideEffects::EXECUTE),
    ("destructive", SideEffects::DESTRUCTIVE),
    ("payment", SideEffects::PAYMENT),
    ("external_communication", SideEffects::EXTERNAL_COMMUNICATION),
];

/// Whether a call has a person's approval, as far as a decision can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Approval {
    /// A person approved exactly this call (its tool and arguments).
    Granted,
    /// Nobody approved it yet, but a person can be asked in this run
    /// (exposure: the tool stays visible so the model can ask for it).
    Obtainable,
    /// No approval, and none can be asked for.
    Missing,
}

/// The rules of `tool_policy`: one decision for exposure and execution,
/// shared by the middleware and by the runtime for inherited restrictions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyRules {
    /// Refuse tools whose side effects were never declared.
    pub require_classification: bool,
    /// Refuse tools not marked background-safe.
    pub require_background_safe: bool,
    /// Refuse tools declaring any of these side effects.
    pub denied: SideEffects,
    /// Refuse a tool needing a sandbox unless the workspace is sandboxed.
    pub require_sandbox: bool,
    /// Tools declaring `approval_required` that may run without a per-call approval.
    pub approved: BTreeSet<String>,
    /// Declarations by tool name, added to what the tool itself declares.
    pub policies: BTreeMap<String, ToolPolicy>,
}

/// The stricter of two declarations of one tool: side effects add up, an
/// approval or a sandbox needed by either is needed, background safety and
/// read-only access need both.
fn stricter(a: &ToolPolicy, b: &ToolPolicy) -> ToolPolicy {
    let mut p = a.clone();
    p.classified = a.classified || b.classified;
    p.side_effects = a.side_effects | b.side_effects;
    p.background_safe = a.background_safe && b.background_safe;
    p.access.approval_required = a.access.approval_required || b.access.approval_required;
    p.access.read_only = a.access.read_only && b.access.read_only;
    p.runtime.sandbox = match (a.runtime.sandbox, b.runtime.sandbox) {
        (SandboxMode::Required, _) | (_, SandboxMode::Required) => SandboxMode::Required,
        (SandboxMode::Preferred, _) | (_, SandboxMode::Preferred) => SandboxMode::Preferred,
        _ => SandboxMode::Off,
    };
    p.runtime.max_result_bytes = match (a.runtime.max_result_bytes, b.runtime.max_result_bytes) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    p
}

impl PolicyRules {
    /// The policy of tool `name`: the rules' declaration by name combined
    /// (the stricter of each) with what the running registry declares.
    /// A tool nobody declared is unclassified.
    pub fn policy_of(&self, name: &str, declared: Option<&ToolPolicy>) -> ToolPolicy {
        match (self.policies.get(name), declared) {
            (Some(a), Some(b)) => stricter(a, b),
            (Some(one), None) | (None, Some(one)) => one.clone(),
            (None, None) => ToolPolicy::default(),
        }
    }

    /// `Err(reason)` when tool `name` may not run (or be shown) in a run
    /// with this workspace. `known` says whether anything declared the tool.
    pub fn decide(
        &self,
        name: &str,
        policy: &ToolPolicy,
        known: bool,
        workspace: Option<&WorkspaceDescriptor>,
        approval: Approval,
    ) -> Result<(), String> {
        if self.require_classification && !policy.classified {
            return Err(if known {
                format!("tool `{name}` is unclassified (it declares no side effects) and this policy requires classification")
            } else {
                format!("tool `{name}` is unknown to the policy (unclassified) and this policy requires classification")
            });
        }
        let hit = policy.side_effects & self.denied;
        if !hit.is_empty() {
            let names: Vec<&str> = SIDE_EFFECT_NAMES
                .iter()
                .filter(|(_, f)| hit.contains(*f))
                .map(|(n, _)| *n)
                .collect();
            return Err(format!(
                "tool `{name}` declares denied side effects: {}",
                names.join(", ")
            ));
        }
        if self.require_background_safe && !policy.background_safe {
            return Err(format!(
                "tool `{name}` is not marked background-safe and this policy requires it"
            ));
        }
        if self.require_sandbox && policy.runtime.sandbox == SandboxMode::Required {
            if workspace.map(|w| w.sandbox) != Some(SandboxMode::Required) {
                return Err(format!(
                    "tool `{name}` requires a sandbox but the run has no sandboxed workspace"
                ));
            }
            // The workspace says "sandboxed"; the kernel must be able to give it.
            #[cfg(all(unix, feature = "commands"))]
            let available = crate::sandbox::availability();
            // (without the runner, the kernel probed here, uncached)
            #[cfg(all(unix, not(feature = "commands")))]
            let available = tinyagents_sandbox::availability().check().map_err(|e| e.to_string());
            #[cfg(not(unix))]
            let available: std::result::Result<(), String> =
                Err("the sandbox (Landlock, seccomp) exists on Linux only".to_owned());
            if let Err(missing) = available {
                return Err(format!(
                    "tool `{name}` requires a sandbox but this machine cannot provide one: {missing}"
                ));
            }
        }
        if self.require_sandbox
            && workspace.map(|w| w.sandbox) == Some(SandboxMode::Required)
            && policy.side_effects.contains(SideEffects::EXECUTE)
            && policy.runtime.sandbox != SandboxMode::Required
        {
            return Err(format!(
                "tool `{name}` runs processes (execute) without declaring SandboxMode::Required, \
                 and the run's workspace requires a sandbox; run it through tinyagents::sandbox \
                 and declare the sandbox in its ToolRuntime"
            ));
        }
        if policy.access.approval_required
            && !self.approved.contains(name)
            && !matches!(approval, Approval::Granted | Approval::Obtainable)
        {
            return Err(format!(
                "tool `{name}` requires approval: it is not in the approved set and no person approved this call \
                 (gate it with `human_in_the_loop`, or list it in `approved`)"
            ));
        }
        Ok(())
    }
}

/// Whether a tool only reads, by its declaration.
pub(crate) fn declares_read_only(policy: &ToolPolicy) -> bool {
    policy.access.read_only || (policy.classified && SideEffects::READ.contains(policy.side_effects))
}

/// What a guard makes of an admitted shell call: the plan of what runs
/// (with the `commands` feature; without it, no guard makes one).
#[cfg(feature = "commands")]
pub(crate) type GuardPlan = tinyagents_commands::ShellPlan;
/// What a guard makes of an admitted shell call: nothing, in a build
/// without the `commands` feature.
#[cfg(not(feature = "commands"))]
pub(crate) type GuardPlan = std::convert::Infallible;

/// A guard that judges whole calls (tool and arguments), recorded on a run
/// as [`Restriction::Guard`] so that it holds in every child run too.
///
/// ```
/// use tinyagents::harness::tool::{Approval, CallGuard, Restriction, RunRestrictions, ToolCall};
/// use tinyagents::harness::workspace::WorkspaceDescriptor;
///
/// #[derive(Debug)]
/// struct NoRoot;
/// impl CallGuard for NoRoot {
///     fn check_call(&self, call: &ToolCall, _: Option<&WorkspaceDescriptor>) -> Result<(), String> {
///         match call.arguments["path"].as_str() {
///             Some("/") => Err("the root is off limits".into()),
///             _ => Ok(()),
///         }
///     }
/// }
/// let r = RunRestrictions::new().with("no_root", Restriction::Guard(std::sync::Arc::new(NoRoot)));
/// let call = ToolCall::new("1", "rm", serde_json::json!({"path": "/"}));
/// assert!(r.check_call(&call, None, None, Approval::Missing).is_err());
/// ```
pub trait CallGuard: Send + Sync + std::fmt::Debug {
    /// `Err(reason)` when `call` may not run in a run with this workspace.
    fn check_call(&self, call: &ToolCall, workspace: Option<&WorkspaceDescriptor>) -> Result<(), String>;

    /// [`check_call`](Self::check_call), and for an admitted shell call the
    /// plan of what runs, when the guard reads command lines into one (the
    /// shell guard does): the agent loop records it for the call, where the
    /// shell tool finds it ([`admitted_plan`](crate::sandbox::admitted_plan)).
    /// Default: no plan. (With the `commands` feature, which brings the plan.)
    #[cfg(feature = "commands")]
    fn plan_call(
        &self,
        call: &ToolCall,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> Result<Option<tinyagents_commands::ShellPlan>, String> {
        self.check_call(call, workspace).map(|()| None)
    }
}

/// A guard that judges whole calls by asking something outside the process
/// (an external `pre_tool_use` policy hook), recorded on a run as
/// [`Restriction::AsyncGuard`] so that it holds in every sub-agent run too:
/// the agent loop awaits it at a sub-agent's last check before a tool runs.
pub trait AsyncCallGuard: Send + Sync + std::fmt::Debug {
    /// `Err(reason)` when `call` may not run in the sub-agent run `run`.
    fn check_call<'a>(
        &'a self,
        call: &'a ToolCall,
        run: &'a GuardedRun<'a>,
    ) -> futures::future::BoxFuture<'a, Result<(), String>>;

    /// The guard's identity: two guards with the same key are one guard (a
    /// sub-agent whose own stack holds the same guard runs it once).
    fn key(&self) -> usize;
}

/// The sub-agent run an [`AsyncCallGuard`] judges a call in.
#[derive(Debug, Clone, Copy)]
pub struct GuardedRun<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// Its nesting depth.
    pub depth: u32,
    /// Its workspace, when it has one.
    pub workspace: Option<&'a WorkspaceDescriptor>,
    /// Which tool batch of the run the call belongs to: `(run_id, batch,
    /// call id)` names one call, whatever its retries (a retry inside the
    /// call is judged again, with the same three).
    pub batch: u64,
}

/// One guard's restriction of a run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Restriction {
    /// Only tools these lists permit (`tool_allowlist`).
    Tools(ToolLists),
    /// A tool policy's rules (`tool_policy`).
    Policy(Arc<PolicyRules>),
    /// Every call to one of these tools needs a person's approval of that
    /// exact call (`human_in_the_loop`'s gated tools).
    Approval(BTreeSet<String>),
    /// Read-only tools only (`agent_mode` in plan or review): a tool runs
    /// when it is listed here or declares read-only access.
    ReadOnly(BTreeSet<String>),
    /// A guard that judges each whole call (`shell_fs_guard`): enforced at
    /// the last check before a tool runs (it never hides a tool).
    Guard(Arc<dyn CallGuard>),
    /// A guard that asks something outside the process about each whole
    /// call (`external_hooks`' `pre_tool_use` hooks): enforced, awaited, at
    /// the last check before a sub-agent's tool runs.
    AsyncGuard(Arc<dyn AsyncCallGuard>),
}

impl PartialEq for Restriction {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Tools(a), Self::Tools(b)) => a == b,
            (Self::Policy(a), Self::Policy(b)) => a == b,
            (Self::Approval(a), Self::Approval(b)) | (Self::ReadOnly(a), Self::ReadOnly(b)) => a == b,
            (Self::Guard(a), Self::Guard(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
            (Self::AsyncGuard(a), Self::AsyncGuard(b)) => a.key() == b.key(),
            _ => false,
        }
    }
}

impl Eq for Restriction {}

impl Restriction {
    fn check(
        &self,
        name: &str,
        declared: Option<&ToolPolicy>,
        workspace: Option<&WorkspaceDescriptor>,
        approval: Approval,
    ) -> Result<(), String> {
        match self {
            Self::Tools(lists) => {
                if lists.permits(name) {
                    Ok(())
                } else if lists.deny().contains(name) {
                    Err(format!("tool `{name}` is denied"))
                } else {
                    Err(format!("tool `{name}` is not in the allow list"))
                }
            }
            Self::Policy(rules) => {
                let known = declared.is_some() || rules.policies.contains_key(name);
                let policy = rules.policy_of(name, declared);
                rules.decide(name, &policy, known, workspace, approval)
            }
            Self::Approval(tools) => match approval {
                Approval::Granted | Approval::Obtainable => Ok(()),
                Approval::Missing if !tools.contains(name) => Ok(()),
                Approval::Missing => Err(format!(
                    "every call to `{name}` needs a person's approval and this call has none \
                     (add `human_in_the_loop` gating `{name}` to the stack that runs it)"
                )),
            },
            // judged on the whole call (`RunRestrictions::check_call`)
            Self::Guard(_) | Self::AsyncGuard(_) => Ok(()),
            Self::ReadOnly(tools) => {
                if tools.contains(name) || declared.is_some_and(declares_read_only) {
                    Ok(())
                } else {
                    Err(format!(
                        "tool `{name}` is not read-only and the run is restricted to read-only tools"
                    ))
                }
            }
        }
    }

    /// Whether this restriction asks for a per-call approval of tool `name`.
    pub(crate) fn needs_approval(&self, name: &str, declared: Option<&ToolPolicy>) -> bool {
        match self {
            Self::Approval(tools) => tools.contains(name),
            Self::Policy(rules) => {
                !rules.approved.contains(name) && rules.policy_of(name, declared).access.approval_required
            }
            Self::Tools(_) | Self::ReadOnly(_) | Self::Guard(_) | Self::AsyncGuard(_) => false,
        }
    }
}

/// The restrictions of a run: every guard's, each named by who recorded it.
/// A tool may run only when every one of them admits it, so adding one can
/// only narrow.
///
/// ```
/// use tinyagents::harness::tool::{Approval, Restriction, RunRestrictions};
/// use tinyagents::harness::tool::ToolLists;
///
/// let parent = RunRestrictions::default()
///     .with("tool_allowlist", Restriction::Tools(ToolLists::new(Some(["read"]), Vec::<String>::new())));
/// // a child that tries to widen to `shell` is narrowed: both must admit
/// let child = parent.clone()
///     .with("tool_allowlist", Restriction::Tools(ToolLists::new(Some(["read", "shell"]), Vec::<String>::new())));
/// assert!(child.check("read", None, None, Approval::Missing).is_ok());
/// assert!(child.check("shell", None, None, Approval::Missing).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunRestrictions {
    by: Vec<(Arc<str>, Restriction)>,
}

impl RunRestrictions {
    /// No restriction.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same restrictions and one more.
    pub fn with(mut self, by: impl Into<Arc<str>>, restriction: Restriction) -> Self {
        self.by.push((by.into(), restriction));
        self
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.by.is_empty()
    }

    /// Every restriction and who recorded it.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Restriction)> {
        self.by.iter().map(|(by, r)| (&**by, r))
    }

    /// These restrictions followed by `more` (both apply).
    pub fn and(&self, more: impl IntoIterator<Item = (Arc<str>, Restriction)>) -> Self {
        let mut by = self.by.clone();
        by.extend(more);
        Self { by }
    }

    /// `Err(reason)` naming the guard and the rule when tool `name` may not
    /// run; `declared` is the policy the running registry has for it.
    pub fn check(
        &self,
        name: &str,
        declared: Option<&ToolPolicy>,
        workspace: Option<&WorkspaceDescriptor>,
        approval: Approval,
    ) -> Result<(), String> {
        for (by, r) in &self.by {
            r.check(name, declared, workspace, approval)
                .map_err(|reason| format!("{reason} (restriction of `{by}`)"))?;
        }
        Ok(())
    }

    /// [`check`](Self::check) of a whole call: the guards that judge
    /// arguments ([`Restriction::Guard`]) see it too.
    pub fn check_call(
        &self,
        call: &ToolCall,
        declared: Option<&ToolPolicy>,
        workspace: Option<&WorkspaceDescriptor>,
        approval: Approval,
    ) -> Result<(), String> {
        self.check_call_planned(call, declared, workspace, approval).map(drop)
    }

    /// [`check_call`](Self::check_call), also returning the plan the first
    /// guard that reads command lines made of an admitted shell call.
    pub(crate) fn check_call_planned(
        &self,
        call: &ToolCall,
        declared: Option<&ToolPolicy>,
        workspace: Option<&WorkspaceDescriptor>,
        approval: Approval,
    ) -> Result<Option<GuardPlan>, String> {
        self.check(&call.name, declared, workspace, approval)?;
        let mut plan = None;
        for (by, r) in &self.by {
            if let Restriction::Guard(guard) = r {
                #[cfg(feature = "commands")]
                let made = guard.plan_call(call, workspace);
                #[cfg(not(feature = "commands"))]
                let made = guard.check_call(call, workspace).map(|()| None);
                let made = made.map_err(|reason| format!("{reason} (restriction of `{by}`)"))?;
                plan = plan.or(made);
            }
        }
        Ok(plan)
    }

    /// The [`AsyncCallGuard`]s among the restrictions, in order, with the
    /// guard each came from, except those `skip` says the run holds itself.
    pub fn async_guards<'a>(
        &'a self,
        skip: impl Fn(&Restriction) -> bool + 'a,
    ) -> impl Iterator<Item = (&'a str, &'a Arc<dyn AsyncCallGuard>)> + 'a {
        self.by.iter().filter_map(move |(by, r)| match r {
            Restriction::AsyncGuard(g) if !skip(r) => Some((&**by, g)),
            _ => None,
        })
    }

    /// Whether any restriction asks a person to approve each call to `name`.
    pub fn needs_approval(&self, name: &str, declared: Option<&ToolPolicy>) -> bool {
        self.by.iter().any(|(_, r)| r.needs_approval(name, declared))
    }
}

/// Writes `value` as JSON with object keys sorted at every level and no
/// whitespace: one text for every way of writing the same arguments.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The digest a person's decision is bound to: SHA-256 (hex) of the tool
/// name and the canonical JSON of the arguments (keys sorted, no
/// whitespace). Any change to the tool or to any argument changes it;
/// reordering keys does not.
///
/// ```
/// use serde_json::json;
/// use tinyagents::harness::tool::call_digest;
///
/// let a = call_digest("delete", &json!({"path": "a.txt", "force": false}));
/// assert_eq!(a, call_digest("delete", &json!({"force": false, "path": "a.txt"})));
/// assert_ne!(a, call_digest("delete", &json!({"path": "b.txt", "force": false})));
/// assert_ne!(a, call_digest("remove", &json!({"path": "a.txt", "force": false})));
/// ```
pub fn call_digest(tool: &str, arguments: &Value) -> String {
    let mut text = String::new();
    canonical(arguments, &mut text);
    let mut hasher = Sha256::new();
    hasher.update((tool.len() as u64).to_be_bytes());
    hasher.update(tool.as_bytes());
    hasher.update(text.as_bytes());
    hasher.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

//! [`ToolPolicyMiddleware`]: enforces each tool's declared [`ToolPolicy`] at
//! exposure (`before_model`) and at execution (`before_tool`), through one
//! decision function.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::ModelRequest;
use crate::harness::tool::{
    Approval, PolicyRules, Restriction, SideEffects, ToolCall, ToolPolicy, ToolResult, SIDE_EFFECT_NAMES,
};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ToolPolicyMiddleware`] (`type = "tool_policy"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::ToolPolicyConfig;
///
/// let config: ToolPolicyConfig = from_toml_str("strict = true\ndeny_side_effects = [\"network\"]").unwrap();
/// let _policy = config.build();
/// let err = from_toml_str::<ToolPolicyConfig>("deny_side_effects = [\"teleport\"]").unwrap_err();
/// assert!(err.to_string().contains("deny_side_effects"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "tool_policy", builds = ToolPolicyMiddleware, validate = check_tool_policy)]
pub struct ToolPolicyConfig {
    /// Fail-closed baseline: unclassified and unknown tools are refused, destructive and payment tools denied.
    #[config(default = false)]
    pub strict: bool,
    /// Refuse tools whose side effects were never declared (unknown tools included).
    #[config(default = false)]
    pub require_classification: bool,
    /// Refuse tools not marked safe to run with no person watching.
    #[config(default = false)]
    pub require_background_safe: bool,
    /// Side effects to deny: `read`, `write`, `network`, `execute`, `destructive`, `payment`, `external_communication`.
    #[config(default = Vec::new())]
    pub deny_side_effects: Vec<String>,
    /// Refuse a tool needing a sandbox unless the run's workspace is sandboxed.
    #[config(default = true)]
    pub require_sandbox: bool,
    /// Tools declaring `approval_required` that are approved to run.
    #[config(default = Vec::new())]
    pub approved: Vec<String>,
    /// Truncate results larger than a tool's `max_result_bytes`, and flag them.
    #[config(default = true)]
    pub enforce_result_bytes: bool,
    /// Per-tool policies by name (normally the registry's `policies()` snapshot, given in code).
    #[config(default = BTreeMap::new())]
    pub policies: BTreeMap<String, ToolPolicy>,
}

fn check_tool_policy(c: &ToolPolicyConfig) -> std::result::Result<(), ConfigViolation> {
    for name in &c.deny_side_effects {
        if !SIDE_EFFECT_NAMES.iter().any(|(n, _)| n == name) {
            let known: Vec<&str> = SIDE_EFFECT_NAMES.iter().map(|(n, _)| *n).collect();
            return Err(ConfigViolation::new(
                "deny_side_effects",
                format!("each entry must be one of {}", known.join(", ")),
            )
            .with_value(name.clone()));
        }
    }
    Ok(())
}

impl From<ToolPolicyConfig> for ToolPolicyMiddleware {
    fn from(c: ToolPolicyConfig) -> Self {
        let policies: HashMap<String, ToolPolicy> = c.policies.into_iter().collect();
        let base = if c.strict {
            Self::strict(policies)
        } else {
            Self::new(policies)
        };
        let mask = c
            .deny_side_effects
            .iter()
            .filter_map(|n| SIDE_EFFECT_NAMES.iter().find(|(k, _)| k == n).map(|(_, f)| *f))
            .fold(SideEffects::empty(), |a, b| a | b);
        let mut m = base
            .require_background_safe(c.require_background_safe)
            .deny_side_effects(mask)
            .require_sandbox(c.require_sandbox)
            .require_approval(c.approved)
            .enforce_result_bytes(c.enforce_result_bytes);
        if c.require_classification {
            m = m.require_classification(true);
        }
        m
    }
}

/// Enforces the per-tool [`ToolPolicy`] metadata, at exposure and at execution.
///
/// Built from a registry snapshot ([`ToolRegistry::policies`](crate::harness::tool::ToolRegistry::policies)),
/// then narrowed with builders. Exposure (`before_model` hides a blocked tool)
/// and execution (`before_tool` refuses it with [`TinyAgentsError::Validation`])
/// share one decision ([`ToolPolicyMiddleware::decide`]), so a hidden tool can
/// never be run by another path. A tool that declares `approval_required` is
/// refused unless it is in the approved set or a person approved that exact
/// call through `human_in_the_loop` (one approval mechanism: the approval is
/// bound to the tool and arguments shown); it stays visible to the model only
/// when a `human_in_the_loop` of the run gates it.
///
/// Its rules are recorded on the run in `before_agent` and every sub-agent
/// run inherits them: the agent loop enforces them in the child whatever the
/// child's stack holds (denied side effects, classification, sandbox and
/// approval requirements included), so a child can only narrow.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use tinyagents::harness::middleware::MiddlewareStack;
/// use tinyagents::middleware::ToolPolicyMiddleware;
/// use tinyagents::harness::tool::{SandboxMode, ToolPolicy, ToolRuntime};
/// use tinyagents::harness::context::{RunConfig, RunContext};
/// use tinyagents::harness::workspace::WorkspaceDescriptor;
///
/// let mut policies = std::collections::HashMap::new();
/// policies.insert(
///     "shell".to_string(),
///     ToolPolicy::classified().with_runtime(ToolRuntime {
///         sandbox: SandboxMode::Required,
///         ..ToolRuntime::default()
///     }),
/// );
/// use tinyagents::harness::tool::ToolCall;
/// let call = || ToolCall::new("c1", "shell", serde_json::json!({}));
///
/// let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
/// stack.push(Arc::new(ToolPolicyMiddleware::new(policies).require_sandbox(true)));
///
/// // No workspace -> the sandboxed tool is blocked (fail closed).
/// let mut bare: RunContext = RunContext::new(RunConfig::new("no-sandbox"), ());
/// assert!(stack.run_before_tool(&mut bare, &(), &mut call()).await.is_err());
///
/// // A sandboxed workspace satisfies the requirement.
/// let mut ok: RunContext = RunContext::new(RunConfig::new("sandboxed"), ())
///     .with_workspace(WorkspaceDescriptor::new("/work").with_sandbox(SandboxMode::Required));
/// stack.run_before_tool(&mut ok, &(), &mut call()).await?; // admitted
/// # Ok::<(), tinyagents::TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ToolPolicyMiddleware {
    rules: Arc<PolicyRules>,
    enforce_result_bytes: bool,
}

impl ToolPolicyMiddleware {
    /// Enforces the declared policies: sandbox requirements and approval
    /// requirements are checked; nothing else is denied until a builder says so.
    pub fn new(policies: HashMap<String, ToolPolicy>) -> Self {
        Self {
            rules: Arc::new(PolicyRules {
                require_sandbox: true,
                policies: policies.into_iter().collect(),
                ..PolicyRules::default()
            }),
            enforce_result_bytes: true,
        }
    }

    /// Its rules (what a sub-agent run inherits).
    pub fn rules(&self) -> &PolicyRules {
        &self.rules
    }

    /// The fail-closed baseline: unclassified and unknown tools are refused,
    /// and tools declaring destructive or payment side effects are denied.
    pub fn strict(policies: HashMap<String, ToolPolicy>) -> Self {
        Self::new(policies)
            .require_classification(true)
            .deny_side_effects(SideEffects::DESTRUCTIVE | SideEffects::PAYMENT)
    }

    /// Refuse tools whose policy is unclassified (an unknown tool counts as unclassified).
    pub fn require_classification(mut self, on: bool) -> Self {
        Arc::make_mut(&mut self.rules).require_classification = on;
        self
    }

    /// Refuse tools not marked [`background_safe`](ToolPolicy::background_safe).
    pub fn require_background_safe(mut self, on: bool) -> Self {
        Arc::make_mut(&mut self.rules).require_background_safe = on;
        self
    }

    /// Deny any tool declaring a side effect in `mask` (adds to what is already denied).
    pub fn deny_side_effects(mut self, mask: SideEffects) -> Self {
        Arc::make_mut(&mut self.rules).denied |= mask;
        self
    }

    /// Block a tool whose runtime needs [`SandboxMode::Required`](crate::harness::tool::SandboxMode::Required) unless the
    /// run's workspace is sandboxed (`Required`) and this machine can give
    /// the sandbox (`tinyagents::sandbox::availability`: Landlock and seccomp);
    /// and, in a workspace that requires a sandbox, block a tool declaring
    /// `EXECUTE` that does not declare `Required` (it would run processes
    /// unconfined). On by default; turning it off lets such tools run anywhere.
    pub fn require_sandbox(mut self, on: bool) -> Self {
        Arc::make_mut(&mut self.rules).require_sandbox = on;
        self
    }

    /// The tools declaring `approval_required` that are approved to run; any
    /// other tool declaring it is refused.
    pub fn require_approval<I, N>(mut self, approved: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        Arc::make_mut(&mut self.rules).approved = approved.into_iter().map(Into::into).collect();
        self
    }

    /// In `after_tool`, truncate a result larger than the tool's
    /// `max_result_bytes` and flag it (its `error` names `max_result_bytes`).
    /// On by default (as in the config); `false` lets oversized results through whole.
    pub fn enforce_result_bytes(mut self, on: bool) -> Self {
        self.enforce_result_bytes = on;
        self
    }

    /// The one decision shared by exposure and execution: `Err(reason)` when
    /// the tool `name` may not run in a run with this workspace.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use tinyagents::middleware::ToolPolicyMiddleware;
    ///
    /// let strict = ToolPolicyMiddleware::strict(HashMap::new());
    /// assert!(strict.decide("anything", None).unwrap_err().contains("unclassified"));
    /// ```
    pub fn decide(
        &self,
        name: &str,
        workspace: Option<&crate::harness::workspace::WorkspaceDescriptor>,
    ) -> std::result::Result<(), String> {
        self.decide_with(name, workspace, Approval::Missing)
    }

    /// [`decide`](Self::decide) knowing whether a person approved the call
    /// ([`Approval::Granted`]) or can be asked to ([`Approval::Obtainable`]):
    /// a tool declaring `approval_required` runs with a person's approval of
    /// that exact call (from `human_in_the_loop`) as well as when it is in
    /// the approved set.
    pub fn decide_with(
        &self,
        name: &str,
        workspace: Option<&crate::harness::workspace::WorkspaceDescriptor>,
        approval: Approval,
    ) -> std::result::Result<(), String> {
        let policy = self.rules.policy_of(name, None);
        let known = self.rules.policies.contains_key(name);
        self.rules.decide(name, &policy, known, workspace, approval)
    }
}

/// Enforces each tool's declared policy (classification, side effects, background safety, sandbox, approval, result size) at exposure and at execution.
#[middleware(
    builtin,
    name = "tool_policy",
    config = ToolPolicyConfig,
    doc(
        mutation = "Records its rules as a run restriction that every sub-agent run inherits and the agent loop enforces there; removes blocked tools from `request.tools`; truncates an oversized tool result in place and sets its `error` (naming `max_result_bytes`).",
        events = "`ToolsFiltered { by: \"tool_policy\", excluded, remaining }` when it hides tools; refusals are `Validation` errors; the agent loop reports each refused call with `ToolCallRefused`, never `ToolCallStarted`.",
        failure = "Fails closed: one decision function for exposure, execution and inherited enforcement in sub-agent runs; `approval_required` is satisfied only by the approved set or a person's approval of that exact call (`human_in_the_loop`); a blocked call is refused with `TinyAgentsError::Validation` naming the tool and the rule (by default the call's error result); an unknown tool counts as unclassified.",
        streaming = "None: it acts on the request before the stream starts and on whole tool results.",
        cache = "Hiding tools changes the tool list, which providers put in the cached prefix; the set is stable across calls of one run, so the prefix stays stable.",
        retries = "Runs in `before_model` once per turn, outside the model onion, so retries and fallbacks see the filtered list; `before_tool` runs once per call, outside tool retries."
    )
)]
impl ToolPolicyMiddleware {
    #[before_agent]
    fn record<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        // The runtime carries the rules to every child run and enforces them there, whatever the child's stack holds.
        ctx.policy_mut()
            .add_restriction("tool_policy", Restriction::Policy(self.rules.clone()));
        Ok(())
    }

    #[before_model]
    fn expose<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let mut excluded = Vec::new();
        request.tools.retain(|t| {
            let approval = if ctx.policy().can_ask_approval(&t.name) {
                Approval::Obtainable
            } else {
                Approval::Missing
            };
            let keep = self.decide_with(&t.name, ctx.workspace(), approval).is_ok();
            if !keep {
                excluded.push(t.name.clone());
            }
            keep
        });
        if !excluded.is_empty() {
            ctx.events()
                .emit_with(EventKind::ToolsFiltered, || AgentEvent::ToolsFiltered {
                    by: "tool_policy".to_owned(),
                    excluded,
                    remaining: request.tools.iter().map(|t| t.name.clone()).collect(),
                });
        }
        Ok(())
    }

    #[before_tool]
    fn execute<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        self.decide_with(&call.name, ctx.workspace(), ctx.policy().approval_of(call, false))
            .map_err(|reason| TinyAgentsError::validation(format!("tool policy refused the call: {reason}")))
    }

    #[after_tool]
    fn limit_result(&self, result: &mut ToolResult) -> Result<()> {
        if !self.enforce_result_bytes {
            return Ok(());
        }
        let Some(max) = self
            .rules
            .policies
            .get(&result.name)
            .and_then(|p| p.runtime.max_result_bytes)
        else {
            return Ok(());
        };
        if result.content.len() > max {
            let original = result.content.len();
            let mut cut = max;
            while !result.content.is_char_boundary(cut) {
                cut -= 1;
            }
            result.content.truncate(cut);
            let note = format!(
                "result truncated from {original} to {cut} bytes: tool `{}` has max_result_bytes = {max}",
                result.name
            );
            result.error = Some(match result.error.take() {
                Some(prev) => format!("{prev}; {note}"),
                None => note,
            });
        }
        Ok(())
    }
}

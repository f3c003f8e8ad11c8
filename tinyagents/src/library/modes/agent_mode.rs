//! [`AgentModeMiddleware`]: build / plan / review modes with reminders,
//! switchable at run time, where plan and review restrict the run to
//! read-only tools at exposure and at execution.

use std::collections::{BTreeSet, HashMap};

use tinyagents_macros::{middleware, MiddlewareConfig};

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::ModelRequest;
use crate::harness::steering::{SteeringAction, SteeringCommand};
use crate::harness::tool::{SideEffects, ToolCall, ToolPolicy};

/// The run tag prefix that starts a run in a mode (`mode:plan`).
pub const MODE_TAG: &str = "mode:";
/// The state key the steering `SwitchMode` command records (`ctx.flow_mut().update_state("mode", …)`).
pub const MODE_KEY: &str = "mode";

/// The default plan-mode reminder.
pub const PLAN_REMINDER: &str =
    "<system-reminder>\nYou are in plan mode. Read-only access: investigate and propose a plan; do not change anything.\n</system-reminder>";
/// The default review-mode reminder.
pub const REVIEW_REMINDER: &str =
    "<system-reminder>\nYou are in review mode. Provide feedback only; do not change anything.\n</system-reminder>";

crate::config_enum! {
    /// An agent mode (its name in a config file, a run tag or the steering value).
    pub enum AgentMode {
        /// Every tool; no reminder.
        Build = "build",
        /// Read-only tools; the plan reminder.
        Plan = "plan",
        /// Read-only tools; the review reminder.
        Review = "review",
    }
}

impl AgentMode {
    /// The mode called `name` (`build`, `plan`, `review`), from a run tag or a steering value.
    pub fn parse(name: &str) -> Option<Self> {
        <Self as crate::config::ConfigEnum>::from_name(name)
    }

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        crate::config::ConfigEnum::name(self)
    }

    /// Whether the mode restricts the run to read-only tools.
    pub const fn read_only(self) -> bool {
        !matches!(self, Self::Build)
    }
}

/// Options of [`AgentModeMiddleware`] (`type = "agent_mode"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::AgentModeConfig;
///
/// let c: AgentModeConfig = from_toml_str("default = \"plan\"\nread_only_tools = [\"read_file\"]").unwrap();
/// assert_eq!(c.default, tinyagents::middleware::AgentMode::Plan);
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "agent_mode", builds = AgentModeMiddleware)]
pub struct AgentModeConfig {
    /// The mode a run starts in (unless a `mode:…` run tag says otherwise).
    #[config(default = "build")]
    pub default: AgentMode,
    /// The system reminder in plan mode.
    #[config(default = PLAN_REMINDER.to_owned())]
    pub reminder: String,
    /// The system reminder in review mode.
    #[config(default = REVIEW_REMINDER.to_owned())]
    pub review_reminder: String,
    /// Tools that only read (besides those whose policy says so).
    #[config(default = Vec::new())]
    pub read_only_tools: Vec<String>,
}

impl From<AgentModeConfig> for AgentModeMiddleware {
    fn from(c: AgentModeConfig) -> Self {
        Self {
            default: c.default,
            reminder: c.reminder,
            review_reminder: c.review_reminder,
            read_only: c.read_only_tools.into_iter().collect(),
            policies: HashMap::new(),
        }
    }
}

/// Build / plan / review modes (`agent_mode`).
///
/// The run's mode is the last valid `mode` state update (the steering
/// `SwitchMode` command records one), else a `mode:…` run tag, else the
/// default. Plan and review inject their reminder as the volatile system
/// segment `agent_mode` and restrict the run to read-only tools: the others
/// are hidden from the model and refused at execution. A tool is read-only
/// when listed in `read_only_tools`, or when its policy (see
/// [`AgentModeMiddleware::with_policies`]) declares `access.read_only` or is
/// classified with no side effect but reading; anything else, unknown tools
/// included, is not. A `SwitchMode` to an unknown mode is rejected.
///
/// ```
/// use tinyagents::middleware::{AgentMode, AgentModeMiddleware};
///
/// let modes = AgentModeMiddleware::new(AgentMode::Build).read_only_tools(["read_file", "grep"]);
/// assert!(modes.is_read_only("grep") && !modes.is_read_only("write_file"));
/// ```
#[derive(Debug, Clone)]
pub struct AgentModeMiddleware {
    default: AgentMode,
    reminder: String,
    review_reminder: String,
    read_only: BTreeSet<String>,
    policies: HashMap<String, ToolPolicy>,
}

impl AgentModeMiddleware {
    /// Modes starting in `default`, with the default reminders and no read-only tool known yet.
    pub fn new(default: AgentMode) -> Self {
        Self {
            default,
            reminder: PLAN_REMINDER.to_owned(),
            review_reminder: REVIEW_REMINDER.to_owned(),
            read_only: BTreeSet::new(),
            policies: HashMap::new(),
        }
    }

    /// The same middleware treating these tools as read-only.
    pub fn read_only_tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Self {
        self.read_only.extend(tools.into_iter().map(Into::into));
        self
    }

    /// The same middleware judging tools by their policies (a registry's `policies()` snapshot).
    pub fn with_policies(mut self, policies: HashMap<String, ToolPolicy>) -> Self {
        self.policies = policies;
        self
    }

    /// The same middleware with these reminders (plan, review).
    pub fn with_reminders(mut self, plan: impl Into<String>, review: impl Into<String>) -> Self {
        self.reminder = plan.into();
        self.review_reminder = review.into();
        self
    }

    /// Whether the tool `name` only reads.
    pub fn is_read_only(&self, name: &str) -> bool {
        self.read_only.contains(name)
            || self
                .policies
                .get(name)
                .is_some_and(|p| p.access.read_only || (p.classified && SideEffects::READ.contains(p.side_effects)))
    }

    /// Records the mode's restriction on the run (read-only tools only, in
    /// plan and review), so a sub-agent started now inherits it and the
    /// agent loop enforces it there whatever the child's stack holds.
    fn record<C>(&self, ctx: &mut RunContext<C>, mode: AgentMode) {
        let restriction = mode.read_only().then(|| {
            let mut tools = self.read_only.clone();
            tools.extend(
                self.policies
                    .iter()
                    .filter(|(_, p)| crate::harness::tool::declares_read_only(p))
                    .map(|(n, _)| n.clone()),
            );
            crate::harness::tool::Restriction::ReadOnly(tools)
        });
        ctx.policy_mut().restrict("agent_mode", restriction);
    }

    /// The mode of the run of `ctx`.
    pub fn mode<C>(&self, ctx: &RunContext<C>) -> AgentMode {
        let switched = ctx
            .flow()
            .state_updates()
            .iter()
            .rev()
            .filter(|u| u.key == MODE_KEY)
            .find_map(|u| u.value.as_str().and_then(AgentMode::parse));
        if let Some(m) = switched {
            return m;
        }
        // The strictest mode a tag asks for.
        ctx.tags()
            .iter()
            .filter_map(|t| t.strip_prefix(MODE_TAG).and_then(AgentMode::parse))
            .max_by_key(|m| match m {
                AgentMode::Build => 0,
                AgentMode::Plan => 1,
                AgentMode::Review => 2,
            })
            .unwrap_or(self.default)
    }
}

/// Build / plan / review modes with reminders, switchable at run time; plan and review restrict the run to read-only tools, at exposure and at execution.
#[middleware(
    builtin,
    name = "agent_mode",
    config = AgentModeConfig,
    doc(
        mutation = "Records the mode's read-only restriction on the run, which every sub-agent run started in that mode inherits and the agent loop enforces there. In plan and review: sets the volatile system segment `agent_mode` to the mode's reminder and removes tools that are not read-only from `request.tools`.",
        events = "`ToolsFiltered { by: \"agent_mode\", … }` when it hides tools; the mode switch itself is the steering `StateUpdated { key: \"mode\" }`.",
        failure = "Fails closed: in plan and review a call to a tool not known to be read-only (unknown tools included) is refused with `Validation` (by default the call's error result); a `SwitchMode` to an unknown mode is rejected with a reason.",
        streaming = "None.",
        cache = "The reminder is a volatile tail segment, so switching modes never changes the stable prefix; the tool list changes when the mode does (a cache miss at the switch, stable after).",
        retries = "Decided once per turn in `before_model` and once per call in `before_tool`, outside the onions: retries and fallbacks see the same mode."
    )
)]
impl AgentModeMiddleware {
    #[before_steering]
    fn check_switch(&self, command: &mut SteeringCommand) -> Result<()> {
        if let SteeringAction::SwitchMode { mode } = &command.action
            && AgentMode::parse(mode).is_none()
        {
            let reason = format!("`{mode}` is not a mode; the modes are build, plan, review");
            command.reject(reason);
        }
        Ok(())
    }

    #[before_model]
    fn apply<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let mode = self.mode(ctx);
        self.record(ctx, mode);
        if !mode.read_only() {
            return Ok(());
        }
        let reminder = match mode {
            AgentMode::Review => &self.review_reminder,
            _ => &self.reminder,
        };
        request.set_volatile("agent_mode", reminder.clone());
        let mut excluded = Vec::new();
        request.tools.retain(|t| {
            let keep = self.is_read_only(&t.name);
            if !keep {
                excluded.push(t.name.clone());
            }
            keep
        });
        if !excluded.is_empty() {
            ctx.events()
                .emit_with(EventKind::ToolsFiltered, || AgentEvent::ToolsFiltered {
                    by: "agent_mode".to_owned(),
                    excluded,
                    remaining: request.tools.iter().map(|t| t.name.clone()).collect(),
                });
        }
        Ok(())
    }

    #[before_tool]
    fn restrict<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        let mode = self.mode(ctx);
        self.record(ctx, mode);
        if mode.read_only() && !self.is_read_only(&call.name) {
            return Err(TinyAgentsError::validation(format!(
                "`{}` is not a read-only tool and the agent is in {} mode; switch to build mode to use it",
                call.name,
                mode.as_str()
            )));
        }
        Ok(())
    }
}

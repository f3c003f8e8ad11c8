//! [`ToolAllowlistMiddleware`]: refuses, at execution, every call to a tool
//! its lists do not permit, and carries its restrictions to sub-agent runs.

use tinyagents_macros::{middleware, MiddlewareConfig};

use super::ToolLists;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::ModelRequest;
use crate::harness::tool::{Restriction, ToolCall};

/// The run-tag prefix of an inherited allow list (a JSON array of names follows).
pub const ALLOW_TAG: &str = "tinyagents.tools.allow=";
/// The run-tag prefix of an inherited deny list (a JSON array of names follows).
pub const DENY_TAG: &str = "tinyagents.tools.deny=";

/// Options of [`ToolAllowlistMiddleware`] (`type = "tool_allowlist"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::ToolAllowlistConfig;
///
/// let c: ToolAllowlistConfig = from_toml_str("allow = [\"search\", \"read_file\"]").unwrap();
/// assert!(c.build().lists().permits("search"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "tool_allowlist", builds = ToolAllowlistMiddleware)]
pub struct ToolAllowlistConfig {
    /// When set, only these tools may run (and be shown).
    pub allow: Option<Vec<String>>,
    /// These tools may never run.
    #[config(default = Vec::new())]
    pub deny: Vec<String>,
}

impl From<ToolAllowlistConfig> for ToolAllowlistMiddleware {
    fn from(c: ToolAllowlistConfig) -> Self {
        Self::from_lists(c.allow, c.deny)
    }
}

/// Refuses every call to a tool its lists do not permit (execution time), and
/// hides those tools from the model with the same decision.
///
/// Its restrictions ride on the run: `before_agent` records them on the run
/// ([`PolicyMut::restrict`](crate::harness::context::PolicyMut::restrict))
/// and as run tags ([`ALLOW_TAG`], [`DENY_TAG`]). Every sub-agent run
/// ([`AgentTool`](crate::harness::agent::AgentTool)) inherits them, and the
/// agent loop enforces them in the child (hidden from its model, refused at
/// its tool calls) whatever the child's stack holds — also when it has no
/// allowlist at all. A `ToolAllowlistMiddleware` in the child narrows its own
/// lists by the inherited tags too, so a child can only narrow. A malformed
/// restriction tag denies everything (fail closed).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use tinyagents::middleware::ToolAllowlistMiddleware;
/// use tinyagents::prelude::*;
///
/// let stack: MiddlewareStack<()> = MiddlewareStack::new()
///     .with(ToolAllowlistMiddleware::from_lists(Some(["search"]), Vec::<String>::new()))
///     .unwrap();
/// let mut ctx = RunContext::new(RunConfig::new("r"), ());
/// let mut call = ToolCall::new("1", "shell", serde_json::json!({"cmd": "rm -rf /"}));
/// let err = stack.run_before_tool(&mut ctx, &(), &mut call).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Validation);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct ToolAllowlistMiddleware {
    lists: ToolLists,
}

impl ToolAllowlistMiddleware {
    /// Only `allow` (when `Some`) may run; `deny` never may.
    pub fn from_lists<A, D>(allow: Option<A>, deny: D) -> Self
    where
        A: IntoIterator,
        A::Item: Into<String>,
        D: IntoIterator,
        D::Item: Into<String>,
    {
        Self::from_tool_lists(ToolLists::new(allow, deny))
    }

    /// A child's lists composed under its parent's: it can only narrow.
    pub fn inheriting(parent: &ToolLists, child: &ToolLists) -> Self {
        Self::from_tool_lists(parent.narrowed(child))
    }

    /// From lists.
    pub fn from_tool_lists(lists: ToolLists) -> Self {
        Self { lists }
    }

    /// Its own lists (before narrowing by inherited run tags).
    pub fn lists(&self) -> &ToolLists {
        &self.lists
    }

    /// Its lists narrowed by every restriction recorded in the run's `tags`.
    ///
    /// ```
    /// use tinyagents::middleware::{ToolAllowlistMiddleware, DENY_TAG};
    ///
    /// let mw = ToolAllowlistMiddleware::from_lists(Some(["a", "b"]), Vec::<String>::new());
    /// let tags = vec![format!("{DENY_TAG}[\"b\"]")];
    /// let effective = mw.effective(&tags);
    /// assert!(effective.permits("a") && !effective.permits("b"));
    /// ```
    pub fn effective(&self, tags: &[String]) -> ToolLists {
        let mut lists = self.lists.clone();
        for tag in tags {
            let (allow, rest) = if let Some(rest) = tag.strip_prefix(ALLOW_TAG) {
                (true, rest)
            } else if let Some(rest) = tag.strip_prefix(DENY_TAG) {
                (false, rest)
            } else {
                continue;
            };
            let inherited = match serde_json::from_str::<Vec<String>>(rest) {
                Ok(names) if allow => ToolLists::new(Some(names), Vec::<String>::new()),
                Ok(names) => ToolLists::new(None::<Vec<String>>, names),
                // not understood: nothing is permitted
                Err(_) => ToolLists::new(Some(Vec::<String>::new()), Vec::<String>::new()),
            };
            lists = lists.narrowed(&inherited);
        }
        lists
    }
}

fn json_names<'a>(names: impl IntoIterator<Item = &'a String>) -> String {
    serde_json::to_string(&names.into_iter().collect::<Vec<_>>()).unwrap_or_else(|_| "[]".to_owned())
}

/// Refuses, at execution, every call to a tool its allow/deny lists do not permit, hides those tools, and passes its restrictions to sub-agent runs through run tags.
#[middleware(
    builtin,
    name = "tool_allowlist",
    config = ToolAllowlistConfig,
    doc(
        mutation = "Records its lists as a run restriction that every sub-agent run inherits and the agent loop enforces there (whatever the child's stack holds); adds its restriction tags to the run (`tinyagents.tools.allow=…`, `tinyagents.tools.deny=…`); removes unpermitted tools from `request.tools`.",
        events = "`ToolsFiltered { by: \"tool_allowlist\", … }` when it hides tools; refusals are `Validation` errors.",
        failure = "Fails closed: a call to a tool not permitted is refused with `TinyAgentsError::Validation` (by default the call's error result); with an allow list an unknown tool is refused; a malformed inherited restriction tag permits nothing.",
        streaming = "None.",
        cache = "The tool list it leaves is the same on every call of a run, so the cached prefix stays stable.",
        retries = "`before_tool` runs once per call, outside the tool onion: a retried or fallback tool call was already admitted under the same name."
    )
)]
impl ToolAllowlistMiddleware {
    #[before_agent]
    fn record<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        // The runtime carries it to every child run and enforces it there, whatever the child's stack holds.
        ctx.policy_mut()
            .add_restriction("tool_allowlist", Restriction::Tools(self.lists.clone()));
        if let Some(allow) = self.lists.allow() {
            ctx.add_tag(format!("{ALLOW_TAG}{}", json_names(allow)));
        }
        if !self.lists.deny().is_empty() {
            ctx.add_tag(format!("{DENY_TAG}{}", json_names(self.lists.deny())));
        }
        Ok(())
    }

    #[before_model]
    fn expose<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let lists = self.effective(ctx.tags());
        let mut excluded = Vec::new();
        request.tools.retain(|t| {
            let keep = lists.permits(&t.name);
            if !keep {
                excluded.push(t.name.clone());
            }
            keep
        });
        if !excluded.is_empty() {
            ctx.events()
                .emit_with(EventKind::ToolsFiltered, || AgentEvent::ToolsFiltered {
                    by: "tool_allowlist".to_owned(),
                    excluded,
                    remaining: request.tools.iter().map(|t| t.name.clone()).collect(),
                });
        }
        Ok(())
    }

    #[before_tool]
    fn admit<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        let lists = self.effective(ctx.tags());
        if lists.permits(&call.name) {
            return Ok(());
        }
        let why = if lists.deny().contains(&call.name) {
            "it is denied"
        } else {
            "it is not in the allow list"
        };
        Err(TinyAgentsError::validation(format!(
            "tool allowlist refused the call to `{}`: {why}",
            call.name
        )))
    }
}

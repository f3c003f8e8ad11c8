//! [`ContextualToolSelectionMiddleware`]: filters the tools the model sees by
//! a predicate over the tool and the live run (tool exposure).

use std::sync::Arc;

use tinyagents_macros::{middleware, MiddlewareConfig};

use super::ToolLists;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::ModelRequest;
use crate::harness::tool::ToolSchema;

/// What a tool-exposure predicate knows about the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSelectionContext<'a> {
    /// The run's id.
    pub run_id: &'a str,
    /// Nesting depth (0 for a top-level run).
    pub depth: u32,
    /// The run's tags (security tier, `background`, …).
    pub tags: &'a [String],
    /// The model the run asked for.
    pub requested_model: Option<&'a str>,
}

type Predicate = dyn Fn(&ToolSchema, &ToolSelectionContext<'_>) -> bool + Send + Sync;

/// Options of [`ContextualToolSelectionMiddleware`] built from lists (`type = "contextual_tool_selection"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::ContextualToolSelectionConfig;
///
/// let c: ContextualToolSelectionConfig = from_toml_str("allow = [\"search\"]\ndeny = [\"shell\"]").unwrap();
/// assert_eq!(c.allow.as_deref(), Some(&["search".to_owned()][..]));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "contextual_tool_selection", builds = ContextualToolSelectionMiddleware)]
pub struct ContextualToolSelectionConfig {
    /// When set, only these tools are shown (an unknown tool is hidden).
    pub allow: Option<Vec<String>>,
    /// These tools are always hidden.
    #[config(default = Vec::new())]
    pub deny: Vec<String>,
}

impl From<ContextualToolSelectionConfig> for ContextualToolSelectionMiddleware {
    fn from(c: ContextualToolSelectionConfig) -> Self {
        Self::from_lists(c.allow, c.deny)
    }
}

/// Filters the model-visible tool set on each `before_model` with a predicate
/// over the [`ToolSchema`] and a live [`ToolSelectionContext`], so exposure
/// can vary by depth, run tags or the requested model.
///
/// Exposure only changes what the model sees: pair it with
/// [`ToolPolicyMiddleware`](super::ToolPolicyMiddleware) or
/// [`ToolAllowlistMiddleware`](super::ToolAllowlistMiddleware) so a call to a
/// hidden tool is still stopped at execution.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use tinyagents::middleware::ContextualToolSelectionMiddleware;
/// use tinyagents::prelude::*;
///
/// // Parent allows {a,b,c} and denies {c}; child tries to allow {b,c,d}.
/// let mw = ContextualToolSelectionMiddleware::inheriting(
///     Some(["a", "b", "c"]), ["c"],
///     Some(["b", "c", "d"]), Vec::<String>::new(),
/// );
/// let stack: MiddlewareStack<()> = MiddlewareStack::new().with(mw).unwrap();
/// let mut request = ModelRequest::default()
///     .with_tools(["a", "b", "c", "d"].map(|n| ToolSchema::new(n, "")).to_vec());
/// stack.run_before_model(&mut RunContext::new(RunConfig::new("r"), ()), &(), &mut request).await.unwrap();
/// assert_eq!(request.tools, [ToolSchema::new("b", "")]);
///
/// // a predicate: deeper runs see no tools whose name starts with `spawn_`
/// let _mw = ContextualToolSelectionMiddleware::new(|tool, cx| cx.depth == 0 || !tool.name.starts_with("spawn_"));
/// # });
/// ```
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct ContextualToolSelectionMiddleware {
    #[educe(Debug(ignore))]
    predicate: Arc<Predicate>,
    lists: Option<ToolLists>,
}

impl ContextualToolSelectionMiddleware {
    /// Shows a tool when `predicate(tool, run)` is true.
    pub fn new(predicate: impl Fn(&ToolSchema, &ToolSelectionContext<'_>) -> bool + Send + Sync + 'static) -> Self {
        Self {
            predicate: Arc::new(predicate),
            lists: None,
        }
    }

    /// Deny always hides; when `allow` is `Some`, a tool must be listed to be
    /// shown (fail-closed for unknown tools).
    pub fn from_lists<A, D>(allow: Option<A>, deny: D) -> Self
    where
        A: IntoIterator,
        A::Item: Into<String>,
        D: IntoIterator,
        D::Item: Into<String>,
    {
        Self::from_tool_lists(ToolLists::new(allow, deny))
    }

    /// A child policy composed against an inherited parent policy: it can only
    /// narrow (deny is additive, allow intersective; see [`ToolLists::narrowed`]).
    pub fn inheriting<PA, PD, CA, CD>(
        parent_allow: Option<PA>,
        parent_deny: PD,
        child_allow: Option<CA>,
        child_deny: CD,
    ) -> Self
    where
        PA: IntoIterator,
        PA::Item: Into<String>,
        PD: IntoIterator,
        PD::Item: Into<String>,
        CA: IntoIterator,
        CA::Item: Into<String>,
        CD: IntoIterator,
        CD::Item: Into<String>,
    {
        let parent = ToolLists::new(parent_allow, parent_deny);
        Self::from_tool_lists(parent.narrowed(&ToolLists::new(child_allow, child_deny)))
    }

    /// Shows the tools `lists` permits.
    pub fn from_tool_lists(lists: ToolLists) -> Self {
        let l = lists.clone();
        Self {
            predicate: Arc::new(move |tool, _| l.permits(&tool.name)),
            lists: Some(lists),
        }
    }

    /// The lists, when it was built from lists.
    pub fn lists(&self) -> Option<&ToolLists> {
        self.lists.as_ref()
    }
}

/// Filters the tools the model sees by a predicate over each tool and the live run (depth, tags, requested model), or by allow/deny lists where a child can only narrow.
#[middleware(
    builtin,
    name = "contextual_tool_selection",
    config = ContextualToolSelectionConfig,
    doc(
        mutation = "Removes tools from `request.tools`; nothing else.",
        events = "`ToolsFiltered { by: \"contextual_tool_selection\", excluded, remaining }` whenever it hides at least one tool.",
        failure = "Cannot fail. Fails closed for lists: with an allow list an unknown tool is hidden. Exposure only: pair it with `tool_policy` or `tool_allowlist` so a call to a hidden tool is refused at execution.",
        streaming = "None: it edits the request before the stream starts.",
        cache = "The tool list is part of the provider's cached prefix: a predicate that depends only on run identity (depth, tags, model) gives the same list on every call of a run, so the prefix stays stable.",
        retries = "Runs once per turn in `before_model`, outside the model onion: retries and fallbacks reuse the filtered list."
    )
)]
impl ContextualToolSelectionMiddleware {
    #[before_model]
    fn select<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let cx = ToolSelectionContext {
            run_id: ctx.run_id(),
            depth: ctx.depth(),
            tags: ctx.tags(),
            requested_model: ctx.requested_model(),
        };
        let mut excluded = Vec::new();
        request.tools.retain(|t| {
            let keep = (self.predicate)(t, &cx);
            if !keep {
                excluded.push(t.name.clone());
            }
            keep
        });
        if !excluded.is_empty() {
            ctx.events()
                .emit_with(EventKind::ToolsFiltered, || AgentEvent::ToolsFiltered {
                    by: "contextual_tool_selection".to_owned(),
                    excluded,
                    remaining: request.tools.iter().map(|t| t.name.clone()).collect(),
                });
        }
        Ok(())
    }
}

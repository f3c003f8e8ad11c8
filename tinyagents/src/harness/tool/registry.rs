//! The [`Tool`] trait, fn-tools and the [`ToolRegistry`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use super::{FileAccess, FileAccessMode, ToolDelta, ToolPolicy, ToolSchema};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::EventSink;
use crate::harness::locals::RunLocalsHandle;
use crate::harness::model::Usage;
use crate::harness::steering::SteeringHandle;
use crate::harness::workspace::WorkspaceDescriptor;

/// What a tool returns: model-visible text, optional structured data, and the
/// usage of any model calls the tool made (a sub-agent), rolled up to the run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// What the model sees.
    pub content: String,
    /// Structured output.
    pub data: Option<Value>,
    /// Token usage spent inside the tool (added to the calling run's usage).
    pub usage: Option<Usage>,
}

impl From<String> for ToolOutput {
    fn from(content: String) -> Self {
        Self {
            content,
            ..Self::default()
        }
    }
}

impl From<&str> for ToolOutput {
    fn from(content: &str) -> Self {
        Self::from(content.to_string())
    }
}

impl From<Value> for ToolOutput {
    fn from(data: Value) -> Self {
        Self {
            content: data.to_string(),
            data: Some(data),
            usage: None,
        }
    }
}

/// The calling run, as a tool sees it: enough to start a child run under it.
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct ParentRun {
    /// The run's id.
    pub run_id: Arc<str>,
    /// The run's nesting depth (0 for a top-level run).
    pub depth: u32,
    /// The run's tags.
    pub tags: Arc<[String]>,
    /// The model the run asked for.
    #[educe(Debug(ignore))]
    pub requested_model: Option<String>,
    /// The session the run counts toward ([`RunConfig::session`](crate::harness::context::RunConfig::session)).
    pub session: Option<Arc<str>>,
    /// The run's event sink (a child run reports to the same sink).
    #[educe(Debug(ignore))]
    pub sink: Arc<dyn EventSink>,
    /// The run's workspace.
    #[educe(Debug(ignore))]
    pub workspace: Option<WorkspaceDescriptor>,
    /// The run's cancellation; a child's token is a child of it.
    #[educe(Debug(ignore))]
    pub cancellation: CancellationToken,
    /// The run's steering handle (a child run receives commands addressed to its id).
    #[educe(Debug(ignore))]
    pub steering: Option<SteeringHandle>,
    /// Every restriction of the run (inherited and its own guards'): a child
    /// run inherits them all, and the agent loop enforces them in it.
    #[educe(Debug(ignore))]
    pub restrictions: Arc<super::RunRestrictions>,
    /// The run's per-run state, for a child run's [`RunContext::with_parent_locals`](crate::harness::context::RunContext::with_parent_locals).
    #[educe(Debug(ignore))]
    pub locals: RunLocalsHandle,
}

/// What a running tool can use: its call, the calling run, and a channel for progress.
#[derive(Debug)]
pub struct ToolContext {
    call_id: String,
    parent: ParentRun,
    deltas: Option<UnboundedSender<ToolDelta>>,
}

impl ToolContext {
    /// A context for `call_id` under `parent`; `deltas` receives progress.
    pub fn new(call_id: impl Into<String>, parent: ParentRun, deltas: Option<UnboundedSender<ToolDelta>>) -> Self {
        Self {
            call_id: call_id.into(),
            parent,
            deltas,
        }
    }

    /// The id of the call being run.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The calling run.
    pub fn parent(&self) -> &ParentRun {
        &self.parent
    }

    /// Whether the run was cancelled (a long tool should stop).
    pub fn is_cancelled(&self) -> bool {
        self.parent.cancellation.is_cancelled()
    }

    /// Reports progress: the text goes through the stack's `on_tool_delta`
    /// hooks, then to the event sink.
    pub fn progress(&self, content: impl Into<String>) {
        if let Some(tx) = &self.deltas {
            // A closed receiver means the call is over: progress is moot.
            let _ = tx.send(ToolDelta::new(self.call_id.clone(), content));
        }
    }
}

/// Something the model can call.
///
/// Implement it for a type, or make one from an async closure with [`tool_fn`].
#[async_trait]
pub trait Tool: Send + Sync {
    /// The schema shown to the model.
    fn schema(&self) -> &ToolSchema;

    /// The tool's policy metadata (default: unclassified).
    fn policy(&self) -> ToolPolicy {
        ToolPolicy::default()
    }

    /// The files a call with these effective arguments will touch (default: none).
    fn file_access(&self, _arguments: &Value) -> Vec<FileAccess> {
        Vec::new()
    }

    /// Runs the tool.
    async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput>;
}

/// A [`Tool`] made from an async closure. See [`tool_fn`].
pub struct FnTool<F> {
    schema: ToolSchema,
    policy: ToolPolicy,
    paths: Vec<(String, FileAccessMode)>,
    f: F,
}

impl<F> FnTool<F> {
    /// The same tool with a policy.
    pub fn with_policy(mut self, policy: ToolPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The same tool with a parameter schema.
    pub fn with_parameters(mut self, parameters: Value) -> Self {
        self.schema.parameters = parameters;
        self
    }

    /// The same tool declaring that the argument `key` names a file it
    /// touches in `mode`: its [`file_access`](Tool::file_access) then
    /// reports it, so the batch scheduler orders calls to one file and the
    /// file guards (`parallel_edit_guard`, `dedup_check`) see it. `key` is a
    /// top-level argument name (`"path"`) or a JSON pointer (`"/edit/file"`);
    /// its value is a path string or an array of path strings. Call it once
    /// per argument that names a file.
    ///
    /// ```
    /// use serde_json::json;
    /// use tinyagents::harness::tool::{tool_fn, FileAccess, FileAccessMode, Tool};
    ///
    /// let write = tool_fn("write", "Writes a file.", |_cx, _args| async move { Ok("ok".into()) })
    ///     .with_file_access("path", FileAccessMode::Write);
    /// assert_eq!(
    ///     write.file_access(&json!({ "path": "src/a.rs", "text": "…" })),
    ///     [FileAccess { path: "src/a.rs".into(), mode: FileAccessMode::Write }]
    /// );
    /// ```
    pub fn with_file_access(mut self, key: impl Into<String>, mode: FileAccessMode) -> Self {
        self.paths.push((key.into(), mode));
        self
    }
}

/// The file paths `key` names in `arguments` (a string or an array of strings).
pub(super) fn paths_at<'a>(arguments: &'a Value, key: &str) -> Vec<&'a str> {
    let value = if key.starts_with('/') {
        arguments.pointer(key)
    } else {
        arguments.get(key)
    };
    match value {
        Some(Value::String(p)) => vec![p.as_str()],
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// Makes a [`Tool`] from an async closure over `(ToolContext, arguments)`.
///
/// ```
/// use tinyagents::harness::tool::{tool_fn, Tool, ToolRegistry};
///
/// let add = tool_fn("add", "Adds a and b.", |_cx, args| async move {
///     let sum = args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0);
///     Ok(sum.to_string().into())
/// });
/// let mut tools = ToolRegistry::new();
/// tools.register(add).unwrap();
/// assert_eq!(tools.schemas()[0].name, "add");
/// ```
pub fn tool_fn<F, Fut>(name: impl Into<String>, description: impl Into<String>, f: F) -> FnTool<F>
where
    F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolOutput>> + Send + 'static,
{
    FnTool {
        schema: ToolSchema::new(name, description),
        policy: ToolPolicy::default(),
        paths: Vec::new(),
        f,
    }
}

#[async_trait]
impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(ToolContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolOutput>> + Send + 'static,
{
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn policy(&self) -> ToolPolicy {
        self.policy.clone()
    }

    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        self.paths
            .iter()
            .flat_map(|(key, mode)| {
                paths_at(arguments, key).into_iter().map(|path| FileAccess {
                    path: path.to_owned(),
                    mode: *mode,
                })
            })
            .collect()
    }

    async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        (self.f)(cx, arguments).await
    }
}

/// The tools an agent can call, by name, in registration order, and the
/// aliases of their names.
///
/// An alias ([`alias`](Self::alias)) is another name a model may call a
/// tool by (a name it was trained on, QueryMT's name for a built-in). The
/// agent loop renames a call made under an alias to the tool's name when
/// the call comes off the model's reply, before any hook sees it: every
/// policy, guard and the batch scheduler judge the call as the tool it is,
/// so two writes to one file under a tool's name and its alias are two
/// writes of one tool. Aliases are not shown to the model. A name that is
/// neither a tool's nor an alias stays unknown (the call fails as any call
/// to an unknown tool does).
///
/// ```
/// use tinyagents::harness::tool::{tool_fn, ToolRegistry};
///
/// let mut tools = ToolRegistry::new();
/// tools.register(tool_fn("write_file", "Writes a file.", |_cx, _args| async { Ok("ok".into()) }))?;
/// tools.alias("write", "write_file")?;
/// assert_eq!(tools.canonical("write"), Some("write_file"));
/// assert_eq!(tools.canonical("write_file"), Some("write_file"));
/// assert_eq!(tools.canonical("wrte"), None);
/// assert!(tools.alias("write", "write_file").is_err(), "declared once");
/// # Ok::<(), tinyagents::harness::error::TinyAgentsError>(())
/// ```
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    by_name: HashMap<String, usize>,
    /// alias → the index of the tool it names
    aliases: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| &t.schema().name))
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. A second tool with the same name is a `Config` error.
    pub fn register(&mut self, tool: impl Tool + 'static) -> Result<&mut Self> {
        self.register_arc(Arc::new(tool))
    }

    /// Adds a shared tool. A second tool with the same name is a `Config` error.
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<&mut Self> {
        let name = tool.schema().name.clone();
        if self.by_name.contains_key(&name) {
            return Err(TinyAgentsError::config(format!(
                "a tool named `{name}` is already registered; give the second tool another name"
            )));
        }
        if let Some(&i) = self.aliases.get(&name) {
            return Err(TinyAgentsError::config(format!(
                "a tool named `{name}` cannot be registered: `{name}` is an alias of the tool `{}`; a name \
                 means one tool — give the new tool another name, or do not declare the alias",
                self.tools[i].schema().name
            )));
        }
        self.by_name.insert(name, self.tools.len());
        self.tools.push(tool);
        Ok(self)
    }

    /// The registry with one more tool (builder form of [`ToolRegistry::register`]).
    pub fn with(mut self, tool: impl Tool + 'static) -> Result<Self> {
        self.register(tool)?;
        Ok(self)
    }

    /// The tool called `name` (its own name: an alias is resolved by
    /// [`canonical`](Self::canonical)).
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// Declares `alias` as another name of the registered tool `tool`: a
    /// call under `alias` is renamed to `tool` before any hook sees it
    /// (see the [type](Self)). An alias that is a tool's name or already an
    /// alias, or a `tool` that is not registered, is a `Config` error and
    /// leaves the registry unchanged.
    pub fn alias(&mut self, alias: impl Into<String>, tool: &str) -> Result<&mut Self> {
        let alias = alias.into();
        let Some(&i) = self.by_name.get(tool) else {
            return Err(TinyAgentsError::config(format!(
                "cannot declare `{alias}` as an alias of `{tool}`: no tool named `{tool}` is registered; register \
                 the tool first (the registered tools are [{}])",
                self.names().collect::<Vec<_>>().join(", ")
            )));
        };
        if self.by_name.contains_key(&alias) {
            return Err(TinyAgentsError::config(format!(
                "cannot declare `{alias}` as an alias of `{tool}`: a tool is named `{alias}`; a name means one \
                 tool — drop the alias or rename that tool"
            )));
        }
        if let Some(&j) = self.aliases.get(&alias) {
            return Err(TinyAgentsError::config(format!(
                "cannot declare `{alias}` as an alias of `{tool}`: it is already an alias of `{}`; an alias is \
                 declared once",
                self.tools[j].schema().name
            )));
        }
        self.aliases.insert(alias, i);
        Ok(self)
    }

    /// The registry with one more alias (builder form of [`alias`](Self::alias)).
    pub fn with_alias(mut self, alias: impl Into<String>, tool: &str) -> Result<Self> {
        self.alias(alias, tool)?;
        Ok(self)
    }

    /// The tool name `name` means: itself for a tool's name, the tool's name
    /// for an alias, `None` for a name the registry does not know.
    pub fn canonical<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        if self.by_name.contains_key(name) {
            return Some(name);
        }
        self.aliases.get(name).map(|&i| self.tools[i].schema().name.as_str())
    }

    /// The declared aliases, each with the name of its tool, sorted by alias.
    pub fn aliases(&self) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = self
            .aliases
            .iter()
            .map(|(alias, &i)| (alias.as_str(), self.tools[i].schema().name.as_str()))
            .collect();
        out.sort_unstable();
        out
    }

    /// All schemas, in registration order.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.tools.iter().map(|t| t.schema().clone()).collect()
    }

    /// A snapshot of every tool's policy, by name.
    pub fn policies(&self) -> HashMap<String, ToolPolicy> {
        self.tools
            .iter()
            .map(|t| (t.schema().name.clone(), t.policy()))
            .collect()
    }

    /// The tool names, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.schema().name.as_str())
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

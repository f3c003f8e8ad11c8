//! [`Agent::single()`]: one agent built from names — a provider and model,
//! a workspace, built-in tools, middleware (native or QueryMT drivers) and
//! a preset — with every mistake reported by [`build`](SingleAgentBuilder::build)
//! as a located error.

use std::any::Any;
use std::path::PathBuf;
use std::sync::Arc;

use crate::compat::querymt::{AgentConfig, CompositeDriver, DriverMiddleware, MiddlewareDriver};
use crate::harness::agent::Agent;
use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::shape::LifecycleOnly;
use crate::harness::middleware::{Middleware, MiddlewareStack};
use crate::harness::model::ChatModel;
use crate::harness::run::{AgentInput, AgentRun};
use crate::harness::tool::ToolRegistry;
use crate::harness::workspace::WorkspaceDescriptor;
use crate::tools::{builtin_tool, WorkspaceRoot};

/// Adds one middleware to the stack being built.
type AddFn = Box<dyn FnOnce(&mut MiddlewareStack<()>) -> Result<()> + Send>;

/// A middleware [`SingleAgentBuilder::middleware`] takes: a native
/// [`Middleware`], a QueryMT [`MiddlewareDriver`], or a [`CompositeDriver`]
/// (whose links are added in order). `Marker` tells the impls apart; it is
/// inferred.
pub trait IntoStackEntry<Marker>: Send + 'static {
    /// The entry's name, for errors.
    fn entry_name(&self) -> String;
    /// Adds it to `stack`.
    fn add_to(self, stack: &mut MiddlewareStack<()>) -> Result<()>;
}

/// [`IntoStackEntry`]'s marker for a native middleware.
#[derive(Debug)]
pub enum NativeEntry {}

/// [`IntoStackEntry`]'s marker for a QueryMT driver (or composite).
#[derive(Debug)]
pub enum DriverEntry {}

/// (`Shape` carries [`add`](MiddlewareStack::add)'s compile-time check: a
/// type with a separate wrap impl does not register here without its wrap.)
impl<M, Shape> IntoStackEntry<(NativeEntry, Shape)> for M
where
    M: Middleware<()> + LifecycleOnly<(), (), Shape> + 'static,
{
    fn entry_name(&self) -> String {
        self.name().to_owned()
    }
    fn add_to(self, stack: &mut MiddlewareStack<()>) -> Result<()> {
        stack.add(self).map(|_| ())
    }
}

impl<D: MiddlewareDriver + 'static> IntoStackEntry<DriverEntry> for D {
    fn entry_name(&self) -> String {
        self.name().to_owned()
    }
    fn add_to(self, stack: &mut MiddlewareStack<()>) -> Result<()> {
        // a composite is its links, each an entry of its own
        if let Some(composite) = (&self as &dyn Any).downcast_ref::<CompositeDriver>() {
            return composite.add_to(stack);
        }
        stack.add(DriverMiddleware::new(self)).map(|_| ())
    }
}

/// Builds one agent from names: see [`Agent::single`].
pub struct SingleAgentBuilder {
    config: AgentConfig,
    model: Option<Arc<dyn ChatModel>>,
    entries: Vec<(String, AddFn)>,
    preset: Option<crate::presets::PresetChoice>,
    system_prompt: Option<String>,
    max_steps: Option<u32>,
}

impl std::fmt::Debug for SingleAgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleAgentBuilder")
            .field("config", &self.config)
            .field("middleware", &self.entries.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("preset", &self.preset)
            .finish_non_exhaustive()
    }
}

impl Agent<(), ()> {
    /// A builder of one agent from names, QueryMT's way:
    ///
    /// ```
    /// use tinyagents::prelude::*;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let dir = std::env::temp_dir();
    /// let agent = Agent::single()
    ///     .model(ScriptedModel::new([ScriptedTurn::text("Hello!")])) // or .provider("anthropic", "claude-sonnet-4-5")
    ///     .cwd(&dir)
    ///     .tools(["read_tool", "ls", "glob"])
    ///     .build()
    ///     .await?;
    /// assert_eq!(agent.prompt("Hi").await?.final_text(), "Hello!");
    ///
    /// let err = Agent::single().model(ScriptedModel::new([])).tools(["read"]).build().await.unwrap_err();
    /// assert!(err.to_string().contains("`Agent::single().tools[0] = \"read\"`: there is no built-in tool named `read`"));
    /// # Ok::<(), TinyAgentsError>(()) }).unwrap();
    /// ```
    pub fn single() -> SingleAgentBuilder {
        SingleAgentBuilder {
            config: AgentConfig::default(),
            model: None,
            entries: Vec::new(),
            preset: None,
            system_prompt: None,
            max_steps: None,
        }
    }
}

impl SingleAgentBuilder {
    /// The provider and model (`"anthropic", "claude-sonnet-4-5"`), reached
    /// with the provider's variables (`ANTHROPIC_API_KEY`, `…_BASE_URL`; the
    /// table in `tinyagents::harness::model::providers`). Needs the
    /// `providers` feature (or the provider's own).
    pub fn provider(mut self, name: impl Into<String>, model: impl Into<String>) -> Self {
        self.config.provider = Some(name.into());
        self.config.model = Some(model.into());
        self
    }

    /// A model given directly (the built-in [`ScriptedModel`](crate::harness::model::ScriptedModel)
    /// for tests, or any [`ChatModel`]); it takes the place of [`provider`](Self::provider).
    pub fn model(mut self, model: impl ChatModel + 'static) -> Self {
        self.model = Some(Arc::new(model));
        self
    }

    /// The workspace root (default `.`): every built-in file tool resolves
    /// its paths inside it, the shell runs there, and each run's
    /// [`WorkspaceDescriptor`] (which the guards judge paths against) is it.
    pub fn cwd(mut self, path: impl Into<PathBuf>) -> Self {
        self.config.cwd = path.into();
        self
    }

    /// Built-in tools by name ([`BUILTIN_TOOLS`](crate::tools::BUILTIN_TOOLS):
    /// `read_tool`, `write_file`, `edit`, `ls`, `glob`, `search_text`, `shell`).
    pub fn tools<I, T>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.config.tools.extend(names.into_iter().map(Into::into));
        self
    }

    /// Adds a middleware: a native [`Middleware`], a QueryMT
    /// [`MiddlewareDriver`] or a [`CompositeDriver`]. Middleware run in the
    /// order added, after the preset's.
    pub fn middleware<Marker, M: IntoStackEntry<Marker>>(mut self, middleware: M) -> Self {
        let name = middleware.entry_name();
        self.entries
            .push((name, Box::new(move |stack| middleware.add_to(stack))));
        self
    }

    /// Starts the stack from a preset ([`Preset`](crate::presets::Preset),
    /// or its name: `"coding"`, `"research"`, `"chat"`); the middleware
    /// added with [`middleware`](Self::middleware) come after it. An unknown
    /// name is reported by `build`.
    pub fn preset(mut self, preset: impl Into<crate::presets::PresetChoice>) -> Self {
        self.preset = Some(preset.into());
        self
    }

    /// A stable system prompt.
    pub fn system_prompt(mut self, text: impl Into<String>) -> Self {
        self.system_prompt = Some(text.into());
        self
    }

    /// The step limit (model turns per run; default [`Agent::DEFAULT_MAX_STEPS`]).
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = Some(steps);
        self
    }

    /// The agent. Each mistake is a `Config` error located at the builder
    /// call (`Agent::single().tools[1]`) that names the value and the fix.
    pub async fn build(self) -> Result<SingleAgent> {
        let root = WorkspaceRoot::new(&self.config.cwd)
            .map_err(|e| located(format!("cwd(\"{}\")", self.config.cwd.display()), e))?;
        let model = match (self.model, &self.config.provider, &self.config.model) {
            (Some(model), _, _) => model,
            (None, Some(provider), Some(model)) => provider_model(provider, model)?,
            _ => {
                return Err(TinyAgentsError::config_at(
                    "Agent::single()",
                    "no model: call `.provider(name, model)` (`\"anthropic\", \"claude-sonnet-4-5\"`; the \
                     providers are listed in `harness::model::providers`) or `.model(m)` (`ScriptedModel` for tests)",
                ));
            }
        };
        let mut tools = ToolRegistry::new();
        for (i, name) in self.config.tools.iter().enumerate() {
            let at = format!("tools[{i}] = \"{name}\"");
            let tool = builtin_tool(name, &root).map_err(|e| located(at.clone(), e))?;
            tools.register_arc(tool).map_err(|e| located(at, e))?;
        }
        let preset = match &self.preset {
            Some(choice) => Some(choice.resolve().map_err(|e| located(format!("preset({choice})"), e))?),
            None => None,
        };
        let mut stack = match preset {
            Some(p) => p.stack_for(&tools).map_err(|e| located(format!("preset({p})"), e))?,
            None => MiddlewareStack::new(),
        };
        for (i, (name, add)) in self.entries.into_iter().enumerate() {
            add(&mut stack).map_err(|e| located(format!("middleware[{i}] (`{name}`)"), e))?;
        }
        let mut agent = Agent::from_shared(model).with_tools(tools).with_stack(stack);
        if let Some(text) = self.system_prompt {
            agent = agent.with_system_prompt(text);
        }
        if let Some(steps) = self.max_steps {
            agent = agent.with_max_steps(steps);
        }
        let mut config = self.config;
        config.cwd = root.path().to_path_buf();
        Ok(SingleAgent {
            agent,
            workspace: match preset {
                Some(p) => p.workspace(root.path()),
                None => WorkspaceDescriptor::new(root.path()),
            },
            config,
            preset: self.preset,
        })
    }
}

/// `e`, located at the builder call `at`.
fn located(at: String, e: TinyAgentsError) -> TinyAgentsError {
    let message = match &e {
        TinyAgentsError::Config { path: None, message } => message.clone(),
        other => other.to_string(),
    };
    TinyAgentsError::config_at(format!("Agent::single().{at}"), message)
}

/// The model of `provider` named `model`, from the environment.
#[cfg(any(feature = "openai", feature = "anthropic"))]
fn provider_model(provider: &str, model: &str) -> Result<Arc<dyn ChatModel>> {
    use crate::harness::model::providers::{ProviderConfig, PROVIDER_NAMES};
    let at = format!("provider(\"{provider}\", \"{model}\")");
    if !PROVIDER_NAMES.contains(&provider) {
        return Err(located(
            at,
            TinyAgentsError::config(format!(
                "unknown provider `{provider}`{}; the providers are {}",
                crate::config::suggest::did_you_mean(provider, PROVIDER_NAMES.iter().copied()),
                crate::config::suggest::list(PROVIDER_NAMES.iter().copied())
            )),
        ));
    }
    if model.trim().is_empty() {
        return Err(located(
            at,
            TinyAgentsError::config("the model name is empty; name the provider's model (`claude-sonnet-4-5`)"),
        ));
    }
    ProviderConfig::from_env(&format!("{provider}:{model}"))
        .and_then(ProviderConfig::build)
        .map_err(|e| located(at, e))
}

/// Without a provider compiled in, naming one is a located error.
#[cfg(not(any(feature = "openai", feature = "anthropic")))]
fn provider_model(provider: &str, model: &str) -> Result<Arc<dyn ChatModel>> {
    Err(located(
        format!("provider(\"{provider}\", \"{model}\")"),
        TinyAgentsError::config(
            "tinyagents was built without its providers: turn on its `providers` feature (or `openai`, \
             `anthropic`) to reach a provider, or give a model with `.model(m)` (`ScriptedModel` for tests)",
        ),
    ))
}

/// An agent built by [`Agent::single`]: the [`Agent`] (through `Deref`),
/// its workspace and what it was built from.
pub struct SingleAgent {
    agent: Agent<()>,
    workspace: WorkspaceDescriptor,
    config: AgentConfig,
    preset: Option<crate::presets::PresetChoice>,
}

impl std::fmt::Debug for SingleAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SingleAgent")
            .field("agent", &self.agent)
            .field("config", &self.config)
            .field("preset", &self.preset)
            .finish_non_exhaustive()
    }
}

impl std::ops::Deref for SingleAgent {
    type Target = Agent<()>;
    fn deref(&self) -> &Agent<()> {
        &self.agent
    }
}

impl SingleAgent {
    /// What the agent was built from (canonical `cwd`).
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The workspace each run works in.
    pub fn workspace(&self) -> &WorkspaceDescriptor {
        &self.workspace
    }

    /// A run context with the agent's workspace, for [`Agent::run`].
    pub fn context(&self, run_id: impl Into<Arc<str>>) -> RunContext {
        RunContext::new(RunConfig::new(run_id), ()).with_workspace(self.workspace.clone())
    }

    /// Runs the agent once on `input`, in a fresh [`context`](Self::context).
    pub async fn prompt(&self, input: impl Into<AgentInput>) -> Result<AgentRun> {
        let mut ctx = self.context(format!(
            "single-{}",
            crate::harness::message::MessageId::generate().as_str()
        ));
        self.agent.run(&mut ctx, &(), input).await
    }

    /// The agent itself.
    pub fn into_agent(self) -> Agent<()> {
        self.agent
    }
}

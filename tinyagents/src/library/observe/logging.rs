//! [`LoggingMiddleware`]: one `tracing` event per hook, and [`HookCounts`]
//! readable while runs go on.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::HookKind;
use crate::harness::model::{ModelRequest, ModelResponse};
use crate::harness::run::AgentRun;
use crate::harness::tool::{ToolCall, ToolResult};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// How many times each hook of a [`LoggingMiddleware`] ran, across every run
/// it serves. Shared (`Arc`) and lock-free: read it while runs go on.
///
/// ```
/// use tinyagents::middleware::HookCounts;
/// use tinyagents::prelude::*;
///
/// let counts = HookCounts::default();
/// assert_eq!(counts.get(HookKind::BeforeModel), 0);
/// assert_eq!(counts.total(), 0);
/// ```
#[derive(Debug, Default)]
pub struct HookCounts {
    counts: [AtomicU64; HookKind::ALL.len()],
}

impl HookCounts {
    fn bump(&self, hook: HookKind) {
        self.counts[hook as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// How many times `hook` ran so far.
    pub fn get(&self, hook: HookKind) -> u64 {
        self.counts[hook as usize].load(Ordering::Relaxed)
    }

    /// How many hook invocations in all.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Every hook that ran at least once, with its count, in lifecycle order.
    pub fn snapshot(&self) -> Vec<(HookKind, u64)> {
        HookKind::ALL
            .iter()
            .map(|h| (*h, self.get(*h)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }
}

crate::config_enum! {
    /// The `tracing` level of [`LoggingMiddleware`]'s events (`level = "…"`).
    pub enum LogLevel {
        /// `TRACE`.
        Trace = "trace",
        /// `DEBUG`.
        Debug = "debug",
        /// `INFO`.
        Info = "info",
        /// `WARN`.
        Warn = "warn",
        /// `ERROR`.
        Error = "error",
    }
}

/// Options of [`LoggingMiddleware`] (`type = "logging"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::LoggingConfig;
///
/// let config: LoggingConfig = from_toml_str("level = \"debug\"").unwrap();
/// let _logging = config.build();
/// let err = from_toml_str::<LoggingConfig>("level = \"loud\"").unwrap_err();
/// assert!(err.to_string().contains("`level` = \"loud\""));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "logging", builds = LoggingMiddleware)]
pub struct LoggingConfig {
    /// The `tracing` level of the log events.
    #[config(default = "info")]
    pub level: LogLevel,
    /// Also log message text, tool arguments and tool results (off: only sizes and names).
    #[config(default = false)]
    pub include_content: bool,
}

impl From<LoggingConfig> for LoggingMiddleware {
    fn from(c: LoggingConfig) -> Self {
        let level = match c.level {
            LogLevel::Trace => tracing::Level::TRACE,
            LogLevel::Debug => tracing::Level::DEBUG,
            LogLevel::Info => tracing::Level::INFO,
            LogLevel::Warn => tracing::Level::WARN,
            LogLevel::Error => tracing::Level::ERROR,
        };
        Self::new().with_level(level).with_content(c.include_content)
    }
}

/// Logs through `tracing` at a level of its choosing; errors are logged at `WARN` or above.
macro_rules! log_at {
    ($level:expr, $($arg:tt)+) => {
        match $level {
            tracing::Level::TRACE => tracing::trace!(target: "tinyagents::logging", $($arg)+),
            tracing::Level::DEBUG => tracing::debug!(target: "tinyagents::logging", $($arg)+),
            tracing::Level::INFO => tracing::info!(target: "tinyagents::logging", $($arg)+),
            tracing::Level::WARN => tracing::warn!(target: "tinyagents::logging", $($arg)+),
            _ => tracing::error!(target: "tinyagents::logging", $($arg)+),
        }
    };
}

/// Logs every run, model call, tool call and error as a `tracing` event
/// (target `tinyagents::logging`) and counts hook invocations in [`HookCounts`].
///
/// One instance serves any number of concurrent runs; its counts are shared
/// and can be read at any time through [`LoggingMiddleware::counts`].
///
/// ```
/// use tinyagents::middleware::LoggingMiddleware;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let logging = LoggingMiddleware::new();
/// let counts = logging.counts();
/// let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("hi")]))
///     .with_stack(MiddlewareStack::new().with(logging)?);
/// agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hello").await?;
/// assert_eq!(counts.get(HookKind::BeforeModel), 1);
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct LoggingMiddleware {
    counts: Arc<HookCounts>,
    level: tracing::Level,
    include_content: bool,
}

impl Default for LoggingMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl LoggingMiddleware {
    /// Logs at `INFO`, without message content.
    pub fn new() -> Self {
        Self {
            counts: Arc::default(),
            level: tracing::Level::INFO,
            include_content: false,
        }
    }

    /// The same middleware logging at `level` (errors stay at `WARN` or above).
    pub fn with_level(mut self, level: tracing::Level) -> Self {
        self.level = level;
        self
    }

    /// The same middleware also logging message text, tool arguments and results.
    pub fn with_content(mut self, include_content: bool) -> Self {
        self.include_content = include_content;
        self
    }

    /// The shared hook counts (readable while runs go on).
    pub fn counts(&self) -> Arc<HookCounts> {
        self.counts.clone()
    }

    fn error_level(&self) -> tracing::Level {
        if self.level < tracing::Level::WARN {
            self.level
        } else {
            tracing::Level::WARN
        }
    }
}

/// Logs runs, model calls, tool calls and errors through `tracing`, and counts every hook it implements in shared `HookCounts`.
#[middleware(
    builtin,
    name = "logging",
    config = LoggingConfig,
    doc(
        mutation = "None: it only reads.",
        events = "No `AgentEvent`s; one `tracing` event per hook (target `tinyagents::logging`) with the run id, depth, model, tool, token counts and sizes; message text, tool arguments and results only with `include_content = true`. Errors are logged at `WARN` (or the configured level when it is more severe).",
        failure = "Never fails: every hook returns `Ok`.",
        streaming = "Does not implement the delta hooks, so streaming pays nothing; the whole response is logged in `after_model`.",
        cache = "None: it does not touch the request.",
        retries = "Sees one `before_model`/`after_model` per turn, outside the model onion, so retried or fallen-back attempts are not logged separately (the `ModelCallStarted` events are); a final failure is logged once by `on_error`."
    )
)]
impl LoggingMiddleware {
    #[before_agent]
    fn log_start<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        self.counts.bump(HookKind::BeforeAgent);
        log_at!(self.level, run_id = %ctx.run_id(), depth = ctx.depth(), "run started");
        Ok(())
    }

    #[after_agent]
    fn log_end<C>(&self, ctx: &mut RunContext<C>, run: &mut AgentRun) -> Result<()> {
        self.counts.bump(HookKind::AfterAgent);
        log_at!(
            self.level,
            run_id = %ctx.run_id(),
            stop = ?run.stop,
            model_calls = run.counters.model_calls,
            tool_calls = run.counters.tool_calls,
            input_tokens = run.usage.total_input(),
            output_tokens = run.usage.output_tokens,
            "run ended"
        );
        Ok(())
    }

    #[before_model]
    fn log_request<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        self.counts.bump(HookKind::BeforeModel);
        let model = request.model.as_deref().unwrap_or("");
        if self.include_content {
            let last = request
                .messages
                .last()
                .map(|m| m.text().into_owned())
                .unwrap_or_default();
            log_at!(self.level, run_id = %ctx.run_id(), model, messages = request.messages.len(), tools = request.tools.len(), last = %last, "model request");
        } else {
            log_at!(self.level, run_id = %ctx.run_id(), model, messages = request.messages.len(), tools = request.tools.len(), "model request");
        }
        Ok(())
    }

    #[after_model]
    fn log_response<C>(&self, ctx: &mut RunContext<C>, response: &mut ModelResponse) -> Result<()> {
        self.counts.bump(HookKind::AfterModel);
        let model = response.model.as_deref().unwrap_or("");
        let u = response.usage;
        let calls = response.message.tool_calls.len();
        if self.include_content {
            let text = response.message.text();
            log_at!(self.level, run_id = %ctx.run_id(), model, input_tokens = u.input_tokens, output_tokens = u.output_tokens, cache_read_tokens = u.cache_read_tokens, cache_write_tokens = u.cache_write_tokens, tool_calls = calls, text = %text, "model response");
        } else {
            log_at!(self.level, run_id = %ctx.run_id(), model, input_tokens = u.input_tokens, output_tokens = u.output_tokens, cache_read_tokens = u.cache_read_tokens, cache_write_tokens = u.cache_write_tokens, tool_calls = calls, "model response");
        }
        Ok(())
    }

    #[before_tool]
    fn log_call<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        self.counts.bump(HookKind::BeforeTool);
        if self.include_content {
            log_at!(self.level, run_id = %ctx.run_id(), tool = %call.name, call_id = %call.id, arguments = %call.arguments, "tool call");
        } else {
            log_at!(self.level, run_id = %ctx.run_id(), tool = %call.name, call_id = %call.id, "tool call");
        }
        Ok(())
    }

    #[after_tool]
    fn log_result<C>(&self, ctx: &mut RunContext<C>, result: &mut ToolResult) -> Result<()> {
        self.counts.bump(HookKind::AfterTool);
        let is_error = result.is_error();
        if self.include_content {
            log_at!(self.level, run_id = %ctx.run_id(), tool = %result.name, call_id = %result.call_id, is_error, content = %result.content, "tool result");
        } else {
            log_at!(self.level, run_id = %ctx.run_id(), tool = %result.name, call_id = %result.call_id, is_error, bytes = result.content.len(), "tool result");
        }
        Ok(())
    }

    #[on_error]
    fn log_error<C>(&self, ctx: &mut RunContext<C>, error: &TinyAgentsError) -> Result<()> {
        self.counts.bump(HookKind::OnError);
        log_at!(self.error_level(), run_id = %ctx.run_id(), kind = %error.kind(), error = %error, "error");
        Ok(())
    }
}

//! [`ShellTool`]: the shell tool the library ships, every call run in the sandbox.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{admitted_plan, Sandbox, SandboxCommand, SandboxMode, SandboxPolicy, ShellPlan, Termination};
use crate::harness::workspace::WorkspaceDescriptor;

/// The shell `SandboxCommand::shell` runs (only in the `/bin/sh` opt-out).
const SH: &str = "/bin/sh";
use crate::harness::tool::{SideEffects, Tool, ToolContext, ToolOutput, ToolPolicy, ToolRuntime, ToolSchema};
use crate::{Result, TinyAgentsError};

/// How a shell tool reads the command line of a call no guard admitted into
/// the [`ShellPlan`] of what runs: the rules [`ShellTool::with_rules`]
/// takes. The `shell_fs_guard` built-in (`ShellFsGuardMiddleware`)
/// implements it with its own argument keys and command policy; its default
/// instance is the tool's default.
pub trait ShellRules: Send + Sync + std::fmt::Debug {
    /// The plan of a shell call's `arguments` in a run with `workspace`, or
    /// `Err(reason)` when they are refused.
    fn plan_shell(
        &self,
        arguments: &Value,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> std::result::Result<ShellPlan, String>;
}

/// A shell tool (name `shell`) whose every call runs through the sandboxed
/// runner ([`Sandbox`]) in the workspace root, or in a `cwd` under it.
///
/// Arguments (any other key is refused): `command` — a command line (the key
/// `shell_fs_guard` checks) — and optionally `cwd`, relative to the root.
///
/// **What is checked is what runs.** A command line is never handed to
/// `/bin/sh`: it runs as a [`ShellPlan`](super::ShellPlan) — the stages of argv, their
/// redirections and pipes — executed by [`Sandbox::run_plan`]. When
/// `shell_fs_guard` admitted the call, the tool runs the plan the guard
/// recorded for that call id ([`admitted_plan`]) — a call whose arguments
/// changed after the guard judged them is refused — otherwise it reads the line
/// itself with the same parser and the same rules (the default guard's, or
/// those given with [`ShellTool::with_rules`]) and refuses what they refuse.
/// [`ShellTool::with_shell`] is the explicit opt-out that runs `/bin/sh -c`
/// (no plan, no check: only for a workspace where the OS sandbox alone is the
/// policy).
///
/// With [`ShellTool::with_argv`], `argv` (a program and its arguments, run
/// without a shell) is accepted instead of `command`: off by default,
/// because a guard that checks `command` lines would not see it. The result is
/// the exit status and the bounded stdout and stderr (with a truncation
/// marker when cut); `data` holds `exit_code`, `termination`,
/// `stdout_truncated`, `stderr_truncated`, `confined`.
///
/// Its [`ToolPolicy`] declares `READ | WRITE | EXECUTE` (and `NETWORK` when
/// the policy allows it), and the sandbox mode of its policy — `Required` by
/// default — so `ToolPolicyMiddleware::require_sandbox` can refuse it where
/// no sandbox can be had. Building it with a required sandbox on a machine
/// without Landlock fails, naming what is missing.
///
/// ```no_run
/// use std::time::Duration;
/// use tinyagents::prelude::*;
/// use tinyagents::harness::workspace::WorkspaceDescriptor;
/// use tinyagents::middleware::ToolPolicyMiddleware;
/// use tinyagents::sandbox::{SandboxLimits, SandboxMode, SandboxPolicy, ShellTool};
///
/// fn tools() -> tinyagents::Result<(ToolRegistry, ToolPolicyMiddleware, WorkspaceDescriptor)> {
///     let policy = SandboxPolicy::new("/path/to/workspace")
///         .with_read_only_path("/opt/toolchain") // more readable paths
///         .with_env_allowed("RUST_LOG") // more variables, by exact name
///         .with_network(false) // the default
///         .with_limits(SandboxLimits { wall_time: Duration::from_secs(30), ..SandboxLimits::default() });
///     let tools = ToolRegistry::new().with(ShellTool::new(policy)?)?;
///     let guard = ToolPolicyMiddleware::strict(tools.policies()); // require_sandbox is on
///     let workspace = WorkspaceDescriptor::new("/path/to/workspace").with_sandbox(SandboxMode::Required);
///     Ok((tools, guard, workspace))
/// }
/// # let _ = tools;
/// ```
#[derive(Debug, Clone)]
pub struct ShellTool {
    schema: ToolSchema,
    sandbox: Sandbox,
    accept_argv: bool,
    shell: bool,
    rules: Arc<dyn ShellRules>,
}

impl ShellTool {
    /// A shell tool running under `policy` (see [`Sandbox::new`] for the errors).
    pub fn new(policy: SandboxPolicy) -> Result<Self> {
        let sandbox = Sandbox::new(policy)?;
        let mut tool = Self {
            schema: ToolSchema::new("shell", ""),
            sandbox,
            accept_argv: false,
            shell: false,
            rules: crate::config::default_shell_rules(),
        };
        tool.describe();
        Ok(tool)
    }

    /// The same tool also accepting `argv` (a program and its arguments, no
    /// shell) instead of `command`. Enable it only when the guards in front of
    /// the tool check `argv` too.
    pub fn with_argv(mut self, accept: bool) -> Self {
        self.accept_argv = accept;
        self.describe();
        self
    }

    /// The same tool running `command` lines with `/bin/sh -c` (`true`)
    /// instead of as a checked plan: the explicit opt-out. The shell then
    /// reads the line a second time — globs, options, quoting — and no check
    /// of the line holds; only the OS sandbox confines it.
    pub fn with_shell(mut self, shell: bool) -> Self {
        self.shell = shell;
        self.describe();
        self
    }

    /// The same tool reading lines no guard admitted with `rules` (default:
    /// `ShellFsGuardMiddleware::new()`, the default guard). Its root is the
    /// run's workspace, which must be this tool's root.
    ///
    /// ```no_run
    /// use tinyagents::middleware::ShellFsGuardMiddleware;
    /// use tinyagents::sandbox::{SandboxPolicy, ShellTool};
    ///
    /// let tool = ShellTool::new(SandboxPolicy::new("/path/to/workspace"))?
    ///     .with_rules(ShellFsGuardMiddleware::workspace());
    /// # Ok::<(), tinyagents::TinyAgentsError>(())
    /// ```
    pub fn with_rules(mut self, rules: impl ShellRules + 'static) -> Self {
        self.rules = Arc::new(rules);
        self
    }

    fn describe(&mut self) {
        let line = if self.shell {
            "A command line, run with /bin/sh -c."
        } else {
            "A command line: one program or a pipeline of them, with quoting and redirections as in sh (no \
             chaining, substitution or variables)."
        };
        let (give, mut properties) = if self.accept_argv {
            (
                "Give `command` (a command line) or `argv` (a program and its arguments)",
                json!({
                    "command": { "type": "string", "description": line },
                    "argv": { "type": "array", "items": { "type": "string" }, "description": "A program and its arguments, run without a shell." }
                }),
            )
        } else {
            (
                "Give `command` (a command line)",
                json!({ "command": { "type": "string", "description": line } }),
            )
        };
        properties["cwd"] =
            json!({ "type": "string", "description": "Working directory, relative to the workspace root." });
        self.schema.description = format!(
            "Runs a command in the workspace inside an OS sandbox (writes only under the workspace, \
             no network unless enabled, time and output limits). {give}, and optionally `cwd`, a \
             directory relative to the workspace root. Returns the exit status, stdout and stderr."
        );
        self.schema.parameters = json!({
            "type": "object",
            "properties": properties,
            "required": if self.accept_argv { json!([]) } else { json!(["command"]) },
            "additionalProperties": false
        });
    }

    /// The same tool under another name.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.schema.name = name.into();
        self
    }

    /// The runner the calls go through.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    fn command(&self, arguments: &Value) -> Result<SandboxCommand> {
        let name = &self.schema.name;
        let Some(args) = arguments.as_object() else {
            return Err(TinyAgentsError::validation(format!(
                "tool `{name}`: arguments must be an object with `command` or `argv`, got {arguments}"
            )));
        };
        let known: &[&str] = if self.accept_argv {
            &["command", "argv", "cwd"]
        } else {
            &["command", "cwd"]
        };
        if let Some(key) = args.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(TinyAgentsError::validation(format!(
                "tool `{name}`: unknown argument `{key}`; the arguments are {}",
                if self.accept_argv {
                    "`command` or `argv`, and `cwd`"
                } else {
                    "`command` and `cwd` (`argv` is off: see ShellTool::with_argv)"
                }
            )));
        }
        let mut cmd = match (args.get("command"), args.get("argv")) {
            (Some(Value::String(line)), None) if !line.trim().is_empty() => SandboxCommand::shell(line.clone()),
            (None, Some(Value::Array(items))) if !items.is_empty() => {
                let argv: Option<Vec<String>> = items.iter().map(|v| v.as_str().map(str::to_owned)).collect();
                SandboxCommand::new(argv.ok_or_else(|| {
                    TinyAgentsError::validation(format!("tool `{name}`: every `argv` item must be a string"))
                })?)
            }
            _ => {
                return Err(TinyAgentsError::validation(format!(
                    "tool `{name}`: give {}",
                    if self.accept_argv {
                        "exactly one of `command` (a non-empty string) or `argv` (a non-empty array of strings)"
                    } else {
                        "`command`, a non-empty string"
                    }
                )))
            }
        };
        match args.get("cwd") {
            None => {}
            Some(Value::String(cwd)) => cmd.cwd = Some(PathBuf::from(cwd)),
            Some(other) => {
                return Err(TinyAgentsError::validation(format!(
                    "tool `{name}`: `cwd` must be a string, got {other}"
                )))
            }
        }
        Ok(cmd)
    }
}

#[async_trait]
impl Tool for ShellTool {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn policy(&self) -> ToolPolicy {
        let p = self.sandbox.policy();
        let mut effects = SideEffects::READ | SideEffects::WRITE | SideEffects::EXECUTE;
        if p.network {
            effects |= SideEffects::NETWORK;
        }
        ToolPolicy::classified()
            .with_side_effects(effects)
            .with_runtime(ToolRuntime {
                sandbox: p.mode,
                // Both streams at their cap, plus the status line and markers.
                max_result_bytes: Some(p.limits.output_bytes.saturating_mul(2).saturating_add(1024)),
                // The runner kills the tree at the wall time; allow for the cleanup.
                timeout: Some(p.limits.wall_time + std::time::Duration::from_secs(10)),
            })
    }

    async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let cmd = self.command(&arguments)?;
        let mut sandbox = self.sandbox.clone();
        if let Some(ws) = &cx.parent().workspace {
            let root = ws.root.canonicalize().unwrap_or_else(|_| ws.root.clone());
            if root != sandbox.root() {
                return Err(TinyAgentsError::validation(format!(
                    "tool `{}` is rooted at `{}` but the run's workspace is `{}`; build the tool with the run's workspace root",
                    self.schema.name,
                    sandbox.root().display(),
                    ws.root.display()
                )));
            }
            if ws.read_only {
                sandbox = sandbox.read_only();
            }
            if ws.sandbox == SandboxMode::Required && sandbox.policy().mode != SandboxMode::Required {
                return Err(TinyAgentsError::validation(format!(
                    "tool `{}` runs with sandbox mode {:?} but the run's workspace requires a sandbox; \
                     build the tool with SandboxMode::Required",
                    self.schema.name,
                    sandbox.policy().mode
                )));
            }
        }
        let line = cmd.argv.first().is_some_and(|p| p == SH) && !self.shell;
        let out = if line {
            // The plan the guard admitted for this call, or the tool's own
            // reading with the same parser and rules: what is checked runs.
            let plan = match admitted_plan(&cx, &arguments) {
                Some(plan) => plan,
                None if super::judged_otherwise(&cx, &arguments) => {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{}` refused call `{}`: its arguments changed after shell_fs_guard judged them (a \
                         middleware or hook after the guard rewrote them), so what would run is not what was \
                         checked; register shell_fs_guard after whatever rewrites arguments",
                        self.schema.name,
                        cx.call_id()
                    )));
                }
                None => {
                    let ws = match &cx.parent().workspace {
                        Some(ws) => ws.clone(),
                        None => WorkspaceDescriptor::new(sandbox.root())
                            .read_only(!sandbox.policy().root_writable)
                            .with_sandbox(sandbox.policy().mode),
                    };
                    self.rules.plan_shell(&arguments, Some(&ws)).map_err(|reason| {
                        TinyAgentsError::validation(format!(
                            "tool `{}` refused the command: {reason}",
                            self.schema.name
                        ))
                    })?
                }
            };
            sandbox.run_plan_cancellable(&plan, &cx.parent().cancellation).await?
        } else {
            sandbox.run_cancellable(cmd, &cx.parent().cancellation).await?
        };
        let termination = match out.termination {
            Termination::Exited(_) => "exited",
            Termination::Signaled(_) => "signaled",
            Termination::TimedOut => "timed_out",
            Termination::OutputLimit => "output_limit",
            Termination::Cancelled => "cancelled",
        };
        Ok(ToolOutput {
            content: out.render(),
            data: Some(json!({
                "exit_code": out.exit_code(),
                "termination": termination,
                "stdout_truncated": out.stdout_truncated,
                "stderr_truncated": out.stderr_truncated,
                "confined": out.confined,
            })),
            usage: None,
        })
    }
}

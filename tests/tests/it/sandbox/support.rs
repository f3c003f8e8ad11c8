//! Shared helpers of the sandbox tests: a throw-away workspace, and the skip
//! rule (only where the kernel lacks Landlock; never when
//! `TINYAGENTS_REQUIRE_SANDBOX=1`, which CI sets).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use tinyagents::sandbox::{Sandbox, SandboxCommand, SandboxLimits, SandboxOutput, SandboxPolicy};

/// `true` when the sandbox can run here; otherwise prints why and returns
/// `false` (the test then returns early), unless CI demands it.
pub fn sandbox_available(test: &str) -> bool {
    // Landlock and seccomp, then a trial sandbox (the process limit must hold
    // too) on an empty root (the sandbox walks its root before each run).
    let trial = tinyagents::sandbox::availability().and_then(|()| {
        let ws = Workspace::new("trial");
        Sandbox::new(SandboxPolicy::new(&ws.root))
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    match trial {
        Ok(()) => true,
        Err(missing) => {
            if std::env::var("TINYAGENTS_REQUIRE_SANDBOX").as_deref() == Ok("1") {
                panic!("{test}: TINYAGENTS_REQUIRE_SANDBOX=1 but the sandbox is unavailable: {missing}");
            }
            println!("SKIPPED {test}: {missing}");
            false
        }
    }
}

static N: AtomicU32 = AtomicU32::new(0);

/// A workspace root and, beside it (outside the root), a directory holding
/// a planted secret; both removed on drop.
pub struct Workspace {
    pub base: PathBuf,
    pub root: PathBuf,
    pub outside: PathBuf,
    pub secret: String,
}

impl Workspace {
    pub fn new(tag: &str) -> Self {
        let n = N.fetch_add(1, Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("ta-sbx-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let secret = format!("TOPSECRET-{}-{n}", std::process::id());
        std::fs::write(outside.join("secret.txt"), &secret).unwrap();
        std::fs::write(root.join("hello.txt"), "hello sandbox\nsecond line\n").unwrap();
        Self {
            base,
            root,
            outside,
            secret,
        }
    }

    pub fn policy(&self) -> SandboxPolicy {
        SandboxPolicy::new(&self.root)
    }

    pub fn sandbox(&self) -> Sandbox {
        Sandbox::new(self.policy()).unwrap()
    }

    pub fn sandbox_with(&self, limits: SandboxLimits) -> Sandbox {
        Sandbox::new(self.policy().with_limits(limits)).unwrap()
    }

    pub fn outside_path(&self, name: &str) -> PathBuf {
        self.outside.join(name)
    }

    /// Every file under `outside`, besides the planted secret.
    pub fn outside_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        walk(&self.outside, &mut out);
        out.retain(|p| p.file_name().and_then(|n| n.to_str()) != Some("secret.txt"));
        out
    }
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            out.push(p.clone());
            if p.is_dir() && !p.is_symlink() {
                walk(&p, out);
            }
        }
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Runs a `/bin/sh -c` line.
pub async fn sh(sandbox: &Sandbox, line: &str) -> SandboxOutput {
    sandbox.run(SandboxCommand::shell(line)).await.unwrap()
}

/// Runs a `/bin/sh -c` line: its rendered output, or the sandbox's refusal
/// as text (where a protected path was created, it has been undone).
pub async fn sh_or_refusal(sandbox: &Sandbox, line: &str) -> Result<String, String> {
    sandbox
        .run(SandboxCommand::shell(line))
        .await
        .map(|o| o.render())
        .map_err(|e| e.to_string())
}

/// A number for `sleep` that no other test process uses (`n` < 100 names
/// it within this one): what [`processes_with`] looks for, so two test runs
/// on one machine never see each other's sleepers.
pub fn marker(n: u32) -> String {
    format!("98{:07}{n:02}", std::process::id() % 10_000_000)
}

/// The pids of live (non-zombie) processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let me = std::process::id();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(needle) && !text.contains("sandbox_") {
            found.push(pid);
        }
    }
    found
}

/// The default `shell_fs_guard`'s verdict on `command`, run in `root`.
pub fn verdict(root: &Path, command: &str) -> Result<(), String> {
    verdict_in(root, None, command)
}

/// [`verdict`] with the call's `cwd` (relative to the root) when given.
pub fn verdict_in(root: &Path, cwd: Option<&str>, command: &str) -> Result<(), String> {
    use serde_json::json;
    use tinyagents::harness::workspace::WorkspaceDescriptor;
    use tinyagents::middleware::ShellFsGuardMiddleware;
    use tinyagents::prelude::ToolCall;
    let mut args = json!({ "command": command });
    if let Some(cwd) = cwd {
        args["cwd"] = json!(cwd);
    }
    ShellFsGuardMiddleware::new().check_call(
        &ToolCall::new("c", "shell", args),
        Some(&WorkspaceDescriptor::new(root)),
    )
}

/// Runs `calls` ((cwd, command) pairs, one per model turn) through an agent
/// holding `ShellTool` behind the DEFAULT `shell_fs_guard` and a strict
/// `tool_policy`, in a sandbox-required workspace; returns each call's result text.
pub async fn model_runs(ws: &Workspace, calls: &[(&str, &str)]) -> Vec<String> {
    model_runs_with(ws, tinyagents::middleware::ShellFsGuardMiddleware::new(), calls).await
}

/// [`model_runs`] behind `guard` instead of the default `shell_fs_guard`.
pub async fn model_runs_with(
    ws: &Workspace,
    guard: tinyagents::middleware::ShellFsGuardMiddleware,
    calls: &[(&str, &str)],
) -> Vec<String> {
    use std::sync::Arc;

    use serde_json::json;
    use tinyagents::harness::workspace::WorkspaceDescriptor;
    use tinyagents::middleware::ToolPolicyMiddleware;
    use tinyagents::prelude::*;
    use tinyagents::sandbox::{SandboxMode, ShellTool};

    let tool = ShellTool::new(ws.policy()).unwrap();
    let tools = ToolRegistry::new().with(tool).unwrap();
    let policy = ToolPolicyMiddleware::strict(tools.policies()).require_sandbox(true);
    let mut turns: Vec<ScriptedTurn> = calls
        .iter()
        .enumerate()
        .map(|(i, (cwd, command))| {
            let mut args = json!({ "command": command });
            if !cwd.is_empty() {
                args["cwd"] = json!(cwd);
            }
            ScriptedTurn::tool_calls(vec![ToolCall::new(format!("c{i}"), "shell", args)])
        })
        .collect();
    turns.push(ScriptedTurn::text("done"));
    let model = Arc::new(ScriptedModel::new(turns));
    let agent: Agent<()> = Agent::from_shared(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(guard).unwrap().with(policy).unwrap());
    let workspace = WorkspaceDescriptor::new(&ws.root).with_sandbox(SandboxMode::Required);
    agent
        .run(
            &mut RunContext::new(RunConfig::new("rt"), ()).with_workspace(workspace),
            &(),
            "go",
        )
        .await
        .unwrap();
    model
        .requests()
        .last()
        .unwrap()
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect()
}

/// Runs git in `root` (outside the sandbox) with an identity and no
/// signing; panics on failure; returns stdout.
pub fn git(root: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgSign=false",
        ])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository in `root` with an identity in its own config (the sandbox's
/// `HOME` is private) and `hello.txt` committed.
pub fn committed_repo(root: &Path) {
    git(root, &["init", "-q"]);
    git(root, &["config", "user.name", "agent"]);
    git(root, &["config", "user.email", "agent@example.com"]);
    git(root, &["add", "hello.txt"]);
    git(root, &["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "init"]);
}

/// The paths committed at `HEAD`.
pub fn head_tree(root: &Path) -> Vec<String> {
    git(root, &["ls-tree", "-r", "--name-only", "HEAD"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The paths in the index.
pub fn index_paths(root: &Path) -> Vec<String> {
    git(root, &["ls-files"]).lines().map(str::to_owned).collect()
}

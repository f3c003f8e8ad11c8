//! Ordinary developer commands work inside the sandbox, and `ShellTool`
//! runs through it in an agent, declaring (and needing) a required sandbox.

use crate::sandbox::support as sandbox_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tinyagents::harness::tool::{SideEffects, ToolPolicy, ToolRuntime};
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::ToolPolicyMiddleware;
use tinyagents::prelude::*;
use tinyagents::sandbox::{Sandbox, SandboxCommand, SandboxLimits, SandboxMode, SandboxPolicy, ShellTool, Termination};

use sandbox_support::{sandbox_available, sh, Workspace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordinary_commands_work() {
    if !sandbox_available("ordinary_commands_work") {
        return;
    }
    let ws = Workspace::new("ordinary");
    let sandbox = ws.sandbox();
    // (command line, text its stdout must contain)
    let cases = [
        ("ls", "hello.txt"),
        ("ls -la .", "hello.txt"),
        ("cat hello.txt", "hello sandbox"),
        ("grep -n second hello.txt", "2:second line"),
        ("grep -c line hello.txt", "1"),
        ("wc -l hello.txt", "2 hello.txt"),
        ("head -n1 hello.txt | tr a-z A-Z", "HELLO SANDBOX"),
        ("sort -r hello.txt | head -n1", "second line"),
        ("echo made > out.txt && cat out.txt", "made"),
        ("mkdir -p a/b/c && touch a/b/c/f && find a -type f", "a/b/c/f"),
        (
            "cp hello.txt copy.txt && mv copy.txt moved.txt && rm moved.txt && ls",
            "hello.txt",
        ),
        ("date +%Y-%m-%d", "-"),
        ("printf '%s-%s' a b", "a-b"),
        ("stat -c %s hello.txt", "26"),
        ("echo $HOME", "tinyagents-sandbox-"),
        ("echo x > $HOME/f && cat $HOME/f", "x"),
        ("echo t > $TMPDIR/t && cat $TMPDIR/t", "t"),
        ("mktemp", "/"),
        ("sed 's/hello/bye/' hello.txt", "bye sandbox"),
        ("awk '{print $2}' hello.txt", "sandbox"),
        ("sha256sum hello.txt", "hello.txt"),
        ("diff hello.txt hello.txt && echo same", "same"),
        ("tar cf t.tar hello.txt && tar tf t.tar", "hello.txt"),
        ("id -u", ""),
        ("perl -e 'print 6*7'", "42"),
        ("echo hi > /dev/null && echo ok", "ok"),
        ("head -c 4 /dev/urandom | wc -c", "4"),
        ("ls /usr/bin | grep -c .", ""),
        ("git --version", "git version"),
    ];
    for (line, expect) in cases {
        let out = sh(&sandbox, line).await;
        assert!(out.success(), "`{line}` failed: {}", out.render());
        assert!(out.stdout_text().contains(expect), "`{line}`: {}", out.render());
        assert!(out.confined);
    }
    println!(
        "ordinary sandboxed commands tried: {}, worked: {}",
        cases.len(),
        cases.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_works_in_a_repository_inside_the_root() {
    if !sandbox_available("git_works_in_a_repository_inside_the_root") {
        return;
    }
    let ws = Workspace::new("git");
    // made by the person: a sandboxed command may not create a `.git` at any
    // depth (`sandbox_protected_depth`), but works in one that exists
    let init = std::process::Command::new("git")
        .args(["init", "-q", "repo"])
        .current_dir(&ws.root)
        .status()
        .unwrap();
    assert!(init.success());
    let sandbox = ws.sandbox();
    let steps = [
        "cd repo && echo a > a.txt && git add a.txt",
        "cd repo && git -c user.name=t -c user.email=t@example.invalid commit -qm first",
        "cd repo && echo b > b.txt && git status --short",
        "cd repo && git log --oneline",
        "cd repo && git diff --stat HEAD",
        // Threads (clone3 answers ENOSYS, the C library falls back to clone).
        "cd repo && git grep --threads=4 -n a",
    ];
    let mut last = String::new();
    for line in steps {
        let out = sh(&sandbox, line).await;
        assert!(out.success(), "`{line}` failed: {}", out.render());
        last = format!("{last}{}", out.stdout_text());
    }
    assert!(last.contains("?? b.txt"), "{last}");
    assert!(last.contains("first"), "{last}");
    let out = sandbox
        .run(SandboxCommand::new(["git", "status", "--short"]).with_cwd("repo"))
        .await
        .unwrap();
    assert_eq!(out.stdout_text().trim(), "?? b.txt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_exit_status_and_environment() {
    if !sandbox_available("stdin_exit_status_and_environment") {
        return;
    }
    let ws = Workspace::new("io");
    let sandbox = ws.sandbox();
    let out = sandbox
        .run(SandboxCommand::new(["cat"]).with_stdin(b"from stdin".to_vec()))
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "from stdin");
    let out = sh(&sandbox, "echo oops >&2; exit 3").await;
    assert_eq!(out.termination, Termination::Exited(3));
    assert_eq!(out.stderr_text(), "oops\n");
    assert!(out.render().starts_with("exit status 3"));

    // The environment is the allow list plus HOME/TMPDIR: cargo's variables
    // (set for this test process) do not pass, unless allowed by name.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let out = sh(&sandbox, "env").await;
    let env = out.stdout_text();
    assert!(!env.contains("CARGO_MANIFEST_DIR"), "{env}");
    assert!(
        env.contains("HOME=") && env.contains("TMPDIR=") && env.contains("PATH="),
        "{env}"
    );
    let names: Vec<&str> = env.lines().filter_map(|l| l.split_once('=').map(|(n, _)| n)).collect();
    for name in &names {
        assert!(
            [
                "PATH",
                "LANG",
                "LANGUAGE",
                "LC_ALL",
                "LC_CTYPE",
                "LC_MESSAGES",
                "TERM",
                "TZ",
                "HOME",
                "TMPDIR",
                "PWD",
                "MODE"
            ]
            .contains(name),
            "`{name}` reached the command"
        );
    }
    let allowed = Sandbox::new(ws.policy().with_env_allowed("CARGO_MANIFEST_DIR")).unwrap();
    let out = sandbox_run_env(&allowed).await;
    assert!(out.contains("CARGO_MANIFEST_DIR="), "{out}");
    let out = sandbox
        .run(SandboxCommand::shell("echo $MODE").with_env("MODE", "strict"))
        .await
        .unwrap();
    assert_eq!(out.stdout_text(), "strict\n");
    // The per-call HOME is gone after the call.
    let out = sh(&sandbox, "echo $HOME").await;
    assert!(!std::path::Path::new(out.stdout_text().trim()).exists());
}

async fn sandbox_run_env(sandbox: &Sandbox) -> String {
    sandbox.run(SandboxCommand::new(["env"])).await.unwrap().stdout_text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_command_timeout_only_narrows() {
    if !sandbox_available("a_per_command_timeout_only_narrows") {
        return;
    }
    let ws = Workspace::new("timeout");
    let sandbox = ws.sandbox_with(SandboxLimits {
        wall_time: Duration::from_secs(2),
        ..SandboxLimits::default()
    });
    let out = sandbox
        .run(SandboxCommand::new(["sleep", "30"]).with_timeout(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(out.termination, Termination::TimedOut);
    assert_eq!(out.wall_time, Duration::from_secs(2));
}

fn shell_agent(ws: &Workspace, tool: ShellTool, turns: Vec<ScriptedTurn>) -> (Arc<ScriptedModel>, Agent<()>) {
    let model = Arc::new(ScriptedModel::new(turns));
    let tools = ToolRegistry::new().with(tool).unwrap();
    let policy = ToolPolicyMiddleware::strict(tools.policies()).require_sandbox(true);
    let _ = ws;
    let agent = Agent::from_shared(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(policy).unwrap());
    (model, agent)
}

fn tool_texts(model: &ScriptedModel) -> Vec<String> {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_tool_runs_in_the_sandbox_inside_an_agent() {
    if !sandbox_available("shell_tool_runs_in_the_sandbox_inside_an_agent") {
        return;
    }
    let ws = Workspace::new("tool");
    let tool = ShellTool::new(ws.policy()).unwrap();
    let policy = tool.policy();
    assert_eq!(policy.runtime.sandbox, SandboxMode::Required);
    assert!(policy.side_effects.contains(SideEffects::EXECUTE));
    assert!(!policy.side_effects.contains(SideEffects::NETWORK));
    let outside = ws.outside.display().to_string();
    let (model, agent) = shell_agent(
        &ws,
        tool,
        vec![
            ScriptedTurn::tool_calls(vec![
                ToolCall::new("1", "shell", json!({ "command": "cat hello.txt" })),
                ToolCall::new("2", "shell", json!({ "command": format!("echo x > {outside}/x") })),
                ToolCall::new("3", "shell", json!({ "argv": ["ls"] })),
                ToolCall::new("4", "shell", json!({ "command": "pwd", "cwd": ".." })),
            ]),
            ScriptedTurn::text("done"),
        ],
    );
    let ctx_ws = WorkspaceDescriptor::new(&ws.root).with_sandbox(SandboxMode::Required);
    let run = agent
        .run(
            &mut RunContext::new(RunConfig::new("r"), ()).with_workspace(ctx_ws),
            &(),
            "go",
        )
        .await
        .unwrap();
    assert_eq!(run.final_text(), "done");
    let texts = tool_texts(&model);
    assert!(
        texts[0].starts_with("exit status 0") && texts[0].contains("hello sandbox"),
        "{}",
        texts[0]
    );
    // The tool reads the line itself (no guard in front) with the guard's
    // parser and rules: the redirection outside the root never runs.
    assert!(
        texts[1].contains("refused the command") && texts[1].contains("outside the workspace root"),
        "{}",
        texts[1]
    );
    assert!(ws.outside_files().is_empty());
    assert!(texts[2].contains("unknown argument `argv`"), "{}", texts[2]);
    assert!(texts[3].contains("working directory"), "{}", texts[3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_tool_is_refused_without_a_sandboxed_workspace_and_read_only_holds() {
    if !sandbox_available("shell_tool_is_refused_without_a_sandboxed_workspace_and_read_only_holds") {
        return;
    }
    let ws = Workspace::new("tool-ws");
    let turns = || {
        vec![
            ScriptedTurn::tool_call("shell", json!({ "command": "echo x > made.txt" })),
            ScriptedTurn::text("done"),
        ]
    };
    // No sandboxed workspace: the policy refuses the call, nothing runs.
    let (model, agent) = shell_agent(&ws, ShellTool::new(ws.policy()).unwrap(), turns());
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert!(
        tool_texts(&model)[0].contains("requires a sandbox"),
        "{:?}",
        tool_texts(&model)
    );
    assert!(!ws.root.join("made.txt").exists());
    // A read-only workspace: the tool's own reading refuses the write, and
    // under the `/bin/sh` opt-out the kernel does.
    for shell in [false, true] {
        let (model, agent) = shell_agent(&ws, ShellTool::new(ws.policy()).unwrap().with_shell(shell), turns());
        let ro = WorkspaceDescriptor::new(&ws.root)
            .with_sandbox(SandboxMode::Required)
            .read_only(true);
        agent
            .run(
                &mut RunContext::new(RunConfig::new("r"), ()).with_workspace(ro),
                &(),
                "go",
            )
            .await
            .unwrap();
        let text = &tool_texts(&model)[0];
        if shell {
            assert!(refused_by_the_kernel(text), "{text}");
        } else {
            assert!(text.contains("the guard is read-only"), "{text}");
        }
        assert!(!ws.root.join("made.txt").exists());
    }
    // Another workspace root: refused, naming both.
    let other = Workspace::new("tool-other");
    let (model, agent) = shell_agent(&ws, ShellTool::new(ws.policy()).unwrap(), turns());
    let elsewhere = WorkspaceDescriptor::new(&other.root).with_sandbox(SandboxMode::Required);
    agent
        .run(
            &mut RunContext::new(RunConfig::new("r"), ()).with_workspace(elsewhere),
            &(),
            "go",
        )
        .await
        .unwrap();
    assert!(tool_texts(&model)[0].contains("rooted at"), "{:?}", tool_texts(&model));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argv_mode_and_unsandboxed_executors_in_a_sandboxed_workspace() {
    if !sandbox_available("argv_mode_and_unsandboxed_executors_in_a_sandboxed_workspace") {
        return;
    }
    let ws = Workspace::new("argv");
    let tool = ShellTool::new(ws.policy()).unwrap().with_argv(true);
    assert!(tool.schema().parameters["properties"].get("argv").is_some());
    let (model, agent) = shell_agent(
        &ws,
        tool,
        vec![
            ScriptedTurn::tool_call("shell", json!({ "argv": ["grep", "second", "hello.txt"] })),
            ScriptedTurn::text("done"),
        ],
    );
    let sandboxed = WorkspaceDescriptor::new(&ws.root).with_sandbox(SandboxMode::Required);
    agent
        .run(
            &mut RunContext::new(RunConfig::new("r"), ()).with_workspace(sandboxed.clone()),
            &(),
            "go",
        )
        .await
        .unwrap();
    assert!(
        tool_texts(&model)[0].contains("second line"),
        "{:?}",
        tool_texts(&model)
    );

    // A tool that executes but does not run in the sandbox is refused in a
    // workspace that requires one.
    let mut policies = HashMap::new();
    policies.insert(
        "raw_exec".to_owned(),
        ToolPolicy::classified()
            .with_side_effects(SideEffects::EXECUTE)
            .with_runtime(ToolRuntime::default()),
    );
    let mw = ToolPolicyMiddleware::new(policies);
    let reason = mw.decide("raw_exec", Some(&sandboxed)).unwrap_err();
    assert!(reason.contains("without declaring SandboxMode::Required"), "{reason}");
    assert!(mw.decide("raw_exec", Some(&WorkspaceDescriptor::new(&ws.root))).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opt_out_runs_unconfined_but_bounded_and_says_so() {
    let ws = Workspace::new("off");
    let sandbox = Sandbox::new(ws.policy().with_mode(SandboxMode::Off)).unwrap();
    let out = sh(&sandbox, "cat hello.txt; yes").await;
    assert!(!out.confined);
    assert_eq!(out.termination, Termination::OutputLimit);
    assert!(out.stdout_text().starts_with("hello sandbox"));
    let tool = ShellTool::new(ws.policy().with_mode(SandboxMode::Off)).unwrap();
    assert_eq!(tool.policy().runtime.sandbox, SandboxMode::Off);
    // It may not run where the workspace requires a sandbox.
    let mw = ToolPolicyMiddleware::new(ToolRegistry::new().with(tool).unwrap().policies());
    let sandboxed = WorkspaceDescriptor::new(&ws.root).with_sandbox(SandboxMode::Required);
    assert!(mw.decide("shell", Some(&sandboxed)).is_err());
}

#[test]
fn bad_policies_are_refused_at_construction() {
    let err = Sandbox::new(SandboxPolicy::new("/definitely/not/here")).unwrap_err();
    assert!(err.to_string().contains("must be an existing directory"), "{err}");
    let err = Sandbox::new(SandboxPolicy::new("/")).unwrap_err();
    assert!(err.to_string().contains("other than `/`"), "{err}");
    let ws = Workspace::new("bad");
    let zero = SandboxLimits {
        output_bytes: 0,
        ..SandboxLimits::default()
    };
    let err = Sandbox::new(ws.policy().with_limits(zero)).unwrap_err();
    assert!(err.to_string().contains("output_bytes"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preferred_confines_where_the_machine_can() {
    if !sandbox_available("preferred_confines_where_the_machine_can") {
        return;
    }
    let ws = Workspace::new("preferred");
    let sandbox = Sandbox::new(ws.policy().with_mode(SandboxMode::Preferred)).unwrap();
    let out = sh(&sandbox, &format!("cat {}/secret.txt", ws.outside.display())).await;
    assert!(out.confined);
    assert!(!out.success() && !out.render().contains(&ws.secret), "{}", out.render());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_command_output_limits_only_narrow() {
    if !sandbox_available("per_command_output_limits_only_narrow") {
        return;
    }
    let ws = Workspace::new("caps");
    let sandbox = ws.sandbox();
    let fits = sandbox
        .run(SandboxCommand::shell("printf 0123456789; echo err >&2").with_output_limits(10, 4))
        .await
        .unwrap();
    assert!(fits.success(), "{}", fits.render());
    assert_eq!(
        (fits.stdout.as_slice(), fits.stderr.as_slice()),
        (&b"0123456789"[..], &b"err\n"[..])
    );
    let over = sandbox
        .run(SandboxCommand::shell("echo fine; echo toolong >&2").with_output_limits(10, 4))
        .await
        .unwrap();
    assert_eq!(over.termination, Termination::OutputLimit);
    assert!(over.stderr_truncated && !over.stdout_truncated);
    assert_eq!(over.stderr, b"tool");
    assert!(
        over.status_line().contains("stderr passed the sandbox cap of 4 bytes"),
        "{}",
        over.status_line()
    );
    // Larger than the policy's cap: the policy's cap holds.
    let wide = sandbox
        .run(SandboxCommand::shell("true").with_output_limits(usize::MAX, usize::MAX))
        .await
        .unwrap();
    assert_eq!(wide.stdout_cap, sandbox.policy().limits.output_bytes);
}

/// A write the kernel refused: Landlock answers `EACCES`, the read-only
/// mounts (where the machine gives them) `EROFS` first.
fn refused_by_the_kernel(text: &str) -> bool {
    // (a directory outside the workspace is hidden: to the command it does not exist)
    text.contains("Permission denied")
        || text.contains("Read-only file system")
        || text.contains("nonexistent")
        || text.contains("No such file")
}

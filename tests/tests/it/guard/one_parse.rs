//! What the guard checks is what runs: the default `shell_fs_guard` in
//! front of `ShellTool`, in the sandbox, through the public API. The
//! attacks here got through while `/bin/sh` (or sed's own parser) read an
//! admitted line a second time: sed's bracket expressions, and globs
//! expanded again after an earlier pipeline stage had created a file.

use crate::sandbox::support as sandbox_support;

use std::path::Path;
use std::process::Command;

use serde_json::json;
use tinyagents::harness::tool::ToolCall;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::ShellFsGuardMiddleware;
use tinyagents::sandbox::RedirectTarget;

use sandbox_support::{model_runs, sandbox_available, Workspace};

fn git_repo(root: &Path) {
    let out = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn plan(root: &Path, command: &str) -> Result<tinyagents::sandbox::ShellPlan, String> {
    ShellFsGuardMiddleware::new()
        .plan_call(
            &ToolCall::new("c", "shell", json!({ "command": command })),
            Some(&WorkspaceDescriptor::new(root)),
        )
        .map(|p| p.expect("a shell call has a plan"))
}

/// The eleven sed spellings that hid `e`, `w`, `W` or `r` behind a bracket
/// expression or a custom delimiter: each is refused by the guard or runs
/// harmlessly (GNU sed's `--sandbox`), and the ordinary `[^/]` script runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sed_bracket_and_delimiter_spellings_cannot_run_write_or_read() {
    if !sandbox_available("sed_bracket_and_delimiter_spellings_cannot_run_write_or_read") {
        return;
    }
    let ws = Workspace::new("sed-brackets");
    git_repo(&ws.root);
    let config = std::fs::read(ws.root.join(".git/config")).unwrap();
    std::fs::write(ws.root.join("cmd.txt"), "touch pwned\n").unwrap();
    std::fs::write(ws.root.join("cfg.txt"), "[core]\n\tfsmonitor = touch pwned\n").unwrap();
    std::fs::write(ws.root.join("paths.txt"), "src/a/b.rs\nlib/c.rs\n").unwrap();
    let secret = ws.outside_path("secret.txt").display().to_string();
    let attacks = [
        "sed '/[/a]/e' cmd.txt".to_owned(),
        "sed -n 's/[/]/g;/w .git/config' cfg.txt".to_owned(),
        "sed 's/[/]/x/w pwned' cmd.txt".to_owned(),
        "sed '/[/]/W pwned' cmd.txt".to_owned(),
        format!("sed '/[/]/r {secret}' cmd.txt"),
        "sed '\\,[,],e' cmd.txt".to_owned(),
        "sed 's|[|]|x|e' cmd.txt".to_owned(),
        "sed '/[[:alpha:]/]/e' cmd.txt".to_owned(),
        "sed 's^[^^]^x^w pwned' cmd.txt".to_owned(),
        "sed -e '/[/a]/e touch pwned' cmd.txt".to_owned(),
        "sed --expression='/[]/]/w pwned' cmd.txt".to_owned(),
    ];
    let mut calls: Vec<(&str, &str)> = attacks.iter().map(|a| ("", a.as_str())).collect();
    calls.push(("", "sed 's/[^/]*$//' paths.txt"));
    let texts = model_runs(&ws, &calls).await;
    assert_eq!(texts.len(), calls.len(), "{texts:?}");
    for (attack, text) in attacks.iter().zip(&texts) {
        assert!(!text.contains(&ws.secret), "{attack}: {text}");
        assert!(
            text.contains("refused") || text.contains("disabled in sandbox mode"),
            "{attack}: neither refused nor stopped by sed: {text}"
        );
    }
    assert!(!ws.root.join("pwned").exists());
    assert_eq!(std::fs::read(ws.root.join(".git/config")).unwrap(), config);
    let last = texts.last().unwrap();
    assert!(
        last.starts_with("exit status 0") && last.contains("src/a/\nlib/"),
        "{last}"
    );
}

/// `echo > -delete | find . ?delete`: under `/bin/sh`, the shell expanded
/// `?delete` after stage one had made `-delete`, and find deleted the
/// workspace. Now the glob is expanded once, at check time, and a match
/// beginning with `-` reaches the program as `./-delete`: run twice (the
/// second time the file exists when the guard checks), nothing is deleted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_made_by_an_earlier_stage_cannot_become_an_option_of_a_later_one() {
    if !sandbox_available("a_file_made_by_an_earlier_stage_cannot_become_an_option_of_a_later_one") {
        return;
    }
    let ws = Workspace::new("glob-race");
    git_repo(&ws.root);
    std::fs::write(ws.root.join("a.txt"), "b\na\n").unwrap();
    std::fs::write(ws.root.join("x.sh"), "touch pwned\n").unwrap();
    std::fs::write(ws.root.join("--expression=1e sh x.sh"), "one\n").unwrap();
    let calls = [
        ("", "echo > -delete | find . ?delete"),
        ("", "echo > -delete | find . ?delete"),
        ("", "echo > -o.envrc | sort a.txt ?o.envrc"),
        ("", "echo > -o.envrc | sort a.txt ?o.envrc"),
        ("", "sed -n 1p *x.sh"),
    ];
    let texts = model_runs(&ws, &calls).await;
    assert_eq!(texts.len(), calls.len(), "{texts:?}");
    for name in [".git/HEAD", "a.txt", "x.sh", "hello.txt", "-delete"] {
        assert!(ws.root.join(name).exists(), "`{name}` was deleted: {texts:?}");
    }
    assert!(!ws.root.join(".envrc").exists(), "{texts:?}");
    assert!(!ws.root.join("pwned").exists(), "{texts:?}");
    // the second find named the file the first stage made, as a path
    assert!(texts[1].contains("./-delete"), "{}", texts[1]);
    // sort read `./-o.envrc` as a file (an empty line) and wrote nothing
    assert!(texts[3].starts_with("exit status 0"), "{}", texts[3]);
    // sed printed the first line of each file, the odd name included
    assert!(
        texts[4].starts_with("exit status 0") && texts[4].contains("one"),
        "{}",
        texts[4]
    );
    let p = plan(&ws.root, "sed -n 1p *x.sh").unwrap();
    assert!(
        p.stages()[0].argv().iter().any(|a| a == "./--expression=1e sh x.sh"),
        "{:?}",
        p.stages()[0].argv()
    );
}

/// Pipes, redirections and `2>&1` are the runner's own, as sh applies them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_and_redirections_run_without_a_shell() {
    if !sandbox_available("pipelines_and_redirections_run_without_a_shell") {
        return;
    }
    let ws = Workspace::new("plan-exec");
    let calls = [
        ("", "cat hello.txt | grep second | wc -l"),
        ("", "grep -c line hello.txt > count.txt"),
        ("", "ls missing-file > both.txt 2>&1"),
        ("", "wc -l < hello.txt"),
        ("", "echo more >> count.txt"),
        ("", "ls missing-file 2>&1 | wc -l"),
    ];
    let texts = model_runs(&ws, &calls).await;
    assert!(
        texts[0].starts_with("exit status 0") && texts[0].contains('1'),
        "{}",
        texts[0]
    );
    assert_eq!(std::fs::read_to_string(ws.root.join("count.txt")).unwrap(), "1\nmore\n");
    let both = std::fs::read_to_string(ws.root.join("both.txt")).unwrap();
    assert!(both.contains("missing-file"), "{both}");
    assert!(texts[2].starts_with("exit status 2"), "{}", texts[2]);
    assert!(texts[3].contains('2'), "{}", texts[3]);
    assert!(
        texts[5].starts_with("exit status 0") && texts[5].contains('1'),
        "{}",
        texts[5]
    );
}

/// A redirection target swapped for a symlink between the check and the run
/// is not followed: the runner opens the file the guard judged or nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirection_swapped_after_the_check_is_refused() {
    if !sandbox_available("a_redirection_swapped_after_the_check_is_refused") {
        return;
    }
    let ws = Workspace::new("plan-swap");
    std::fs::create_dir(ws.root.join("d")).unwrap();
    let p = plan(&ws.root, "echo hi > d/out.txt").unwrap();
    assert!(matches!(
        p.stages()[0].redirects()[0].target(),
        RedirectTarget::Write(path) if path.ends_with("d/out.txt")
    ));
    // the file becomes a symlink out of the workspace
    std::os::unix::fs::symlink(ws.outside_path("stolen.txt"), ws.root.join("d/out.txt")).unwrap();
    let err = ws.sandbox().run_plan(&p).await.unwrap_err().to_string();
    assert!(err.contains("cannot be opened"), "{err}");
    // the directory on the way becomes a symlink out of the workspace
    std::fs::remove_file(ws.root.join("d/out.txt")).unwrap();
    std::fs::remove_dir(ws.root.join("d")).unwrap();
    std::os::unix::fs::symlink(&ws.outside, ws.root.join("d")).unwrap();
    let err = ws.sandbox().run_plan(&p).await.unwrap_err().to_string();
    assert!(err.contains("not the directory the guard checked"), "{err}");
    // nothing was created or written outside
    assert!(ws.outside_files().is_empty(), "{:?}", ws.outside_files());
}

/// Every stage runs in its program's safe mode, whatever the model wrote.
#[test]
fn admitted_plans_carry_the_safe_modes() {
    let ws = Workspace::new("plan-safe");
    git_repo(&ws.root);
    let p = plan(&ws.root, "git diff HEAD | sed -n p").unwrap();
    let git = p.stages()[0].argv();
    for switch in [
        "--no-pager",
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "--no-ext-diff",
    ] {
        assert!(git.iter().any(|a| a == switch), "{switch} in {git:?}");
    }
    assert_eq!(p.stages()[1].argv()[..2], ["sed", "--sandbox"]);
    assert_eq!(p.cwd(), ws.root.canonicalize().unwrap());
    // git is pinned to the repository the guard judged, and its keys that
    // name programs are overridden
    let root = ws.root.canonicalize().unwrap();
    for switch in [
        format!("--git-dir={}", root.join(".git").display()),
        format!("--work-tree={}", root.display()),
        "safe.bareRepository=explicit".to_owned(),
        "core.alternateRefsCommand=true".to_owned(),
        "gpg.program=false".to_owned(),
    ] {
        assert!(git.contains(&switch), "{switch} in {git:?}");
    }
    std::fs::create_dir_all(root.join("sub")).unwrap();
    let in_sub = ShellFsGuardMiddleware::new()
        .plan_call(
            &ToolCall::new("c", "shell", json!({ "command": "git status", "cwd": "sub" })),
            Some(&WorkspaceDescriptor::new(&root)),
        )
        .unwrap()
        .unwrap();
    let pinned = format!("--git-dir={}", root.join(".git").display());
    assert!(
        in_sub.stages()[0].argv().contains(&pinned),
        "{:?}",
        in_sub.stages()[0].argv()
    );
    // `git --version` needs no repository
    assert!(plan(&root, "git --version").unwrap().stages()[0]
        .argv()
        .iter()
        .all(|a| !a.starts_with("--git-dir")));
    let err = plan(&ws.root, "sed '/[/a]/e' f").unwrap_err();
    assert!(err.contains("`e` command"), "{err}");
}

/// A linked worktree (a `.git` gitlink into the repository's
/// `.git/worktrees`) is pinned too: git runs with that git directory and
/// the worktree's own top, from any directory below it, and runs there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_in_a_linked_worktree_is_pinned_to_its_git_directory() {
    if !sandbox_available("git_in_a_linked_worktree_is_pinned_to_its_git_directory") {
        return;
    }
    let ws = Workspace::new("plan-worktree");
    sandbox_support::committed_repo(&ws.root);
    sandbox_support::git(&ws.root, &["worktree", "add", "-q", "wt"]);
    let root = ws.root.canonicalize().unwrap();
    std::fs::create_dir_all(root.join("wt/deep")).unwrap();
    let p = ShellFsGuardMiddleware::new()
        .plan_call(
            &ToolCall::new(
                "c",
                "shell",
                json!({ "command": "git rev-parse --show-toplevel", "cwd": "wt/deep" }),
            ),
            Some(&WorkspaceDescriptor::new(&root)),
        )
        .unwrap()
        .unwrap();
    let argv = p.stages()[0].argv();
    let git_dir = format!("--git-dir={}", root.join(".git/worktrees/wt").display());
    let work_tree = format!("--work-tree={}", root.join("wt").display());
    assert!(argv.contains(&git_dir) && argv.contains(&work_tree), "{argv:?}");
    let texts = model_runs(&ws, &[("wt/deep", "git rev-parse --show-toplevel --show-prefix")]).await;
    let expected = format!("--- stdout ---\n{}\ndeep/\n", root.join("wt").display());
    assert!(
        texts[0].starts_with("exit status 0") && texts[0].contains(&expected),
        "{texts:?}"
    );
}

/// The `workspace` profile: with the sandbox required, a coding agent
/// commits its work, runs the project's `make` and its build script; the
/// default profile still refuses all three, and so does the workspace
/// profile where the run's workspace does not require the sandbox.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workspace_profile_commits_makes_and_builds_in_the_sandbox() {
    if !sandbox_available("the_workspace_profile_commits_makes_and_builds_in_the_sandbox") {
        return;
    }
    let ws = Workspace::new("profile");
    git_repo(&ws.root);
    for (k, v) in [("user.name", "agent"), ("user.email", "agent@example.com")] {
        let out = Command::new("git")
            .args(["config", k, v])
            .current_dir(&ws.root)
            .output()
            .unwrap();
        assert!(out.status.success());
    }
    std::fs::write(ws.root.join("Makefile"), "out.txt:\n\techo made > out.txt\n").unwrap();
    std::fs::write(ws.root.join("build.sh"), "echo built > built.txt\n").unwrap();
    let calls = [
        ("", "git add hello.txt Makefile build.sh"),
        ("", "git commit -q -m 'first commit'"),
        ("", "git checkout -b feature"),
        ("", "make out.txt"),
        ("", "sh build.sh"),
        ("", "git log --oneline"),
        ("", "git status --short"),
    ];
    let texts = sandbox_support::model_runs_with(&ws, ShellFsGuardMiddleware::workspace(), &calls).await;
    for (call, text) in calls.iter().zip(&texts) {
        assert!(text.starts_with("exit status 0"), "{}: {text}", call.1);
    }
    assert!(texts[5].contains("first commit"), "{}", texts[5]);
    assert_eq!(std::fs::read_to_string(ws.root.join("out.txt")).unwrap(), "made\n");
    assert_eq!(std::fs::read_to_string(ws.root.join("built.txt")).unwrap(), "built\n");
    let head = std::fs::read_to_string(ws.root.join(".git/HEAD")).unwrap();
    assert!(head.contains("refs/heads/feature"), "{head}");

    // the default profile refuses them, naming why
    let root = ws.root.canonicalize().unwrap();
    for command in ["git commit -m x", "make out.txt", "sh build.sh", "git checkout -b x"] {
        let err = plan(&root, command).unwrap_err();
        assert!(err.contains("refused") || err.contains("not"), "{command}: {err}");
    }
    // the workspace profile without a required sandbox refuses them too
    let guard = ShellFsGuardMiddleware::workspace();
    let unsandboxed = WorkspaceDescriptor::new(&root);
    for command in ["make out.txt", "sh build.sh", "git commit -m x", "cargo build"] {
        let call = ToolCall::new("c", "shell", json!({ "command": command }));
        assert!(guard.check_call(&call, Some(&unsandboxed)).is_err(), "{command}");
    }
    // and it still refuses what runs code given inline, sandbox or not
    let sandboxed = unsandboxed
        .clone()
        .with_sandbox(tinyagents::sandbox::SandboxMode::Required);
    for command in [
        "sh -c 'id'",
        "sh",
        "npm install",
        "npm exec x",
        "make -C /tmp",
        "git config core.pager x",
    ] {
        let call = ToolCall::new("c", "shell", json!({ "command": command }));
        assert!(guard.check_call(&call, Some(&sandboxed)).is_err(), "{command}");
    }
    for command in [
        "npm run test -- --watch",
        "cargo build",
        "git stash",
        "git switch -c b2",
        "git restore hello.txt",
    ] {
        let call = ToolCall::new("c", "shell", json!({ "command": command }));
        assert!(
            guard.check_call(&call, Some(&sandboxed)).is_ok(),
            "{command}: {:?}",
            guard.check_call(&call, Some(&sandboxed))
        );
    }
}

/// A sub-agent whose own stack holds no shell guard still runs the plan
/// its inherited guard admitted: the agent loop's last check records it for
/// the call, and only for exactly the arguments judged.
#[test]
fn an_inherited_guard_hands_its_plan_to_the_shell_tool() {
    use std::sync::Arc;
    use tinyagents::harness::context::{RunConfig, RunContext};
    use tinyagents::harness::tool::{Restriction, RunRestrictions, ToolContext};
    use tinyagents::sandbox::{admitted_plan, SandboxMode};

    let ws = Workspace::new("inherited-plan");
    let root = ws.root.canonicalize().unwrap();
    let restrictions = RunRestrictions::new().with(
        "shell_fs_guard",
        Restriction::Guard(Arc::new(ShellFsGuardMiddleware::workspace())),
    );
    let ctx: RunContext = RunContext::new(RunConfig::new("child"), ())
        .with_workspace(WorkspaceDescriptor::new(&root).with_sandbox(SandboxMode::Required))
        .with_inherited_restrictions(Arc::new(restrictions));
    let call = ToolCall::new("c1", "shell", json!({ "command": "make -j2 all | tail -n 5" }));
    ctx.policy().check_call(&call, None).unwrap();
    let cx = ToolContext::new("c1", ctx.as_parent(), None);
    let plan = admitted_plan(&cx, &call.arguments).expect("the inherited guard's plan");
    assert_eq!(plan.stages().len(), 2);
    assert_eq!(plan.stages()[0].argv(), ["make", "-j2", "all"]);
    // other arguments under the same id, or another id: no plan
    assert!(admitted_plan(&cx, &json!({ "command": "make other" })).is_none());
    let other = ToolContext::new("c2", ctx.as_parent(), None);
    assert!(admitted_plan(&other, &call.arguments).is_none());
    // a refused call records nothing
    let refused = ToolCall::new("c3", "shell", json!({ "command": "sh -c id" }));
    assert!(ctx.policy().check_call(&refused, None).is_err());
    let cx3 = ToolContext::new("c3", ctx.as_parent(), None);
    assert!(admitted_plan(&cx3, &refused.arguments).is_none());
}

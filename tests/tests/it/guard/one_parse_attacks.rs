//! What is checked is what runs, attacked end to end: `shell_fs_guard` in
//! front of `ShellTool`, in the sandbox, through the public API. Each test
//! is one way an admitted call ran something other than the plan the guard
//! judged: a program name found in the workspace through `PATH`, a git
//! subcommand that diffs without the safe-mode switches, and arguments
//! rewritten after the guard judged them.

use crate::sandbox::support as sandbox_support;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::{ShellFsGuardMiddleware, ToolPolicyMiddleware};
use tinyagents::prelude::*;
use tinyagents::sandbox::{SandboxMode, SandboxPolicy, ShellTool};

use sandbox_support::{git, sandbox_available, Workspace};

/// Runs `commands` (one model turn each) through `ShellTool` under `policy`,
/// behind `stack` and a strict `tool_policy`; returns each result text.
async fn runs(ws: &Workspace, policy: SandboxPolicy, stack: MiddlewareStack<()>, commands: &[&str]) -> Vec<String> {
    let tools = ToolRegistry::new().with(ShellTool::new(policy).unwrap()).unwrap();
    let strict = ToolPolicyMiddleware::strict(tools.policies()).require_sandbox(true);
    let mut turns: Vec<ScriptedTurn> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| ScriptedTurn::tool_calls(vec![ToolCall::new(format!("c{i}"), "shell", json!({ "command": c }))]))
        .collect();
    turns.push(ScriptedTurn::text("done"));
    let model = Arc::new(ScriptedModel::new(turns));
    let agent: Agent<()> = Agent::from_shared(model.clone())
        .with_tools(tools)
        .with_stack(stack.with(strict).unwrap());
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

fn guarded() -> MiddlewareStack<()> {
    MiddlewareStack::new().with(ShellFsGuardMiddleware::new()).unwrap()
}

/// A `PATH` with a directory the workspace holds (a relative `node_modules/.bin`
/// or `bin`, or the workspace's own absolute `tools/`): the model rewrites an
/// executable script of the project, copies it to `bin/ls`, and the admitted
/// `ls` ran the model's program instead of the `ls` the guard judged. A plan's
/// program is found only in `PATH` directories outside the workspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_program_is_never_found_in_the_workspace_through_path() {
    if !sandbox_available("a_plan_program_is_never_found_in_the_workspace_through_path") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let ws = Workspace::new("path-hijack");
    for dir in ["bin", "tools", "scripts"] {
        std::fs::create_dir_all(ws.root.join(dir)).unwrap();
    }
    let script = ws.root.join("scripts/gen.sh");
    std::fs::write(&script, "#!/bin/sh\necho generated\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut policy = ws.policy();
    policy.env.insert(
        "PATH".to_owned(),
        format!("bin:{}:/usr/local/bin:/usr/bin:/bin", ws.root.join("tools").display()),
    );
    let texts = runs(
        &ws,
        policy,
        guarded(),
        &[
            "printf '#!/bin/sh\\ntouch pwned\\n' > scripts/gen.sh",
            "cp scripts/gen.sh bin/ls",
            "cp scripts/gen.sh tools/cat",
            "ls",
            "cat hello.txt",
        ],
    )
    .await;
    assert_eq!(texts.len(), 5, "{texts:?}");
    assert!(texts[1].starts_with("exit status 0"), "{texts:?}");
    assert!(texts[2].starts_with("exit status 0"), "{texts:?}");
    assert!(
        !ws.root.join("pwned").exists(),
        "the workspace's program ran: {texts:?}"
    );
    // the system's programs ran instead
    assert!(
        texts[3].starts_with("exit status 0") && texts[3].contains("hello.txt"),
        "{}",
        texts[3]
    );
    assert!(texts[4].contains("hello sandbox"), "{}", texts[4]);
}

/// `git stash list -p` diffs like `git log -p`, but the safe mode put
/// `--no-ext-diff`/`--no-textconv` only after the subcommands it lists, and
/// `git status -v -v` diffs the work tree with no such switch: the
/// text-conversion program of the repository's configuration ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_diffing_subcommands_run_no_text_conversion_program() {
    if !sandbox_available("git_diffing_subcommands_run_no_text_conversion_program") {
        return;
    }
    let ws = Workspace::new("stash-ext-diff");
    git(&ws.root, &["init", "-q"]);
    git(&ws.root, &["add", "hello.txt"]);
    git(&ws.root, &["commit", "-q", "-m", "one"]);
    std::fs::write(ws.root.join("hello.txt"), "changed\n").unwrap();
    git(&ws.root, &["stash", "-q"]);
    std::fs::write(ws.root.join("hello.txt"), "changed again\n").unwrap();
    git(&ws.root, &["config", "diff.tc.textconv", "touch pwned-textconv; cat"]);
    std::fs::create_dir_all(ws.root.join(".git/info")).unwrap();
    std::fs::write(ws.root.join(".git/info/attributes"), "* diff=tc\n").unwrap();
    let texts = runs(
        &ws,
        ws.policy(),
        guarded(),
        &["git stash list -p", "git status -vv", "git status -v"],
    )
    .await;
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(
        !ws.root.join("pwned-textconv").exists(),
        "the textconv driver ran: {texts:?}"
    );
    assert!(
        texts[0].starts_with("exit status 0") && texts[0].contains("+changed"),
        "{texts:?}"
    );
    assert!(texts[1].contains("refused") && texts[1].contains("-v"), "{texts:?}");
    assert!(texts[2].starts_with("exit status 0"), "{texts:?}");
}

/// The guard's check that git uses a `.git` inside the root, and not a
/// directory it would take for a bare repository, runs before any stage of
/// the pipeline: earlier stages made `sub` a bare repository (`refs`,
/// `HEAD`; its `config`, naming `core.alternateRefsCommand`, and `objects`
/// were written by earlier admitted calls) and the git stage, started a
/// moment later, discovered it, and `git log --alternate-refs` ran the
/// command through the shell. git now runs pinned to the repository the
/// guard judged (`--git-dir`, `--work-tree`), whatever the pipeline makes
/// of the directories on the way; `--alternate-refs` is refused and the
/// key overridden in the safe mode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_runs_in_the_repository_the_guard_judged_not_one_a_pipeline_makes() {
    if !sandbox_available("git_runs_in_the_repository_the_guard_judged_not_one_a_pipeline_makes") {
        return;
    }
    let ws = Workspace::new("bare-race");
    sandbox_support::committed_repo(&ws.root);
    let calls = [
        ("", "mkdir -p sub/objects/info"),
        (
            "",
            "printf '[core]\\n\\talternateRefsCommand = touch pwned #\\n\\tfsmonitor = touch pwned-fsmonitor #\\n' > sub/config",
        ),
        ("", "echo ../../.git/objects > sub/objects/info/alternates"),
        ("", "echo 'ref: refs/heads/main' > sub/H"),
        ("sub", "mkdir refs | cat H > HEAD | git rev-parse --absolute-git-dir"),
        ("", "git log --alternate-refs --oneline"),
    ];
    let texts = sandbox_support::model_runs(&ws, &calls).await;
    for (call, text) in calls.iter().zip(&texts).take(5) {
        assert!(text.starts_with("exit status 0"), "{}: {text}", call.1);
    }
    let git_dir = ws.root.canonicalize().unwrap().join(".git");
    assert!(
        texts[4].contains(&format!("{}\n", git_dir.display())),
        "git used another repository than the one the guard judged: {}",
        texts[4]
    );
    assert!(
        texts[5].contains("refused") && texts[5].contains("alternates"),
        "{}",
        texts[5]
    );
    for pwned in ["pwned", "sub/pwned", "pwned-fsmonitor", "sub/pwned-fsmonitor"] {
        assert!(!ws.root.join(pwned).exists(), "{pwned}: {texts:#?}");
    }
}

/// `git stash show -p` diffs a stash like `git log -p`, and ran without
/// `--no-ext-diff`/`--no-textconv`: the repository's text-conversion
/// program ran (workspace profile, which admits `git stash show`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_stash_show_runs_no_text_conversion_program() {
    if !sandbox_available("git_stash_show_runs_no_text_conversion_program") {
        return;
    }
    let ws = Workspace::new("stash-show-textconv");
    sandbox_support::committed_repo(&ws.root);
    std::fs::write(ws.root.join("hello.txt"), "changed\n").unwrap();
    git(&ws.root, &["stash", "-q"]);
    git(&ws.root, &["config", "diff.tc.textconv", "touch pwned-textconv; cat"]);
    git(&ws.root, &["config", "diff.external", "touch pwned-external; true"]);
    std::fs::create_dir_all(ws.root.join(".git/info")).unwrap();
    std::fs::write(ws.root.join(".git/info/attributes"), "* diff=tc\n").unwrap();
    let calls = [("", "git stash show -p"), ("", "git stash show --stat")];
    let texts = sandbox_support::model_runs_with(&ws, ShellFsGuardMiddleware::workspace(), &calls).await;
    for pwned in ["pwned-textconv", "pwned-external"] {
        assert!(!ws.root.join(pwned).exists(), "{pwned} ran: {texts:?}");
    }
    assert!(
        texts[0].starts_with("exit status 0") && texts[0].contains("+changed"),
        "{texts:?}"
    );
    assert!(texts[1].starts_with("exit status 0"), "{texts:?}");
}

/// Rewrites call `c0`'s command after the guard judged it (as a
/// `pre_tool_use` hook's updated input does).
struct RewriteAfterGuard;

#[async_trait]
impl Middleware<()> for RewriteAfterGuard {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_TOOL
    }
    async fn before_tool(&self, _: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
        if call.id == "c0" {
            call.arguments = json!({ "command": "touch made.txt" });
        }
        Ok(())
    }
}

/// A read-only guard admitted `cat hello.txt`; a middleware after it turned
/// the call into `touch made.txt`, and the tool, finding no plan for those
/// arguments, judged them itself with the default rules (which write) and
/// ran them. Arguments changed after the guard judged the call are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_rewritten_after_the_guard_do_not_run() {
    if !sandbox_available("arguments_rewritten_after_the_guard_do_not_run") {
        return;
    }
    let ws = Workspace::new("rewrite-after-guard");
    let stack = MiddlewareStack::new()
        .with(ShellFsGuardMiddleware::new().read_only(true))
        .unwrap()
        .with(RewriteAfterGuard)
        .unwrap();
    let texts = runs(&ws, ws.policy(), stack, &["cat hello.txt"]).await;
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(!ws.root.join("made.txt").exists(), "the rewritten call ran: {texts:?}");
    assert!(texts[0].contains("changed after"), "{texts:?}");
}

/// A protected entry that is a path (`scripts/hooks`) guarded only writes
/// under it: `mv x/scripts .` moved a tree holding `scripts/hooks/pre-commit`
/// into the root and created it. A write to a directory such an entry lies
/// in (the root, `scripts`, at any depth) is refused; writes beside it still
/// run. (The trees are made outside the guard: `x/scripts/hooks` is itself
/// protected, at any depth.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_moved_into_place_cannot_create_a_protected_path() {
    if !sandbox_available("a_tree_moved_into_place_cannot_create_a_protected_path") {
        return;
    }
    let ws = Workspace::new("protected-by-move");
    for dir in ["x/scripts/hooks", "y/hooks"] {
        std::fs::create_dir_all(ws.root.join(dir)).unwrap();
        std::fs::write(ws.root.join(dir).join("pre-commit"), "evil").unwrap();
    }
    let stack = MiddlewareStack::new()
        .with(ShellFsGuardMiddleware::new().protected_paths([".git", "scripts/hooks"]))
        .unwrap();
    let texts = runs(
        &ws,
        ws.policy(),
        stack,
        &[
            "mv x/scripts .",
            "cp -r x/scripts .",
            "mkdir scripts",
            "mv y scripts",
            "cp -r y/hooks scripts",
            "mkdir -p sub/scripts/hooks",
            "cp -r y/hooks sub/scripts",
            "mv y z",
        ],
    )
    .await;
    assert_eq!(texts.len(), 8, "{texts:?}");
    assert!(!ws.root.join("scripts/hooks").exists(), "{texts:?}");
    for t in &texts[..7] {
        assert!(t.contains("protected_paths"), "{texts:?}");
    }
    assert!(
        texts[7].starts_with("exit status 0") && ws.root.join("z/hooks/pre-commit").exists(),
        "{texts:?}"
    );
}

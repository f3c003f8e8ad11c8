//! git's writing subcommands in the `workspace` profile read their operands
//! as the paths the guard judged: git runs them with `--literal-pathspecs`,
//! the guard refuses pathspec magic and glob characters, walks a directory
//! that `rm`/`restore`/`mv` act on for protected entries, and refuses
//! staging a protected path (`git add`, `git commit PATH`, `git stash push
//! PATH`).

use crate::sandbox::support as sandbox_support;

use serde_json::json;
use tinyagents::harness::tool::ToolCall;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::ShellFsGuardMiddleware;
use tinyagents::sandbox::{SandboxMode, ShellPlan};

use sandbox_support::{committed_repo, git, head_tree, model_runs_with, sandbox_available, Workspace};

/// A repository holding `.github/workflows/ci.yml` and
/// `vendor/x/.github/workflows/ci.yml`, both committed.
fn repo_with_workflows(tag: &str) -> (Workspace, std::path::PathBuf) {
    let ws = Workspace::new(tag);
    committed_repo(&ws.root);
    let root = ws.root.canonicalize().unwrap();
    for dir in [".github/workflows", "vendor/x/.github/workflows"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        std::fs::write(root.join(dir).join("ci.yml"), "on: push\n").unwrap();
    }
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "\n").unwrap();
    git(&root, &["add", "-A"]);
    git(
        &root,
        &["-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "workflows"],
    );
    (ws, root)
}

/// The workspace profile's plan of `command` in `root` (sandbox required).
fn plan(root: &std::path::Path, command: &str) -> Result<ShellPlan, String> {
    ShellFsGuardMiddleware::workspace()
        .plan_call(
            &ToolCall::new("c", "shell", json!({ "command": command })),
            Some(&WorkspaceDescriptor::new(root).with_sandbox(SandboxMode::Required)),
        )
        .map(|p| p.expect("a shell call has a plan"))
}

/// git read the operands of `rm`/`restore` as pathspecs (globs matching
/// across `/`, `:(glob)` magic, directories) while the guard judged literal
/// names: `'*.yml'`, `:(glob)**/ci.yml` and `vendor` reached protected
/// workflows. Each is refused now, naming the rule; ordinary operands are
/// admitted.
#[test]
fn git_write_pathspecs_reaching_protected_paths_are_refused() {
    let (_ws, root) = repo_with_workflows("pathspec-guard");
    assert!(
        plan(&root, "git rm -q --cached .github/workflows/ci.yml").is_err(),
        "control"
    );
    for (command, why) in [
        ("git rm -q --cached -- '*.yml'", "pattern"),
        ("git rm -q --cached 'src/*.rs'", "pattern"),
        ("git rm -q --cached ':(glob)**/ci.yml'", "magic"),
        ("git rm -q --cached ':(literal).github/workflows/ci.yml'", "magic"),
        ("git restore -s HEAD -- ':/'", "magic"),
        ("git rm -r -q --cached vendor", "vendor/x/.github"),
        ("git restore -s HEAD -- vendor", "vendor/x/.github"),
        ("git restore -s HEAD -- '*.yml'", "pattern"),
        ("git mv vendor vendored", "vendor/x/.github"),
        ("git --glob-pathspecs rm -q --cached x", "literally"),
        ("git --icase-pathspecs add hello.txt", "literally"),
        ("git add ':!hello.txt'", "magic"),
        ("git add 'src/*.rs'", "pattern"),
    ] {
        let err = plan(&root, command).expect_err(command);
        assert!(err.contains(why), "{command}: {err}");
    }
    for command in [
        "git rm -q --cached hello.txt",
        "git rm -r -q --cached src",
        "git restore -s HEAD -- src",
        "git restore hello.txt",
        "git add .",
        "git add -A",
        "git add src hello.txt",
        "git commit -q -m x",
        "git commit -q -a -m x",
    ] {
        assert!(plan(&root, command).is_ok(), "{command}: {:?}", plan(&root, command));
    }
    // a shell glob is expanded and each match judged, literal to git too
    let p = plan(&root, "git add src/*.rs").unwrap();
    let argv = p.stages()[0].argv();
    assert!(argv.iter().any(|a| a == "src/lib.rs"), "{argv:?}");
    assert!(argv.iter().any(|a| a == "--literal-pathspecs"), "{argv:?}");
    // reading subcommands keep git's pathspecs (they write nothing)
    let p = plan(&root, "git log --oneline -- src").unwrap();
    assert!(!p.stages()[0].argv().iter().any(|a| a == "--literal-pathspecs"));
}

/// Staging a protected path writes it into the index, from where a commit
/// and a later checkout, pull or push put it in place outside the sandbox:
/// refused for `git add`, `git commit PATH` and `git stash push PATH`, also
/// when a directory operand is the protected entry itself.
#[test]
fn staging_a_protected_path_is_refused() {
    let (_ws, root) = repo_with_workflows("stage-protected");
    std::fs::write(root.join(".envrc"), "export X=1\n").unwrap();
    for command in [
        "git add .github/workflows/ci.yml",
        "git add .github",
        "git add vendor/x/.github",
        "git add -f .envrc",
        "git add -- .envrc",
        "git commit -q -m x .github/workflows/ci.yml",
        "git commit -q -m x -i .envrc",
        "git stash push -- .github",
    ] {
        let err = plan(&root, command).expect_err(command);
        assert!(
            err.contains("stages") && err.contains("protected_paths"),
            "{command}: {err}"
        );
    }
}

/// End to end: `git rm --cached '*.yml'` removed the protected CI workflow
/// from the index (the work tree unchanged, so the sandbox saw nothing),
/// and the next commit from the repository. Refused now; HEAD keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pathspec_glob_cannot_remove_a_protected_file_from_a_commit() {
    if !sandbox_available("a_pathspec_glob_cannot_remove_a_protected_file_from_a_commit") {
        return;
    }
    let (ws, _root) = repo_with_workflows("pathspec-e2e");
    let calls = [
        ("", "git rm -q --cached .github/workflows/ci.yml"),
        ("", "git rm -q --cached -- '*.yml'"),
        ("", "git rm -q -r --cached vendor"),
        ("", "git commit -q -m tidy"),
    ];
    let texts = model_runs_with(&ws, ShellFsGuardMiddleware::workspace(), &calls).await;
    for text in &texts[..3] {
        assert!(text.contains("refused"), "{texts:?}");
    }
    let tree = head_tree(&ws.root);
    for path in [".github/workflows/ci.yml", "vendor/x/.github/workflows/ci.yml"] {
        assert!(tree.iter().any(|l| l == path), "{path} left HEAD: {tree:?}\n{texts:?}");
    }
}

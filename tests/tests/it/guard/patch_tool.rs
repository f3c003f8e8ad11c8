//! The guard judges a patch as the library's `apply_patch` applies it: one
//! parse. Every header form some applier reads — a context diff's old name,
//! padded or mixed-case envelope markers, `Index:`, git headers that
//! disagree, `copy`, header pairs hidden in a hunk — is judged or refused,
//! and what is admitted is applied exactly as judged.

use std::path::Path;

use serde_json::json;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::ShellFsGuardMiddleware;
use tinyagents::patch::{ApplyPatchTool, Patch};
use tinyagents::prelude::ToolCall;

struct Dir(std::path::PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("ta-patch-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join(".git/hooks")).unwrap();
        std::fs::write(d.join(".git/config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::write(d.join("notes.txt"), "a\nb\nc\n").unwrap();
        Self(d.canonicalize().unwrap())
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn guard(root: &Path, patch: &str) -> Result<(), String> {
    ShellFsGuardMiddleware::new().check_call(
        &ToolCall::new("c", "apply_patch", json!({ "patch": patch })),
        Some(&WorkspaceDescriptor::new(root)),
    )
}

/// The red team's patches: the guard refuses each, and the tool (the same
/// parse) writes nothing either — `.git/config`, the hooks and `.envrc` stay as they were.
#[test]
fn every_header_form_an_applier_reads_is_judged_or_refused() {
    let d = Dir::new("attacks");
    let attacks: &[(&str, &str)] = &[
        (
            "a context diff whose old name GNU patch writes",
            "*** .git/config\n--- nothing-here.txt\n***************\n*** 1 ****\n! [core]\n--- 1 ----\n! [core] fsmonitor = touch pwned\n",
        ),
        (
            "a padded envelope marker after a harmless hunk",
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-a\n+A\n  *** Add File: .git/hooks/pre-commit\n+touch pwned\n*** End Patch\n",
        ),
        (
            "a mixed-case envelope marker",
            "*** Begin Patch\n*** add file: .git/hooks/pre-commit\n+touch pwned\n*** End Patch\n",
        ),
        (
            "a padded Begin",
            "  *** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n",
        ),
        (
            "a tab-padded marker between sections",
            "*** Begin Patch\n*** Add File: x.txt\n+x\n\t*** Add File: .envrc\n+touch pwned\n*** End Patch\n",
        ),
        (
            "an Index: header naming the real target",
            "Index: .git/config\n--- notes.txt\n+++ notes.txt\n@@ -1 +1 @@\n-a\n+A\n",
        ),
        (
            "diff --git names that disagree with ---/+++",
            "diff --git a/.git/config b/.git/config\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1 +1 @@\n-a\n+A\n",
        ),
        (
            "a git copy onto .envrc",
            "diff --git a/notes.txt b/.envrc\nsimilarity index 100%\ncopy from notes.txt\ncopy to .envrc\n",
        ),
        (
            "a git rename onto the hooks",
            "diff --git a/notes.txt b/.git/hooks/pre-commit\nsimilarity index 100%\nrename from notes.txt\nrename to .git/hooks/pre-commit\n",
        ),
        (
            "old and new names that differ (appliers pick either)",
            "--- .git/config\n+++ notes.txt\n@@ -1 +1 @@\n-a\n+A\n",
        ),
        (
            "a file header pair inside a hunk whose counts are short",
            "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n a\n--- a/.git/config\n+++ b/.git/config\n c\n",
        ),
        (
            "a unified header inside the envelope",
            "*** Begin Patch\n*** Update File: notes.txt\n@@\n-a\n+A\n--- a/.git/config\n+++ b/.git/config\n*** End Patch\n",
        ),
        (
            "a mode change that makes a hook executable",
            "diff --git a/notes.txt b/notes.txt\nold mode 100644\nnew mode 100755\n",
        ),
        (
            "a symlink onto the config",
            "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+.git/config\n",
        ),
        ("a quoted name", "--- \"a/.git/config\"\n+++ \"b/.git/config\"\n@@ -1 +1 @@\n-a\n+b\n"),
        ("the plain protected target", "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-[core]\n+[core] fsmonitor = x\n"),
    ];
    let tool = ApplyPatchTool::new(&d.0).unwrap();
    let config = std::fs::read_to_string(d.0.join(".git/config")).unwrap();
    for (what, patch) in attacks {
        let verdict = guard(&d.0, patch);
        assert!(verdict.is_err(), "the guard admitted {what}:\n{patch}");
        let applied = tool.apply_text(patch);
        assert!(applied.is_err(), "the tool applied {what}: {applied:?}");
        assert_eq!(
            std::fs::read_to_string(d.0.join(".git/config")).unwrap(),
            config,
            "{what}"
        );
        assert!(
            !d.0.join(".git/hooks/pre-commit").exists() && !d.0.join(".envrc").exists(),
            "{what}"
        );
        assert_eq!(
            std::fs::read_to_string(d.0.join("notes.txt")).unwrap(),
            "a\nb\nc\n",
            "{what}"
        );
    }
    println!(
        "patch header attacks tried: {}, refused: {}",
        attacks.len(),
        attacks.len()
    );
}

/// What the guard admits, the tool applies exactly: the names judged are the files written.
#[test]
fn admitted_patches_apply_as_judged() {
    let d = Dir::new("ok");
    let tool = ApplyPatchTool::new(&d.0).unwrap();
    let patches = [
        "*** Begin Patch\n*** Update File: notes.txt\n@@\n a\n-b\n+B\n*** Add File: src/new.rs\n+fn f() {}\n*** End Patch\n",
        "--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,4 @@\n a\n B\n c\n+d\n",
        "diff --git a/src/new.rs b/src/moved.rs\nsimilarity index 100%\nrename from src/new.rs\nrename to src/moved.rs\n",
        "diff --git a/tool.sh b/tool.sh\nnew file mode 100755\nindex 0000000..1111111\n--- /dev/null\n+++ b/tool.sh\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+echo hi\n",
        "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: docs/notes.md\n@@\n-d\n+D\n*** Delete File: src/moved.rs\n*** End Patch\n",
    ];
    for p in patches {
        guard(&d.0, p).unwrap_or_else(|e| panic!("refused: {e}\n{p}"));
        let parsed = Patch::parse(p).unwrap();
        tool.apply_text(p).unwrap_or_else(|e| panic!("{e}\n{p}"));
        for f in &parsed.files {
            assert!(parsed.names().contains(&f.path));
        }
    }
    assert_eq!(
        std::fs::read_to_string(d.0.join("docs/notes.md")).unwrap(),
        "a\nB\nc\nD\n"
    );
    assert!(!d.0.join("notes.txt").exists() && !d.0.join("src/moved.rs").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(d.0.join("tool.sh")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    // nothing is written when one hunk does not apply
    let partial = "*** Begin Patch\n*** Add File: first.txt\n+x\n*** Update File: docs/notes.md\n@@\n-not there\n+y\n*** End Patch\n";
    let err = tool.apply_text(partial).unwrap_err().to_string();
    assert!(err.contains("hunk 1 does not match"), "{err}");
    assert!(!d.0.join("first.txt").exists());
    // without the guard, the tool itself keeps off protected paths and symlinks
    let err = tool
        .apply_text("*** Begin Patch\n*** Add File: .cargo/config.toml\n+x\n*** End Patch\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("protected_paths"), "{err}");
    std::os::unix::fs::symlink("/tmp", d.0.join("out")).unwrap();
    let err = tool
        .apply_text("*** Begin Patch\n*** Add File: out/x\n+x\n*** End Patch\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("symlink"), "{err}");
}

//! The built-in file tools attacked as a hostile model would: symbolic links
//! in the middle of a path, dangling links as write targets, hard links,
//! `..` after a link, other spellings of the root, NUL and control bytes,
//! long paths, escaping globs, FIFOs and devices, huge files, trees and
//! directories, protected paths, ambiguous edits. Each attack is refused
//! with an error naming the path, or bounded.
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use tinyagents::harness::tool::{FileAccessMode, SideEffects, ToolContext};
use tinyagents::prelude::*;
use tinyagents::tools::{builtin_tool, WorkspaceRoot, MAX_ENTRIES, MAX_READ_BYTES, MAX_WRITE_BYTES};

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("ta-filetools-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("ws/.git")).unwrap();
        std::fs::create_dir_all(d.join("outside")).unwrap();
        std::fs::write(d.join("ws/.git/config"), "[core]\n").unwrap();
        std::fs::write(d.join("ws/notes.txt"), "alpha\nbeta\n").unwrap();
        std::fs::write(d.join("outside/secret.txt"), "secret\n").unwrap();
        Self(d.canonicalize().unwrap())
    }
    fn ws(&self) -> PathBuf {
        self.0.join("ws")
    }
    fn outside(&self) -> PathBuf {
        self.0.join("outside")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Calls the built-in tool `name` in `root`; a tool that does not answer in
/// 30 s (a FIFO it waits on) fails the test.
async fn call(root: &Path, name: &str, args: Value) -> Result<String> {
    let tool = builtin_tool(name, &WorkspaceRoot::new(root).unwrap()).unwrap();
    let run: RunContext = RunContext::new(RunConfig::new("r"), ());
    let out = tokio::time::timeout(
        Duration::from_secs(30),
        tool.call(ToolContext::new("c", run.as_parent(), None), args),
    )
    .await
    .unwrap_or_else(|_| panic!("`{name}` hung"))?;
    Ok(out.content)
}

fn refused(r: Result<String>, needle: &str) -> String {
    let e = r.expect_err("the attack must be refused").to_string();
    assert!(e.contains(needle), "`{needle}` not in: {e}");
    e
}

#[tokio::test]
async fn a_directory_link_in_the_middle_of_a_path_is_refused() {
    let d = Dir::new("mid");
    symlink("/etc", d.ws().join("etc")).unwrap();
    symlink(d.outside(), d.ws().join("out")).unwrap();
    refused(
        call(&d.ws(), "read_tool", json!({"path": "etc/passwd"})).await,
        "etc/passwd",
    );
    refused(
        call(&d.ws(), "read_tool", json!({"path": "out/secret.txt"})).await,
        "outside the workspace",
    );
    refused(
        call(&d.ws(), "write_file", json!({"path": "out/new.txt", "content": "x"})).await,
        "out/new.txt",
    );
    refused(
        call(
            &d.ws(),
            "edit",
            json!({"path": "out/secret.txt", "old_string": "secret", "new_string": "owned"}),
        )
        .await,
        "out/secret.txt",
    );
    refused(call(&d.ws(), "ls", json!({"path": "out"})).await, "out");
    refused(
        call(&d.ws(), "search_text", json!({"pattern": "secret", "path": "out"})).await,
        "out",
    );
    assert!(!d.outside().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(d.outside().join("secret.txt")).unwrap(),
        "secret\n"
    );
}

#[tokio::test]
async fn a_dangling_link_as_the_write_target_is_refused_not_followed() {
    let d = Dir::new("dangling");
    let target = d.outside().join("planted.sh");
    symlink(&target, d.ws().join("build.sh")).unwrap();
    let e = refused(
        call(&d.ws(), "write_file", json!({"path": "build.sh", "content": "evil"})).await,
        "build.sh",
    );
    assert!(e.contains("symbolic link"), "{e}");
    assert!(
        !target.exists(),
        "the write followed the dangling link out of the workspace"
    );
    // a link inside the workspace is not written through either
    symlink("notes.txt", d.ws().join("alias.txt")).unwrap();
    refused(
        call(&d.ws(), "write_file", json!({"path": "alias.txt", "content": "x"})).await,
        "alias.txt",
    );
    refused(
        call(
            &d.ws(),
            "edit",
            json!({"path": "alias.txt", "old_string": "alpha", "new_string": "x"}),
        )
        .await,
        "alias.txt",
    );
    assert_eq!(
        std::fs::read_to_string(d.ws().join("notes.txt")).unwrap(),
        "alpha\nbeta\n"
    );
}

#[tokio::test]
async fn a_hard_link_to_a_file_outside_is_replaced_not_written_through() {
    let d = Dir::new("hard");
    std::fs::hard_link(d.outside().join("secret.txt"), d.ws().join("linked.txt")).unwrap();
    call(&d.ws(), "write_file", json!({"path": "linked.txt", "content": "new\n"}))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(d.outside().join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(std::fs::read_to_string(d.ws().join("linked.txt")).unwrap(), "new\n");
    std::fs::remove_file(d.ws().join("linked.txt")).unwrap();
    std::fs::hard_link(d.outside().join("secret.txt"), d.ws().join("linked.txt")).unwrap();
    call(
        &d.ws(),
        "edit",
        json!({"path": "linked.txt", "old_string": "secret", "new_string": "edited"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(d.outside().join("secret.txt")).unwrap(),
        "secret\n"
    );
    assert_eq!(std::fs::read_to_string(d.ws().join("linked.txt")).unwrap(), "edited\n");
}

#[tokio::test]
async fn dot_dot_after_a_link_is_read_lexically_and_cannot_climb_out() {
    let d = Dir::new("dotdot");
    symlink("/etc", d.ws().join("etc")).unwrap();
    // `etc/..` is the workspace itself (lexically), never `/`
    let text = call(&d.ws(), "read_tool", json!({"path": "etc/../notes.txt"}))
        .await
        .unwrap();
    assert_eq!(text, "alpha\nbeta\n");
    refused(
        call(&d.ws(), "read_tool", json!({"path": "etc/../../outside/secret.txt"})).await,
        "`..`",
    );
    let listed = call(&d.ws(), "ls", json!({"path": "etc/.."})).await.unwrap();
    assert!(listed.contains("notes.txt") && !listed.contains("passwd"), "{listed}");
}

#[tokio::test]
async fn other_spellings_of_absolute_paths_stay_inside_or_are_refused() {
    let d = Dir::new("spell");
    let ws = d.ws();
    let dotted = format!("{}/././/notes.txt", ws.display());
    assert_eq!(
        call(&ws, "read_tool", json!({"path": dotted})).await.unwrap(),
        "alpha\nbeta\n"
    );
    let climbed = format!("{}/../outside/secret.txt", ws.display());
    refused(call(&ws, "read_tool", json!({"path": climbed})).await, "outside");
    refused(
        call(&ws, "read_tool", json!({"path": "//etc/passwd"})).await,
        "absolute",
    );
    refused(
        call(&ws, "write_file", json!({"path": "/tmp/ta-planted", "content": "x"})).await,
        "absolute",
    );
}

#[tokio::test]
async fn nul_control_bytes_and_very_long_paths_are_classified_errors() {
    let d = Dir::new("bytes");
    refused(
        call(&d.ws(), "read_tool", json!({"path": "notes.txt\u{0}.png"})).await,
        "NUL",
    );
    refused(
        call(&d.ws(), "write_file", json!({"path": "a\u{0}b", "content": "x"})).await,
        "U+0000",
    );
    refused(
        call(&d.ws(), "write_file", json!({"path": "a\nb", "content": "x"})).await,
        "control character",
    );
    refused(
        call(
            &d.ws(),
            "write_file",
            json!({"path": "a\u{202E}txt.sh", "content": "x"}),
        )
        .await,
        "look-alike",
    );
    let long = "a".repeat(5000);
    refused(call(&d.ws(), "read_tool", json!({"path": long})).await, "PATH_MAX");
    let deep = ["d"; 3000].join("/");
    refused(
        call(&d.ws(), "write_file", json!({"path": deep, "content": "x"})).await,
        "PATH_MAX",
    );
    assert!(!d.ws().join("d").exists(), "nothing of the deep path was made");
    // a single name over the system's limit is the system's error, naming the path
    refused(
        call(&d.ws(), "write_file", json!({"path": "n".repeat(300), "content": "x"})).await,
        "nnnn",
    );
}

#[tokio::test]
async fn glob_patterns_cannot_escape_and_links_are_not_walked() {
    let d = Dir::new("glob");
    for p in ["../*", "/etc/*", "**/..", "../outside/*", "sub/../../*"] {
        refused(call(&d.ws(), "glob", json!({"pattern": p})).await, p);
    }
    symlink("/", d.ws().join("slash")).unwrap();
    symlink(".", d.ws().join("loop")).unwrap();
    symlink(d.outside(), d.ws().join("out")).unwrap();
    let listed = call(&d.ws(), "glob", json!({"pattern": "**/*"})).await.unwrap();
    assert!(listed.contains("notes.txt"), "{listed}");
    assert!(listed.contains("loop"), "a link inside is listed: {listed}");
    assert!(
        !listed.contains("secret") && !listed.contains("passwd") && !listed.contains("slash"),
        "{listed}"
    );
    assert!(!listed.contains("loop/"), "a link is never walked: {listed}");
}

#[tokio::test]
async fn glob_ls_and_search_over_many_entries_are_bounded() {
    let d = Dir::new("many");
    std::fs::create_dir(d.ws().join("many")).unwrap();
    for i in 0..MAX_ENTRIES + 200 {
        std::fs::write(d.ws().join(format!("many/f{i:05}.txt")), "needle\n").unwrap();
    }
    for (tool, args) in [
        ("ls", json!({"path": "many"})),
        ("glob", json!({"pattern": "many/*.txt"})),
        ("search_text", json!({"pattern": "needle"})),
    ] {
        let out = call(&d.ws(), tool, args).await.unwrap();
        assert!(
            out.lines().count() <= MAX_ENTRIES + 2,
            "{tool}: {} lines",
            out.lines().count()
        );
        assert!(out.contains(&format!("more than {MAX_ENTRIES}")), "{tool} says it cut");
    }
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo {}", path.display());
}

#[tokio::test]
async fn a_fifo_or_device_never_blocks_or_feeds_a_tool() {
    let d = Dir::new("fifo");
    mkfifo(&d.ws().join("pipe"));
    symlink("/dev/zero", d.ws().join("zero")).unwrap();
    let e = refused(call(&d.ws(), "read_tool", json!({"path": "pipe"})).await, "pipe");
    assert!(e.contains("FIFO"), "{e}");
    refused(
        call(
            &d.ws(),
            "edit",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        )
        .await,
        "FIFO",
    );
    refused(
        call(&d.ws(), "write_file", json!({"path": "pipe", "content": "x"})).await,
        "FIFO",
    );
    refused(call(&d.ws(), "read_tool", json!({"path": "zero"})).await, "outside");
    let found = call(&d.ws(), "search_text", json!({"pattern": "alpha"})).await.unwrap();
    assert_eq!(found, "notes.txt:1: alpha");
    // a FIFO named as the search path is skipped, not waited on
    assert_eq!(
        call(&d.ws(), "search_text", json!({"pattern": "x", "path": "pipe"}))
            .await
            .unwrap(),
        "(nothing)"
    );
}

#[tokio::test]
async fn huge_and_binary_files_are_read_bounded() {
    let d = Dir::new("huge");
    let line = "needle ".repeat(10) + "\n";
    std::fs::write(d.ws().join("big.txt"), line.repeat(3 * 1024 * 1024 / line.len())).unwrap();
    std::fs::write(d.ws().join("one_line.txt"), "x".repeat(2 * MAX_READ_BYTES)).unwrap();
    std::fs::write(d.ws().join("bin.dat"), b"needle\0\x01\x02").unwrap();
    let out = call(&d.ws(), "read_tool", json!({"path": "big.txt"})).await.unwrap();
    assert!(
        out.len() <= MAX_READ_BYTES + 200 && out.contains("[cut at"),
        "{}",
        out.len()
    );
    let out = call(&d.ws(), "read_tool", json!({"path": "one_line.txt"}))
        .await
        .unwrap();
    assert!(
        out.len() <= MAX_READ_BYTES + 200 && out.contains("[cut at"),
        "{}",
        out.len()
    );
    // offset and limit page through a file larger than one read
    let tail = call(
        &d.ws(),
        "read_tool",
        json!({"path": "big.txt", "offset": 40000, "limit": 2}),
    )
    .await
    .unwrap();
    assert_eq!(tail, line.repeat(2));
    let found = call(&d.ws(), "search_text", json!({"pattern": "needle"}))
        .await
        .unwrap();
    assert_eq!(
        found, "(nothing)",
        "a file over the bound and a binary file are skipped"
    );
}

#[tokio::test]
async fn protected_paths_are_never_written_by_the_file_tools() {
    let d = Dir::new("protected");
    for path in [
        ".git/config",
        ".envrc",
        ".github/workflows/x.yml",
        "sub/.envrc",
        ".git/hooks/pre-commit",
        ".cargo/config.toml",
    ] {
        let e = refused(
            call(
                &d.ws(),
                "write_file",
                json!({"path": path, "content": "[core]\n\tfsmonitor = evil\n"}),
            )
            .await,
            path,
        );
        assert!(e.contains("protected"), "{e}");
    }
    refused(
        call(
            &d.ws(),
            "edit",
            json!({"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tpager = evil"}),
        )
        .await,
        "protected",
    );
    assert_eq!(std::fs::read_to_string(d.ws().join(".git/config")).unwrap(), "[core]\n");
    assert!(!d.ws().join(".envrc").exists() && !d.ws().join(".github").exists());
    // reading them stays allowed
    assert_eq!(
        call(&d.ws(), "read_tool", json!({"path": ".git/config"}))
            .await
            .unwrap(),
        "[core]\n"
    );
}

#[tokio::test]
async fn an_ambiguous_edit_changes_nothing() {
    let d = Dir::new("edit");
    std::fs::write(d.ws().join("a.txt"), "x = 1\nx = 1\n").unwrap();
    let e = refused(
        call(
            &d.ws(),
            "edit",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2"}),
        )
        .await,
        "2 times",
    );
    assert!(e.contains("replace_all"), "{e}");
    assert_eq!(std::fs::read_to_string(d.ws().join("a.txt")).unwrap(), "x = 1\nx = 1\n");
    call(
        &d.ws(),
        "edit",
        json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 2", "replace_all": true}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(d.ws().join("a.txt")).unwrap(), "x = 2\nx = 2\n");
}

#[tokio::test]
async fn a_huge_write_or_edit_is_refused_whole() {
    let d = Dir::new("bigwrite");
    let huge = "a".repeat(MAX_WRITE_BYTES + 1);
    refused(
        call(&d.ws(), "write_file", json!({"path": "big.txt", "content": huge})).await,
        "at most",
    );
    assert!(!d.ws().join("big.txt").exists());
    std::fs::write(d.ws().join("grow.txt"), "ab".repeat(MAX_WRITE_BYTES / 4)).unwrap();
    refused(
        call(
            &d.ws(),
            "edit",
            json!({"path": "grow.txt", "old_string": "a", "new_string": "aaaa", "replace_all": true}),
        )
        .await,
        "exceed",
    );
    assert_eq!(
        std::fs::metadata(d.ws().join("grow.txt")).unwrap().len() as usize,
        MAX_WRITE_BYTES / 2
    );
    // no temporary file is left behind
    let left: Vec<_> = std::fs::read_dir(d.ws())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 3, "{left:?}");
}

#[test]
fn each_tool_declares_its_effects_and_files() {
    let d = Dir::new("declare");
    let root = WorkspaceRoot::new(d.ws()).unwrap();
    let write = builtin_tool("write_file", &root).unwrap();
    let access = write.file_access(&json!({"path": "src/a.rs", "content": "x"}));
    assert_eq!(access.len(), 1);
    assert_eq!(access[0].mode, FileAccessMode::Write);
    assert_eq!(Path::new(&access[0].path), d.ws().join("src/a.rs"));
    assert!(write.policy().side_effects.contains(SideEffects::WRITE));
    let read = builtin_tool("read_tool", &root).unwrap();
    assert!(!read.policy().side_effects.contains(SideEffects::WRITE));
    assert_eq!(
        read.file_access(&json!({"path": "notes.txt"}))[0].mode,
        FileAccessMode::Read
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_link_between_check_and_use_is_not_followed() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let d = Dir::new("toctou");
    let ws = d.ws();
    std::fs::create_dir(ws.join("d")).unwrap();
    std::fs::write(ws.join("d/secret.txt"), "inside\n").unwrap();
    symlink(d.outside(), ws.join("evil")).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // another process in the workspace (the shell tool, say) swaps `d` for a link out, again and again
    let swapper = {
        let (ws, stop) = (ws.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::rename(ws.join("d"), ws.join("real"));
                let _ = std::fs::rename(ws.join("evil"), ws.join("d"));
                let _ = std::fs::rename(ws.join("d"), ws.join("evil"));
                let _ = std::fs::rename(ws.join("real"), ws.join("d"));
            }
        })
    };
    for i in 0..300 {
        if let Ok(text) = call(&ws, "read_tool", json!({"path": "d/secret.txt"})).await {
            assert_eq!(text, "inside\n", "read through the swapped link");
        }
        let _ = call(
            &ws,
            "write_file",
            json!({"path": format!("d/w{i}.txt"), "content": "x"}),
        )
        .await;
        let _ = call(
            &ws,
            "edit",
            json!({"path": "d/secret.txt", "old_string": "secret", "new_string": "owned"}),
        )
        .await;
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    let landed: Vec<_> = std::fs::read_dir(d.outside())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        landed,
        vec![std::ffi::OsString::from("secret.txt")],
        "a write landed outside"
    );
    assert_eq!(
        std::fs::read_to_string(d.outside().join("secret.txt")).unwrap(),
        "secret\n"
    );
}

//! The sandbox enforces the protected paths at any depth, not only at the
//! workspace root: `sub/.envrc`, `crates/a/.cargo/config.toml`,
//! `vendor/x/.git/config` and `vendor/x/.git/hooks/pre-commit` cannot be
//! written, appended, truncated, renamed, removed, replaced by a symlink or
//! re-moded by a sandboxed command or a shell script it runs (the path a
//! build script or a hook takes), nor created where absent — while ordinary
//! writes of the same command still happen. A hostile user's tricks too:
//! moving a directory holding a protected file and recreating its name, hard
//! links, `mkdir -p a/.git/hooks`, a dangling symlink at a protected name.

use crate::sandbox::support as sandbox_support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sandbox_support::{sandbox_available, sh_or_refusal, Workspace};
use tinyagents::sandbox::Sandbox;

/// The four nested protected files of the red team.
const TARGETS: [&str; 4] = [
    "sub/.envrc",
    "crates/a/.cargo/config.toml",
    "vendor/x/.git/config",
    "vendor/x/.git/hooks/pre-commit",
];

/// A workspace holding the four nested protected files (`vendor/x` a git
/// repository of its own), all made outside the sandbox.
fn nested(tag: &str) -> Workspace {
    let ws = Workspace::new(tag);
    for dir in ["sub", "crates/a/.cargo", "vendor/x"] {
        std::fs::create_dir_all(ws.root.join(dir)).unwrap();
    }
    let ok = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(ws.root.join("vendor/x"))
        .status()
        .unwrap()
        .success();
    assert!(ok, "git init");
    std::fs::create_dir_all(ws.root.join("vendor/x/.git/hooks")).unwrap();
    std::fs::write(ws.root.join("sub/.envrc"), "export A=1\n").unwrap();
    std::fs::write(ws.root.join("crates/a/.cargo/config.toml"), "[build]\njobs = 1\n").unwrap();
    std::fs::write(ws.root.join("vendor/x/.git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n").unwrap();
    ws
}

/// Every protected file's bytes and mode, and what each protected directory holds.
fn snapshot(root: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    for t in TARGETS {
        let p = root.join(t);
        let meta = std::fs::symlink_metadata(&p).unwrap_or_else(|e| panic!("`{t}` is gone: {e}"));
        assert!(meta.is_file(), "`{t}` is no longer a regular file");
        out.insert(t.to_owned(), (std::fs::read(&p).unwrap(), meta.permissions().mode()));
    }
    for dir in ["crates/a/.cargo", "vendor/x/.git/hooks"] {
        let mut names: Vec<String> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        out.insert(dir.to_owned(), (names.join("\n").into_bytes(), 0));
    }
    out
}

/// Every way to change an existing protected file `t` (whose directory is `d`).
fn attacks_on(t: &str) -> Vec<String> {
    let d = Path::new(t).parent().unwrap().display().to_string();
    vec![
        format!("echo evil > {t}"),
        format!("printf '[core]\\n\\tfsmonitor = touch pwned\\n' >> {t}"),
        format!("truncate -s 0 {t}"),
        format!("sed -i 's/^/evil /' {t}"),
        format!("mv {t} moved-away"),
        format!("mv {t} moved-away; echo evil > {t}"),
        format!("echo evil > e && mv e {t}"),
        format!("echo evil > e && mv -f e {t} || cp e {t}"),
        format!("rm -f {t}"),
        format!("rm -rf {d}"),
        format!("mv {d} moved-dir"),
        format!("ln -sf /tmp/elsewhere {t}"),
        format!("rm -f {t}; ln -s ../hello.txt {t}"),
        format!("chmod 777 {t}"),
        format!("touch -d 2001-01-01 {t}"),
        format!("ln {t} hard && echo evil >> hard"),
        format!("ln -s $PWD/{t} soft && echo evil >> soft"),
        format!("perl -e 'rename(\"{d}\", \"moved-dir\") or die \"$!\"; mkdir(\"{d}\"); open(F, \">\", \"{t}\") or die; print F 1'"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_protected_paths_cannot_be_written_renamed_or_removed() {
    if !sandbox_available("nested_protected_paths_cannot_be_written_renamed_or_removed") {
        return;
    }
    let ws = nested("depth-existing");
    let sandbox = ws.sandbox();
    let before = snapshot(&ws.root);
    let mut lines: Vec<String> = TARGETS.iter().flat_map(|t| attacks_on(t)).collect();
    // a hostile user moves the directory holding a protected file, then
    // makes the old name again; or takes the whole tree away
    lines.extend(
        [
            "mv sub sub2 && mkdir sub && echo evil > sub/.envrc",
            "mv crates/a crates/b && mkdir -p crates/a/.cargo && echo evil > crates/a/.cargo/config.toml",
            "mv crates c2 && mkdir -p crates/a/.cargo && echo evil > crates/a/.cargo/config.toml",
            "mv vendor/x/.git vendor/x/g && mkdir -p vendor/x/.git/hooks && echo evil > vendor/x/.git/config",
            "mv vendor v2",
            "rm -rf vendor crates sub",
            "cd vendor/x && git config core.fsmonitor 'touch pwned'",
            "cd vendor/x && git config core.hooksPath /tmp",
        ]
        .map(str::to_owned),
    );
    for (i, line) in lines.iter().enumerate() {
        let full = format!("echo ordinary > ordinary-{i}.txt; {line}");
        let result = sh_or_refusal(&sandbox, &full).await;
        assert_eq!(
            snapshot(&ws.root),
            before,
            "`{line}` changed a protected path: {result:?}"
        );
        assert!(
            ws.root.join(format!("ordinary-{i}.txt")).is_file(),
            "`{line}`: the ordinary write of the same command did not happen: {result:?}"
        );
        for gone in ["sub2", "crates/b", "c2", "vendor/x/g", "v2", "pwned"] {
            assert!(!ws.root.join(gone).exists(), "`{line}` left `{gone}`: {result:?}");
        }
        // what `mv` copies when it cannot rename (a copy is only a read)
        let _ = std::fs::remove_dir_all(ws.root.join("moved-dir"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_script_cannot_change_nested_protected_paths_either() {
    if !sandbox_available("a_build_script_cannot_change_nested_protected_paths_either") {
        return;
    }
    let ws = nested("depth-script");
    let sandbox = ws.sandbox();
    let before = snapshot(&ws.root);
    let mut script = String::from("#!/bin/sh\necho built > build-output.txt\n");
    for t in TARGETS {
        for line in attacks_on(t) {
            script.push_str(&format!("( {line} ) 2>/dev/null\n"));
        }
    }
    script.push_str("mkdir -p deep/.git/hooks && echo 'touch pwned' > deep/.git/hooks/pre-commit\n");
    script.push_str("echo 'touch pwned' > crates/.envrc\necho done >> build-output.txt\n");
    std::fs::write(ws.root.join("build.sh"), script).unwrap();
    let err = sh_or_refusal(&sandbox, "sh build.sh")
        .await
        .expect_err("the script created protected paths");
    assert!(
        err.contains("`deep/.git`") && err.contains("`crates/.envrc`") && err.contains("removed"),
        "{err}"
    );
    assert_eq!(snapshot(&ws.root), before);
    assert!(!ws.root.join("deep/.git").exists() && !ws.root.join("crates/.envrc").exists());
    assert_eq!(
        std::fs::read_to_string(ws.root.join("build-output.txt")).unwrap(),
        "built\ndone\n",
        "the script's ordinary writes happened"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_protected_paths_that_do_not_exist_cannot_be_created() {
    if !sandbox_available("nested_protected_paths_that_do_not_exist_cannot_be_created") {
        return;
    }
    let ws = Workspace::new("depth-new");
    for dir in ["sub", "crates/a", "vendor/x/.git", "links"] {
        std::fs::create_dir_all(ws.root.join(dir)).unwrap();
    }
    // a dangling symlink at a protected name: making its target makes the file
    std::os::unix::fs::symlink("env.sh", ws.root.join("links/.envrc")).unwrap();
    let sandbox = ws.sandbox();
    let cases: &[(&str, &str)] = &[
        ("echo 'touch pwned' > sub/.envrc", "sub/.envrc"),
        ("echo 'touch pwned' > sub/.ENVRC", "sub/.ENVRC"),
        (
            "mkdir -p crates/a/.cargo && printf '[build]\\nrustc-wrapper = \"./x.sh\"\\n' > crates/a/.cargo/config.toml",
            "crates/a/.cargo",
        ),
        (
            "printf '[core]\\n\\tfsmonitor = touch pwned\\n' > vendor/x/.git/config",
            "vendor/x/.git/config",
        ),
        (
            "mkdir -p vendor/x/.git/hooks && echo 'touch pwned' > vendor/x/.git/hooks/pre-commit && chmod +x vendor/x/.git/hooks/pre-commit",
            "vendor/x/.git/hooks",
        ),
        ("mkdir -p a/.git/hooks", "a/.git"),
        ("git init -q crates/b", "crates/b/.git"),
        ("echo x > e && mv e sub/.envrc", "sub/.envrc"),
        ("ln hello.txt sub/.envrc", "sub/.envrc"),
        ("ln -s ../hello.txt sub/.envrc", "sub/.envrc"),
        ("mkdir -p t && echo x > t/config.toml && mv t crates/a/.cargo", "crates/a/.cargo"),
        ("mkdir -p t/.github/workflows && echo 'on: push' > t/.github/workflows/ci.yml && mv t crates/c", "crates/c/.github"),
        ("echo 'touch pwned' > links/env.sh", "links/.envrc"),
        (
            "mkdir -p deep/er && echo 'touch pwned' > deep/er/.envrc && chmod 000 deep/er deep",
            "deep/er/.envrc",
        ),
    ];
    for (i, (line, path)) in cases.iter().enumerate() {
        let full = format!("echo ordinary > ordinary-{i}.txt; {line}");
        let err = sh_or_refusal(&sandbox, &full).await.expect_err(line);
        assert!(
            err.contains(&format!("`{path}`")) && err.contains("protected_paths") && err.contains("removed"),
            "{line}: {err}"
        );
        assert!(
            ws.root.join(format!("ordinary-{i}.txt")).is_file(),
            "`{line}`: the ordinary write did not happen"
        );
        for left in [
            "sub/.envrc",
            "sub/.ENVRC",
            "crates/a/.cargo",
            "vendor/x/.git/config",
            "vendor/x/.git/hooks",
            "a/.git",
            "crates/b/.git",
            "crates/c/.github",
            "links/env.sh",
            "deep/er/.envrc",
        ] {
            assert!(
                std::fs::symlink_metadata(ws.root.join(left)).is_err(),
                "`{line}` left `{left}`"
            );
        }
        assert_eq!(
            std::fs::read_link(ws.root.join("links/.envrc")).unwrap(),
            Path::new("env.sh"),
            "the symlink that stood there is kept"
        );
        assert_eq!(
            std::fs::read_to_string(ws.root.join("hello.txt")).unwrap(),
            "hello sandbox\nsecond line\n",
            "a hard link's other name is untouched"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_file_with_another_hard_link_in_the_workspace_is_refused() {
    if !sandbox_available("a_protected_file_with_another_hard_link_in_the_workspace_is_refused") {
        return;
    }
    let ws = Workspace::new("depth-hardlink");
    std::fs::create_dir_all(ws.root.join("sub")).unwrap();
    std::fs::write(ws.root.join("sub/.envrc"), "export A=1\n").unwrap();
    let sandbox = ws.sandbox();
    // a link made after the sandbox was built (by the person): the next run is refused
    std::fs::hard_link(ws.root.join("sub/.envrc"), ws.root.join("notes.txt")).unwrap();
    let err = sh_or_refusal(&sandbox, "echo evil >> notes.txt")
        .await
        .expect_err("refused");
    assert!(
        err.contains("sub/.envrc") && err.contains("another hard link") && err.contains("-samefile"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("sub/.envrc")).unwrap(),
        "export A=1\n"
    );
    let err = Sandbox::new(ws.policy()).unwrap_err().to_string();
    assert!(err.contains("another hard link"), "{err}");
    // a link outside the workspace is not writable by the command: admitted
    std::fs::remove_file(ws.root.join("notes.txt")).unwrap();
    std::fs::hard_link(ws.root.join("sub/.envrc"), ws.outside_path("envrc-link")).unwrap();
    let out = sh_or_refusal(&Sandbox::new(ws.policy()).unwrap(), "cat sub/.envrc")
        .await
        .unwrap();
    assert!(out.contains("export A=1"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_walks_are_bounded_and_fail_closed_past_the_bound() {
    if !sandbox_available("the_walks_are_bounded_and_fail_closed_past_the_bound") {
        return;
    }
    let ws = Workspace::new("depth-bound");
    for i in 0..20 {
        std::fs::write(ws.root.join(format!("f{i}")), "x").unwrap();
    }
    let err = Sandbox::new(ws.policy().with_protected_walk_limit(10))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("more than 10 entries") && err.contains("protected_walk_limit"),
        "{err}"
    );
    let sandbox = Sandbox::new(ws.policy().with_protected_walk_limit(40)).unwrap();
    let ok = sh_or_refusal(&sandbox, "echo y > g").await.unwrap();
    assert!(ok.starts_with("exit status 0"), "{ok}");
    // a command that buries a protected file under more entries than the
    // walk may visit fails, whatever it hid
    let err = sh_or_refusal(
        &sandbox,
        "mkdir -p m && cd m && touch $(seq 1 60) && mkdir -p z && echo x > z/.envrc",
    )
    .await
    .expect_err("past the bound");
    assert!(err.contains("more than 40 entries after the run"), "{err}");
}

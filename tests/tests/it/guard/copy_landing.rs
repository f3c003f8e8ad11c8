//! `cp` and `mv` into a directory are judged by where each source lands:
//! `cp f .` and `mv x/y .` write `./f` and `./y`, not the workspace root, so
//! the default guard admits them when the result is not protected and
//! refuses them when it is (`x/.envrc` into the root, a tree named
//! `gradle` that `gradle/wrapper` lies in, a file into `.git/hooks`).

use crate::sandbox::support::verdict;

use serde_json::json;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::ShellFsGuardMiddleware;
use tinyagents::prelude::*;

fn sh(command: &str) -> ToolCall {
    ToolCall::new("c", "shell", json!({ "command": command }))
}

#[test]
fn copies_and_moves_into_a_directory_are_judged_where_they_land() {
    let base = std::env::temp_dir().join(format!("ta-guard-landing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    for dir in ["x/y", "x/gradle", "x/.git", "x/hooks", "sub", ".git/hooks"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
    }
    for file in ["f.txt", "x/a.txt", "x/.envrc", "sub/g.txt", "x/y/z.txt"] {
        std::fs::write(base.join(file), "x").unwrap();
    }
    let root = std::fs::canonicalize(&base).unwrap();
    let d = WorkspaceDescriptor::new(&root);
    let guard = ShellFsGuardMiddleware::new();
    for admitted in [
        "cp x/a.txt .",
        "cp x/a.txt ./",
        "mv x/y .",
        "mv x/a.txt sub/g.txt .",
        "cp -r x/y sub",
        "cp -t . x/a.txt",
        "mv -t . x/y",
        "mv f.txt sub",
    ] {
        let verdict = guard.check_call(&sh(admitted), Some(&d));
        assert!(verdict.is_ok(), "`{admitted}` refused: {verdict:?}");
    }
    for (refused, needle) in [
        ("cp x/.envrc .", ".envrc"),
        ("mv x/.envrc .", ".envrc"),
        ("cp -r x/gradle .", "gradle/wrapper"),
        ("mv x/gradle .", "gradle/wrapper"),
        ("mv -t . x/.git", ".git"),
        ("cp -t . x/.envrc", ".envrc"),
        ("cp f.txt .git/hooks", ".git"),
        ("cp -T x/y .", "protected_paths"),
        ("cp -r x .", "the tree holds"),
        // the target directory in every spelling the programs take
        ("cp --target-directory=. x/.envrc", ".envrc"),
        ("cp -t. x/.envrc", ".envrc"),
        ("mv --target-directory . x/.git", ".git"),
        // a source that lands on a protected name inside an existing directory
        ("cp -r x/hooks .git", ".git"),
    ] {
        let err = guard.check_call(&sh(refused), Some(&d)).unwrap_err();
        assert!(
            err.contains("protected_paths") && err.contains(needle),
            "`{refused}`: {err}"
        );
    }
    // read-only mode refuses the target directory itself
    let ro = ShellFsGuardMiddleware::new().read_only(true);
    let err = ro.check_call(&sh("cp x/a.txt ."), Some(&d)).unwrap_err();
    assert!(err.contains("read-only"), "{err}");
    let _ = std::fs::remove_dir_all(&base);
}

/// A source ending in `/.` (`stuff/.`, `stuff/./`, `stuff/.//`) is its
/// contents: `cp -r stuff/. .mvn` writes `.mvn/jvm.config`, not
/// `.mvn/stuff`. The guard joins the last component as written (Rust's
/// `Path::file_name` dropped the `.`) and walks every copied or moved tree
/// to where it lands, slash entries included; a moved directory is also
/// judged by what it takes away.
#[test]
fn a_directory_s_contents_are_judged_where_they_land() {
    let ws = crate::sandbox::support::Workspace::new("cp-dot");
    let root = ws.root.canonicalize().unwrap();
    for dir in [
        ".mvn",
        "stuff",
        "sub/.mvn",
        "holder/.mvn",
        "cfg",
        "links",
        "deref",
        "other",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join("stuff/jvm.config"), "-javaagent:evil.jar\n").unwrap();
    std::fs::write(root.join("holder/.mvn/jvm.config"), "-javaagent:evil.jar\n").unwrap();
    std::fs::write(root.join("cfg/jvm.config"), "-javaagent:evil.jar\n").unwrap();
    std::os::unix::fs::symlink("../cfg", root.join("links/.mvn")).unwrap();
    std::os::unix::fs::symlink("../holder", root.join("deref/h")).unwrap();
    assert!(
        verdict(&root, "cp stuff/jvm.config .mvn").is_err(),
        "control: the plain landing"
    );
    for command in [
        "cp -r stuff/. .mvn",
        "cp -r -t .mvn stuff/.",
        "cp -a stuff/./ .mvn/",
        "cp -r stuff/.// .mvn",
        "cp -r --target-directory=.mvn stuff/.",
        "cp -r stuff/. sub/.mvn",
        "cp -rT stuff .mvn",
        "cp -rT stuff sub/.mvn",
        // a tree holding a slash entry, wherever it lands
        "cp -r holder/. other",
        "cp -r holder other",
        "cp -r -t other holder",
        "cp -rT holder other",
        // a symlink copied as it is, at a name a slash entry lies in
        "cp -r links/. other",
        // `-L` copies what the links point to
        "cp -rL deref other",
        // a moved tree: what it takes away and where it lands
        "mv holder other",
        "mv -t other holder",
        "mv -T holder other/new",
        "mv stuff/. .mvn",
    ] {
        let v = verdict(&root, command);
        assert!(
            v.as_ref().is_err_and(|e| e.contains("protected_paths")),
            "`{command}` writes or takes away protected configuration: {v:?}"
        );
    }
    for command in [
        "cp -r stuff/. other",
        "cp -r stuff other",
        "cp -a stuff/./ other/",
        "mv stuff other",
        "cp -r deref other",
    ] {
        let v = verdict(&root, command);
        assert!(v.is_ok(), "`{command}` refused: {v:?}");
    }
}

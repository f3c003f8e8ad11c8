//! The protected-paths table of `docs/security.md` is the data
//! (`tinyagents::protected::PROTECTED_PATHS`), and the guard and the
//! sandbox take their default lists from the same rows.

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

//! Checks over the reviewed compile-fail snapshots (`fail/*.stderr`):
//!
//! * none shows the generated code's internals (`__private`, `__state`,
//!   `'life…` lifetimes, `async_trait`): a user must never decode them;
//! * `docs/common-mistakes.md` is generated from the cases, so every error
//!   the DSL reports is listed there with its fix. Regenerate it after a
//!   snapshot change with `TINYAGENTS_BLESS=1 cargo test -p tinyagents-ui-tests --test snapshots`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// What a snapshot may not show: names only generated code has.
const INTERNALS: &[&str] = &[
    "__private",
    "__state",
    "__ctx",
    "__value",
    "__input",
    "__next",
    "__Tiny",
    "'life",
    "async_trait",
];

/// The page, relative to the workspace root.
const PAGE: &str = "docs/common-mistakes.md";

/// How to regenerate the page.
const REGENERATE: &str = "TINYAGENTS_BLESS=1 cargo test -p tinyagents-ui-tests --test snapshots";

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The compile-fail cases, sorted: (name, source, snapshot).
fn cases() -> Vec<(String, String, String)> {
    let dir = crate_dir().join("fail");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("read ui-tests/fail")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let read = |ext: &str| {
                std::fs::read_to_string(dir.join(format!("{n}.{ext}")))
                    .unwrap_or_else(|e| panic!("fail/{n}.{ext}: {e} (every case has a reviewed snapshot)"))
            };
            let (source, stderr) = (read("rs"), read("stderr"));
            (n, source, stderr)
        })
        .collect()
}

#[test]
fn no_snapshot_shows_generated_internals() {
    let mut found = Vec::new();
    for (name, _, stderr) in cases() {
        for (i, line) in stderr.lines().enumerate() {
            if let Some(word) = INTERNALS.iter().find(|w| line.contains(*w)) {
                found.push(format!("fail/{name}.stderr:{}: `{word}` in: {line}", i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "compile-fail snapshots show generated internals:\n{}",
        found.join("\n")
    );
}

/// The leading `//` comment of a case: what the mistake is.
fn mistake(source: &str) -> String {
    source
        .lines()
        .take_while(|l| l.starts_with("//"))
        .map(|l| l.trim_start_matches('/').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The errors of a snapshot, each with the notes that carry its fix.
fn errors(stderr: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in stderr.lines() {
        if let Some(rest) = line.strip_prefix("error") {
            let message = rest.split_once(": ").map_or(rest, |(_, m)| m);
            let code = rest.strip_prefix('[').and_then(|r| r.split_once(']')).map(|(c, _)| c);
            out.push(match code {
                Some(code) => format!("`{code}` {message}"),
                None => message.to_owned(),
            });
        } else if let Some(note) = line.trim_start().strip_prefix("= note: ") {
            // The fix a `#[diagnostic::on_unimplemented]` note gives; rustc's own notes are left out.
            let rustc = ["this error originates", "required for", "expected ", "found ", "`"];
            if let Some(last) = out.last_mut()
                && !rustc.iter().any(|r| note.starts_with(r))
            {
                last.push_str(" — ");
                last.push_str(note);
            }
        }
    }
    out
}

/// The section a case belongs to, by its name.
fn section(name: &str) -> &'static str {
    if name.starts_with("config_") {
        "`#[derive(MiddlewareConfig)]`"
    } else if name.starts_with("tool_") {
        "`#[tool]`"
    } else {
        "Hooks and `#[middleware]`"
    }
}

fn render() -> String {
    let mut page = String::from(
        "# Common mistakes\n\n\
         Each entry is a compile-fail case of `ui-tests/fail/` and the error the DSL reports for it: the\n\
         rule broken and the fix, spanned on the offending token. The page is generated from those cases\n\
         (a test fails when it is stale); regenerate it with\n\
         <!-- docs-test: ci-step cargo test --workspace -->`TINYAGENTS_BLESS=1 cargo test -p tinyagents-ui-tests --test snapshots`.\n\n\
         Two mistakes are reported by rustc itself, since a macro cannot see the rest of the module:\n\
         a generated type colliding with another item (`generated_type_collides`: rustc's E0428, and the\n\
         DSL's assertion adds the `type_name = …` fix) and two `#[middleware]` blocks for one type\n\
         (`two_middleware_blocks`: E0119, conflicting implementations; merge the blocks).\n",
    );
    let cases = cases();
    for title in [
        "Hooks and `#[middleware]`",
        "`#[derive(MiddlewareConfig)]`",
        "`#[tool]`",
    ] {
        let _ = write!(page, "\n## {title}\n");
        for (name, source, stderr) in cases.iter().filter(|(n, _, _)| section(n) == title) {
            let _ = write!(page, "\n### `{name}`\n\n");
            let what = mistake(source);
            if !what.is_empty() {
                let _ = write!(page, "{what}\n\n");
            }
            for e in errors(stderr) {
                let _ = writeln!(page, "- {e}");
            }
        }
    }
    page
}

fn page_path() -> PathBuf {
    crate_dir().join("..").join(Path::new(PAGE))
}

#[test]
fn common_mistakes_page_lists_every_case() {
    let generated = render();
    if std::env::var_os("TINYAGENTS_BLESS").is_some() {
        std::fs::write(page_path(), &generated).expect("write docs/common-mistakes.md");
        return;
    }
    let committed = std::fs::read_to_string(page_path()).unwrap_or_default();
    assert!(
        committed == generated,
        "{PAGE} is stale (it differs from what the ui-tests generate); regenerate it with:\n    {REGENERATE}"
    );
    for (name, _, stderr) in cases() {
        assert!(
            committed.contains(&format!("### `{name}`")),
            "{name} is not listed in {PAGE}"
        );
        assert!(!errors(&stderr).is_empty(), "fail/{name}.stderr has no error");
    }
}

//! The runtime knows no built-in: no source file of `tinyagents` outside the
//! built-ins' folder (`library/`) and the config registry
//! that lists them (`config/`) names an item the library exports. The
//! runtime defines the protocols (`harness::interrupt`,
//! `harness::child_run`, the store traits, `harness::tool::CallGuard`,
//! `sandbox::ShellRules`) and
//! the built-ins implement them.
//!
//! The names are derived from the library's own exports (every `pub use` of
//! its modules that re-exports one of its files, and the items its module
//! files define), never listed here; comments and string literals are not
//! code, so a doc comment naming a built-in as an example is fine.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::rust_files;

/// Source files that still name a built-in, each with the reason. An
/// exception that no longer names a built-in fails the test: remove it.
const EXCEPTIONS: &[(&str, &str)] = &[
    // Not an exception to the rule: the crate root publishes the library.
    (
        "lib.rs",
        "mounts the library at `tinyagents::middleware` (and `tinyagents::external_hooks`)",
    ),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tinyagents/src")
}

fn relative(path: &Path) -> String {
    path.strip_prefix(src())
        .expect("under src")
        .to_string_lossy()
        .replace('\\', "/")
}

/// The text with comments and string and char literals blanked out (kept as
/// spaces, so line numbers hold).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |s: &[u8], out: &mut String| {
        for &c in s {
            out.push(if c == b'\n' { '\n' } else { ' ' });
        }
    };
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
            blank(&rest[..end], &mut out);
            i += end;
        } else if rest.starts_with(b"/*") {
            let end = text[i + 2..].find("*/").map_or(rest.len(), |e| e + 4);
            blank(&rest[..end], &mut out);
            i += end;
        } else if rest.starts_with(b"r#\"") || rest.starts_with(b"r\"") {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let start = 2 + hashes;
            let end = text[i + start..]
                .find(&close)
                .map_or(rest.len(), |e| start + e + close.len());
            blank(&rest[..end], &mut out);
            i += end;
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(rest.len());
            blank(&rest[..end], &mut out);
            i += end;
        } else if rest[0] == b'\'' && rest.len() > 2 && (rest[2] == b'\'' || rest[1] == b'\\') {
            // a char literal ('a', '\n', '\''); a lifetime has no closing quote
            let end = rest[2..].iter().position(|&c| c == b'\'').map_or(1, |e| e + 3);
            blank(&rest[..end], &mut out);
            i += end;
        } else {
            let c = text[i..].chars().next().expect("a char");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The names a `pub use` statement's text exports (`a::{B, c::D as E}` gives B, E).
fn exported_names(statement: &str) -> Vec<String> {
    let tokens: Vec<&str> = statement
        .split(|c: char| c == '{' || c == '}' || c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
        .collect();
    let mut names = Vec::new();
    let mut k = 0;
    while k < tokens.len() {
        let t = tokens[k];
        if tokens.get(k + 1) == Some(&"as") {
            if let Some(alias) = tokens.get(k + 2) {
                names.push((*alias).to_owned());
            }
            k += 3;
            continue;
        }
        let last = t.rsplit("::").next().unwrap_or(t);
        if !t.ends_with("::") && !last.is_empty() && last != "self" && last != "*" && last.chars().all(is_ident) {
            names.push(last.to_owned());
        }
        k += 1;
    }
    names
}

/// Every name the library exports: its public module files' `pub use` of
/// its own files (not the core's items it re-exports for old paths) and the
/// items they define themselves.
fn builtin_names() -> BTreeSet<String> {
    let library = src().join("library");
    // The library's public surface: its root and its concern folders' module files (what `tinyagents::middleware` re-exports).
    let mut files = vec![library.join("mod.rs")];
    for entry in std::fs::read_dir(&library).expect("the library folder") {
        let folder = entry.expect("a directory entry").path().join("mod.rs");
        if folder.is_file() {
            files.push(folder);
        }
    }
    let mut names = BTreeSet::new();
    for file in &files {
        let code = code_only(&std::fs::read_to_string(file).expect("a library file"));
        let mut rest = code.as_str();
        while let Some(at) = rest.find("pub use ") {
            let after = &rest[at + "pub use ".len()..];
            let end = after.find(';').expect("a `pub use` ends with `;`");
            let statement = after[..end].trim();
            if !["crate::", "super::", "self::super"]
                .iter()
                .any(|p| statement.starts_with(p))
            {
                names.extend(exported_names(statement));
            }
            rest = &after[end..];
        }
        for line in code.lines() {
            for kind in [
                "pub fn ",
                "pub struct ",
                "pub enum ",
                "pub trait ",
                "pub const ",
                "pub static ",
                "pub type ",
            ] {
                if let Some(after) = line.strip_prefix(kind) {
                    let after = after.strip_prefix("fn ").unwrap_or(after);
                    let name: String = after.chars().take_while(|&c| is_ident(c)).collect();
                    names.insert(name);
                }
            }
        }
    }
    // Only what the library defines (not a core item it passes on), and not
    // a name the runtime defines for an item of its own (a `SCHEMA` of its
    // own): text cannot tell two items of one name apart.
    let defined_in = |inside: bool| {
        let mut all = Vec::new();
        rust_files(&src(), &mut all);
        let mut defined = BTreeSet::new();
        for file in all.iter().filter(|f| relative(f).starts_with("library/") == inside) {
            let code = code_only(&std::fs::read_to_string(file).expect("a source file"));
            for line in code.lines() {
                let line = line.trim_start();
                let Some(after) = line.strip_prefix("pub ").or_else(|| {
                    line.strip_prefix("pub(crate) ")
                        .or_else(|| line.strip_prefix("pub(super) "))
                }) else {
                    if let Some(after) = [
                        "fn ", "struct ", "enum ", "trait ", "const ", "static ", "type ", "mod ",
                    ]
                    .iter()
                    .find_map(|k| line.strip_prefix(k).map(|a| (k, a)))
                    {
                        defined.insert(after.1.chars().take_while(|&c| is_ident(c)).collect::<String>());
                    }
                    continue;
                };
                let after = after.trim_start_matches("async ").trim_start_matches("const fn ");
                for kind in [
                    "fn ", "struct ", "enum ", "trait ", "const ", "static ", "type ", "mod ",
                ] {
                    if let Some(rest) = after.strip_prefix(kind) {
                        defined.insert(rest.chars().take_while(|&c| is_ident(c)).collect::<String>());
                    }
                }
            }
        }
        defined
    };
    let library = defined_in(true);
    let runtime = defined_in(false);
    names.retain(|n| library.contains(n) && !runtime.contains(n));
    names
}

#[test]
fn the_runtime_names_no_built_in() {
    let names = builtin_names();
    // The derivation itself is checked, so a parser that finds nothing fails here, not silently.
    for known in [
        "HumanInTheLoopMiddleware",
        "HitlResume",
        "PriceBudget",
        "ShellFsGuardMiddleware",
        "catalog",
    ] {
        assert!(
            names.contains(known),
            "the library's exports should include `{known}`: {names:?}"
        );
    }
    for core in ["ToolLists", "RateLimitStore", "TokenRates", "Resume", "Interrupt"] {
        assert!(
            !names.contains(core),
            "`{core}` is the runtime's, re-exported by the library: {names:?}"
        );
    }
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut scanned = 0;
    let mut found = Vec::new();
    let mut needed = std::collections::BTreeSet::new();
    for file in &files {
        let rel = relative(file);
        if rel.starts_with("library/") || rel.starts_with("config/") {
            continue;
        }
        let excepted = EXCEPTIONS
            .iter()
            .find(|(e, _)| rel == *e || (e.ends_with('/') && rel.starts_with(e)))
            .map(|(e, _)| *e);
        scanned += 1;
        let code = code_only(&std::fs::read_to_string(file).expect("a source file"));
        for (n, line) in code.lines().enumerate() {
            let mut hits = Vec::new();
            // a path into the library reaches a crate-private item of a built-in too
            // (`crate::library::design_names` is the one seam: the design documents' paths)
            if line.contains("crate::library::") && !line.contains("crate::library::design_names::") {
                hits.push(format!("{rel}:{}: a path into `crate::library`", n + 1));
            }
            for word in line.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()) {
                if names.contains(word) {
                    hits.push(format!("{rel}:{}: `{word}`", n + 1));
                }
            }
            match excepted {
                Some(e) if !hits.is_empty() => {
                    needed.insert(e);
                }
                Some(_) => {}
                None => found.extend(hits),
            }
        }
    }
    assert!(
        scanned > 50,
        "only {scanned} runtime files scanned: is the source tree where this test looks?"
    );
    assert!(
        found.is_empty(),
        "the runtime names built-ins (the library's exports) in code; define a protocol in the core and let \
         the built-in implement it (see harness::interrupt, harness::child_run):\n{}",
        found.join("\n")
    );
    let stale: Vec<&str> = EXCEPTIONS
        .iter()
        .map(|(e, _)| *e)
        .filter(|e| !needed.contains(e))
        .collect();
    assert!(
        stale.is_empty(),
        "these exceptions no longer name a built-in: remove them from EXCEPTIONS: {stale:?}"
    );
}

#[test]
fn the_scanner_sees_code_and_not_comments_or_strings() {
    let code = code_only("let a = PriceBudget::of(ctx); // PriceBudget\n/// HitlResume\nlet s = \"HitlResume\";\n");
    let words: Vec<&str> = code.split(|c: char| !is_ident(c)).filter(|w| !w.is_empty()).collect();
    assert_eq!(words, ["let", "a", "PriceBudget", "of", "ctx", "let", "s"]);
    assert_eq!(
        exported_names("human_in_the_loop::{ApprovalRequest, x::Decision as D, self}"),
        ["ApprovalRequest", "D"]
    );
}

mod protocols {
    use std::sync::Arc;

    use serde_json::json;
    use tinyagents::harness::interrupt::Interrupt;
    use tinyagents::prelude::*;
    use tinyagents::testing::RecordingTool;

    /// A pausing middleware of a user's own: it records an interrupt and pauses before every batch.
    #[before_tool]
    fn ask_first(ctx: &mut RunContext) -> Result<()> {
        ctx.locals()
            .interrupts()
            .record(Interrupt::new("my_gate", json!({"asked": true})));
        Err(TinyAgentsError::interrupted(
            Some("my_gate".into()),
            "waiting for an answer",
        ))
    }

    /// A child's pause by any middleware, which no middleware of the parent
    /// carries up, fails the parent clearly (naming the pausing middleware)
    /// instead of pausing a run nobody can resume.
    #[tokio::test]
    async fn a_child_pause_nobody_carries_up_is_a_config_error_naming_its_owner() {
        let delete = RecordingTool::new("delete").returning("deleted");
        let child: Agent<()> = Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
            ScriptedTurn::text("child done"),
        ]))
        .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
        .with_stack(MiddlewareStack::new().with(AskFirst).unwrap());
        let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
        let parent: Agent<()> = Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "clean"}))]),
            ScriptedTurn::text("parent done"),
        ]))
        .with_tools(ToolRegistry::new().with(helper).unwrap());
        let mut ctx = RunContext::new(RunConfig::new("p1"), ());
        let err = parent.run(&mut ctx, &(), "go").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Config, "{err}");
        assert!(
            err.to_string().contains("no `my_gate` to carry the request up"),
            "{err}"
        );
        assert!(delete.calls().is_empty());
    }
}

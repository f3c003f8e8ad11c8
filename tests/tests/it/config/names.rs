//! One name per concept: a built-in's file, config `type`, stack name and
//! type name (less `Middleware`) agree, for every entry of the catalog; the
//! paths the design documents write resolve; `docs/names.md`, the one page
//! of names and aliases, is generated and must not go stale.

use std::path::{Path, PathBuf};

use tinyagents::docs::{aliases, render_names, NAMES_MD, OTHER_ALIASES, REGENERATE_NAMES};
use tinyagents::harness::middleware::MiddlewareDoc;
use tinyagents::middleware::catalog;

/// `shell_fs_guard` → `ShellFsGuard`.
fn camel(name: &str) -> String {
    name.split('_')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// What disagrees in one built-in's names (empty when they are one name).
fn disagreements(d: &MiddlewareDoc) -> Vec<String> {
    let mut wrong = Vec::new();
    let file = Path::new(d.file);
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    // a built-in with a folder of its own is declared in that folder's mod.rs
    let stem = if stem == "mod" {
        file.parent()
            .and_then(|p| p.file_name())
            .and_then(|s| s.to_str())
            .unwrap_or_default()
    } else {
        stem
    };
    if stem != d.name {
        wrong.push(format!(
            "`{}` is declared in `{}`: name the file `{}.rs`",
            d.name, d.file, d.name
        ));
    }
    let expected = format!("{}Middleware", camel(d.name));
    if d.type_name != expected {
        wrong.push(format!(
            "`{}` is the type `{}`: name it `{expected}`",
            d.name, d.type_name
        ));
    }
    if let Some(t) = d.config_type
        && t != d.name
    {
        wrong.push(format!(
            "`{}` has config `type = \"{t}\"`: make it `{}`",
            d.name, d.name
        ));
    }
    // folders by concern: library/<concern>/<name>.rs (or library/<name>/mod.rs)
    let in_library = d.file.replace('\\', "/");
    match in_library.rsplit_once("/src/library/") {
        Some((_, rest)) if rest.matches('/').count() == 1 => {}
        _ => wrong.push(format!(
            "`{}` is declared in `{}`, not in a concern folder of the library",
            d.name, d.file
        )),
    }
    wrong
}

#[test]
fn each_builtin_has_one_name_for_file_config_type_stack_and_type() {
    let docs = catalog();
    assert!(
        docs.len() >= 35,
        "the catalog lists every built-in ({} here)",
        docs.len()
    );
    let wrong: Vec<String> = docs.iter().flat_map(|d| disagreements(d)).collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_builtin_whose_names_disagree_is_named() {
    let d = *catalog().into_iter().find(|d| d.name == "tool_policy").unwrap();
    assert!(disagreements(&d).is_empty());
    let moved = MiddlewareDoc {
        file: "tinyagents/src/library/policy/policy.rs",
        ..d
    };
    assert_eq!(
        disagreements(&moved),
        ["`tool_policy` is declared in `tinyagents/src/library/policy/policy.rs`: name the file `tool_policy.rs`"]
    );
    let typed = MiddlewareDoc {
        type_name: "PolicyMiddleware",
        ..d
    };
    assert!(disagreements(&typed)[0].contains("name it `ToolPolicyMiddleware`"));
    let keyed = MiddlewareDoc {
        config_type: Some("policy"),
        ..d
    };
    assert!(disagreements(&keyed)[0].contains("make it `tool_policy`"));
    let loose = MiddlewareDoc {
        file: "tinyagents/src/library/tool_policy.rs",
        ..d
    };
    assert!(disagreements(&loose)[0].contains("not in a concern folder"));
}

/// The design documents' imports, as they write them.
#[test]
fn the_paths_the_design_documents_write_resolve() {
    use tinyagents::harness::middleware::summarization::trim_messages;
    use tinyagents::harness::middleware::{
        ContextCompressionMiddleware, ContextualToolSelectionMiddleware, LoggingMiddleware, MessageTrimMiddleware,
        MiddlewareStack, PromptCacheGuardMiddleware, ToolPolicyMiddleware, UsageAccountingMiddleware,
    };
    let _ = trim_messages;
    let names = [
        std::any::type_name::<ToolPolicyMiddleware>(),
        std::any::type_name::<ContextualToolSelectionMiddleware>(),
        std::any::type_name::<LoggingMiddleware>(),
        std::any::type_name::<MessageTrimMiddleware>(),
        std::any::type_name::<ContextCompressionMiddleware>(),
        std::any::type_name::<PromptCacheGuardMiddleware>(),
        std::any::type_name::<UsageAccountingMiddleware>(),
        std::any::type_name::<MiddlewareStack<()>>(),
    ];
    for n in names {
        assert!(n.starts_with("tinyagents::"), "{n}");
    }
    // every listed alias names an item at its one path
    for a in aliases() {
        assert!(a.is.starts_with("tinyagents::"), "{a:?}");
        assert_ne!(a.alias, a.is, "an alias is another path: {a:?}");
    }
    assert_eq!(OTHER_ALIASES.len(), 1, "each other alias is compiled above");
}

#[test]
fn committed_names_md_is_up_to_date() {
    let generated = render_names();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(NAMES_MD);
    if std::env::var_os("TINYAGENTS_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write docs/names.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{NAMES_MD} is stale (it differs from what `render_names()` generates); regenerate it with:\n    {REGENERATE_NAMES}"
    );
}

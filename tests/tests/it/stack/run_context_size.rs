//! `RunContext` stays small: a hook reaches most of the run through the
//! facets it asks for (`events()`, `flow()`/`flow_mut()`, `locals()`,
//! `policy()`/`policy_mut()`), each its own type in
//! `harness/context/`, so the context itself keeps only its builders, its
//! core accessors and those facets.

use std::path::Path;

use crate::support::rust_files;

/// The most public methods `RunContext` itself may have.
const MAX_PUBLIC_METHODS: usize = 35;

/// The public methods of every inherent `impl … RunContext<…>` block in
/// `text` (a block opens at the start of a line and closes at the first
/// `}` at the start of a line after it), as `file: name`.
fn public_methods(file: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if !inside {
            let head = line.trim_end();
            inside = head.starts_with("impl")
                && head.contains(" RunContext<")
                && !head.contains(" for ")
                && head.ends_with('{');
            continue;
        }
        if line.starts_with('}') {
            inside = false;
            continue;
        }
        let Some(rest) = line.strip_prefix("    pub ") else {
            continue;
        };
        let rest = rest.trim_start_matches("const ").trim_start_matches("async ");
        if let Some(sig) = rest.strip_prefix("fn ") {
            let name: String = sig.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.push(format!("{file}: {name}"));
        }
    }
    found
}

#[test]
fn run_context_has_at_most_35_public_methods() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tinyagents/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut methods = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("a readable source file");
        let file = path
            .strip_prefix(&src)
            .expect("under src")
            .to_string_lossy()
            .replace('\\', "/");
        methods.extend(public_methods(&file, &text));
    }
    // The parse found the context (its builder and the facets at least), so
    // a count of zero cannot pass by accident.
    for must in ["new", "events", "flow", "flow_mut", "locals", "policy", "policy_mut"] {
        assert!(
            methods.iter().any(|m| m.ends_with(&format!(": {must}"))),
            "`RunContext::{must}` was not found in an `impl RunContext` block under tinyagents/src; \
             the count below would be wrong: fix the parse in this test. Found: {methods:#?}"
        );
    }
    assert!(
        methods.len() <= MAX_PUBLIC_METHODS,
        "`RunContext` has {} public methods, more than {MAX_PUBLIC_METHODS}; put the new method on the facet \
         it belongs to (harness/context/: events, flow, locals, policy) or a new facet. Methods: {methods:#?}",
        methods.len()
    );
}

#[test]
fn the_count_sees_every_kind_of_public_method() {
    let text = "impl<Ctx> RunContext<Ctx> {\n    pub fn a(&self) {}\n    pub async fn b(&self) {}\n    \
                pub(crate) fn c(&self) {}\n    fn d(&self) {}\n}\nimpl<Ctx> Clone for RunContext<Ctx> {\n    \
                pub fn e(&self) {}\n}\nimpl Other {\n    pub fn f(&self) {}\n}\n";
    assert_eq!(public_methods("x.rs", text), ["x.rs: a", "x.rs: b"]);
}

//! Ordering with the least displacement (issue 15, item 5): the middleware
//! that declares a constraint moves, its target and the others keep their
//! registration order; required names must be registered, `_if_present`
//! ones are optional; every built-in's constraints resolve.

use std::borrow::Cow;
use std::sync::Arc;

use async_trait::async_trait;
use tinyagents::prelude::*;

/// A middleware with only a name and ordering constraints.
struct Named(MiddlewareInfo);

impl Named {
    fn new(name: &'static str) -> Self {
        Self(MiddlewareInfo::new(name).with_hooks(HookSet::BEFORE_MODEL))
    }
    fn map(self, f: impl FnOnce(MiddlewareInfo) -> MiddlewareInfo) -> Self {
        Self(f(self.0))
    }
}

#[async_trait]
impl Middleware<()> for Named {
    fn name(&self) -> &str {
        &self.0.name
    }
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL
    }
    fn info(&self) -> MiddlewareInfo {
        self.0.clone()
    }
}

#[test]
fn a_before_constraint_moves_the_declaring_middleware_not_its_target() {
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Named::new("log")).unwrap();
    stack.add(Named::new("retry")).unwrap();
    stack.add(Named::new("span").map(|i| i.before("log"))).unwrap();
    assert_eq!(stack.names(), ["span", "log", "retry"]);
}

#[test]
fn an_after_constraint_moves_the_declaring_middleware_just_after_its_target() {
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Named::new("a")).unwrap();
    stack.add(Named::new("t")).unwrap();
    stack.add(Named::new("b")).unwrap();
    stack.add(Named::new("x").map(|i| i.before("b").after("a"))).unwrap();
    assert_eq!(stack.names(), ["a", "t", "x", "b"]);
}

#[test]
fn a_required_name_that_is_not_registered_is_refused_with_did_you_mean() {
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Named::new("logging")).unwrap();
    let err = stack.add(Named::new("span").map(|i| i.before("loging"))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    let msg = err.to_string();
    assert!(msg.contains("did you mean `logging`?"), "{msg}");
    assert!(
        msg.contains("before_if_present = [\"loging\"]"),
        "the error names the optional form: {msg}"
    );
    assert_eq!(stack.names(), ["logging"]);
}

#[test]
fn an_optional_constraint_applies_when_its_target_arrives_later() {
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Named::new("a")).unwrap();
    stack
        .add(Named::new("span").map(|i| i.before_if_present("log")))
        .unwrap();
    assert_eq!(stack.names(), ["a", "span"], "absent: ignored");
    stack.add(Named::new("log")).unwrap();
    assert_eq!(stack.names(), ["a", "span", "log"]);
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Named::new("log")).unwrap();
    stack.add(Named::new("a")).unwrap();
    stack
        .add(Named::new("span").map(|i| i.before_if_present(Cow::Borrowed("log"))))
        .unwrap();
    assert_eq!(stack.names(), ["span", "log", "a"]);
}

#[test]
fn every_built_in_registers_alone_in_a_config_file_and_in_the_default_stack() {
    use tinyagents::config::MiddlewareRegistry;
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let types: Vec<&str> = registry.types().collect();
    assert!(types.len() > 10, "{types:?}");
    for ty in &types {
        // alone, with its defaults: no built-in requires another one to be registered
        // (a built-in whose config has required fields fails on those, never on ordering)
        let text = format!("[[middleware]]\ntype = \"{ty}\"");
        if let Err(e) = registry.stack_from_toml(&text) {
            let msg = e.to_string();
            assert!(
                !msg.contains("is registered") && !msg.contains("cycle"),
                "`{ty}` alone does not resolve: {msg}"
            );
        }
    }
    // the default stack, and the ordering built-ins in an order their constraints change
    assert!(registry.stack_from_toml("").is_ok());
    let text = "[[middleware]]\ntype = \"delta_compression\"\n\
                [[middleware]]\ntype = \"model_retry\"\n\
                [[middleware]]\ntype = \"structured_output\"\nschema = '{\"type\": \"object\"}'\n";
    let stack = registry.stack_from_toml(text).unwrap();
    let names = stack.names();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(at("structured_output") < at("model_retry"), "{names:?}");
    assert!(at("delta_compression") > at("model_retry"), "{names:?}");
    assert!(at("delta_compression") > at("structured_output"), "{names:?}");
    let _ = Arc::new(());
}

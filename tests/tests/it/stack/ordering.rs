//! Ordering constraints (a stable topological order), cycles and duplicate names.

use tinyagents::prelude::*;
use tinyagents_tests::{Log, Recorder};

#[test]
fn constraints_reorder_only_what_they_name() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("a", &log)).unwrap();
    stack.add(Recorder::new("b", &log)).unwrap();
    stack.add(Recorder::new("tracing", &log).before("a")).unwrap();
    stack.add(Recorder::new("c", &log)).unwrap();
    stack.add(Recorder::new("retry", &log).after("c").before("b")).unwrap();
    // tracing moves before a; retry must follow c yet precede b, so b moves after retry
    assert_eq!(stack.names(), ["tracing", "a", "c", "retry", "b"]);
    assert_eq!(
        stack.implementors(HookKind::WrapModel),
        ["tracing", "a", "c", "retry", "b"]
    );
}

#[test]
fn a_constraint_naming_an_absent_middleware_is_a_config_error_that_says_the_fix() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("b", &log)).unwrap();
    let err = stack.add(Recorder::new("a", &log).after("not-registered")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    let msg = err.to_string();
    assert!(
        msg.contains("`a`") && msg.contains("`not-registered`") && msg.contains("after_if_present"),
        "{msg}"
    );
    assert_eq!(stack.names(), ["b"], "the stack is unchanged");
}

#[test]
fn a_cycle_is_a_config_error_naming_the_cycle_and_leaves_the_stack_unchanged() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("a", &log)).unwrap();
    stack.add(Recorder::new("b", &log).after("a")).unwrap();
    let err = stack.add(Recorder::new("c", &log).after("b").before("a")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    let msg = err.to_string();
    assert!(msg.contains("a → b → c → a"), "{msg}");
    assert_eq!(stack.names(), ["a", "b"]);
}

#[test]
fn duplicate_names_are_rejected_unless_the_second_gets_its_own_name() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("audit", &log)).unwrap();
    let err = stack.add(Recorder::new("audit", &log)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(err.to_string().contains("`audit` is already registered"), "{err}");
    assert!(err.to_string().contains("add_named"), "the error says the fix: {err}");
    stack.add_named("audit-2", Recorder::new("audit", &log)).unwrap();
    assert_eq!(stack.names(), ["audit", "audit-2"]);
}

#[test]
#[should_panic(expected = "already registered")]
fn push_panics_on_a_duplicate_and_says_why() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.push(std::sync::Arc::new(Recorder::new("x", &log)));
    stack.push(std::sync::Arc::new(Recorder::new("x", &log)));
}

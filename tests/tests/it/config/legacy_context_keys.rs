//! The legacy keys of `context_window` (`max_tokens`, `compact_on_overflow`, from
//! the `ContextFactory` of QueryMT's docs)
//! are accepted with a deprecation notice naming the keys to write instead
//! (issue 15, item 9); other unknown keys are still refused.

use std::sync::Arc;

use tinyagents::config::{from_toml_str, BuildMiddleware, MiddlewareRegistry};
use tinyagents::middleware::{ContextConfig, ContextMiddleware};
use tinyagents::prelude::*;
use tinyagents::testing::{assert_valid_transcript, trace, CollectingSink};

#[test]
fn the_legacy_keys_parse_and_max_tokens_is_the_window() {
    let c: ContextConfig = from_toml_str("max_tokens = 1000\ncompact_on_overflow = true").unwrap();
    let notices = c.deprecations();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(notices[0].contains("`max_tokens`") && notices[0].contains("fallback_max_tokens = 1000"));
    assert!(notices[1].contains("`compact_on_overflow`") && notices[1].contains("compact_at_percent"));
    let m: ContextMiddleware = c.build();
    assert_eq!(m.context_window(), 1000);
    // the new keys alone: no notice
    let c: ContextConfig = from_toml_str("fallback_max_tokens = 1000").unwrap();
    assert!(c.deprecations().is_empty());
}

#[test]
fn other_unknown_keys_are_still_refused() {
    let err = from_toml_str::<ContextConfig>("max_tokenz = 1000")
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_tokenz"), "{err}");
    let err = from_toml_str::<ContextConfig>("max_tokens = 0")
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_tokens"), "a legacy key is still validated: {err}");
}

async fn run_file(text: &str, input: &str) -> (AgentRun, Vec<String>) {
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let stack = registry.stack_from_toml(text).unwrap();
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::text("ok")])).with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), input).await.unwrap();
    assert_valid_transcript(&run.messages);
    (run, trace(&sink.events()))
}

#[tokio::test]
async fn a_legacy_file_runs_and_each_run_reports_the_deprecation_once() {
    let text = "[[middleware]]\ntype = \"context\"\nmax_tokens = 128000\ncompact_on_overflow = true\n";
    let (_, trace) = run_file(text, "hi").await;
    let notices: Vec<&String> = trace.iter().filter(|l| l.contains("deprecated")).collect();
    assert_eq!(notices.len(), 2, "{trace:?}");
    assert!(notices[0].starts_with("notice context_window: `context_window` option `max_tokens` is deprecated"));
    assert!(notices[1].contains("compact_on_overflow"));
}

#[tokio::test]
async fn compact_on_overflow_false_warns_but_never_compacts() {
    let long = "word ".repeat(400);
    let off = "[[middleware]]\ntype = \"context\"\nmax_tokens = 50\ncompact_on_overflow = false\nkeep_messages = 1\n";
    let (run, trace) = run_file(off, &long).await;
    assert!(run.compressions.is_empty(), "{trace:?}");
    assert!(!trace.iter().any(|l| l.starts_with("compressed")), "{trace:?}");
    let warned: Vec<&String> = trace.iter().filter(|l| l.contains("compaction is off")).collect();
    assert_eq!(warned.len(), 1, "{trace:?}");
}

//! The exact token counter (feature `exact-tokens`): counts match the
//! encodings, and a context middleware measures with it.
#![cfg(feature = "exact-tokens")]

use std::sync::Arc;

use tinyagents::harness::message::Message;
use tinyagents::harness::tokens::{ApproxTokenCounter, TiktokenCounter, TokenCounter};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

#[test]
fn counts_follow_the_encoding() {
    let o200k = TiktokenCounter::o200k();
    let cl100k = TiktokenCounter::cl100k();
    assert_eq!(o200k.encoding(), "o200k_base");
    assert_eq!(o200k.count_text(""), 0);
    assert_eq!(o200k.count_text("Hello, world!"), 4);
    assert_eq!(cl100k.count_text("Hello, world!"), 4);
    // a message adds the fixed overhead
    assert_eq!(
        o200k.count_message(&Message::user("Hello, world!")),
        4 + ApproxTokenCounter::MESSAGE_OVERHEAD
    );
}

#[tokio::test]
async fn trimming_measures_with_the_exact_counter() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let trim =
        MessageTrimMiddleware::new(TrimStrategy::LastTokens(10)).with_counter(Arc::new(TiktokenCounter::o200k()));
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(MiddlewareStack::new().with(trim).unwrap());
    let input = vec![
        Message::user("An older question that no longer fits."),
        Message::assistant("An older answer."),
        Message::user("Hello, world!"),
    ];
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), input)
        .await
        .unwrap();
    // "Hello, world!" is 4 + 4 = 8 tokens; the next older message does not fit in 10
    let sent = &model.requests()[0].messages;
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text(), "Hello, world!");
}

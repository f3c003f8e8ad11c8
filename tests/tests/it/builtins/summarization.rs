//! `summarization`: triggers (messages, tokens, fraction), the kept window and
//! system messages, the tool-call/tool-result pairing, summary reuse and
//! extension across steps, provenance, the model-backed summariser, failure,
//! and bad configuration.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tinyagents::config::from_toml_str;
use tinyagents::harness::message::MessageId;
use tinyagents::harness::tokens::{ApproxTokenCounter, TokenCounter};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use super::support::{ids, msg, two_lookups_history};
use tinyagents::testing::RecordingTool;

/// Records what it was asked to summarise.
#[derive(Default)]
struct Recorder {
    calls: Mutex<Vec<(Vec<String>, Option<String>)>>,
}

#[async_trait]
impl Summarizer for Recorder {
    fn id(&self) -> &str {
        "recorder"
    }
    async fn summarize(&self, messages: &[Message], previous: Option<&str>) -> Result<Summary> {
        let ids: Vec<String> = messages.iter().map(|m| m.id.to_string()).collect();
        self.calls
            .lock()
            .unwrap()
            .push((ids.clone(), previous.map(str::to_owned)));
        let text = match previous {
            Some(p) => format!("{p} + {}", ids.join(",")),
            None => ids.join(","),
        };
        Ok(Summary {
            text,
            usage: Usage::default(),
        })
    }
}

struct Failing;

#[async_trait]
impl Summarizer for Failing {
    fn id(&self) -> &str {
        "failing"
    }
    async fn summarize(&self, _: &[Message], _: Option<&str>) -> Result<Summary> {
        Err(TinyAgentsError::model("summariser overloaded", false))
    }
}

async fn run_once(s: SummarizationMiddleware) -> (ModelRequest, AgentRun, Vec<AgentEvent>) {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_system_prompt("You are helpful.")
        .with_stack(MiddlewareStack::new().with(s).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), two_lookups_history()).await.unwrap();
    (model.requests().remove(0), run, sink.events())
}

#[tokio::test]
async fn a_message_trigger_summarises_the_older_part_and_keeps_the_window() {
    let (sent, run, _) = run_once(SummarizationMiddleware::new(SummaryTrigger::messages(5)).keep_messages(4)).await;
    // the 4 newest are a2, t1, t2, u3; the system message stays first
    assert_eq!(ids(&sent.messages)[0], "sys");
    assert_eq!(ids(&sent.messages)[2..], ["a2", "t1", "t2", "u3"]);
    let summary = &sent.messages[1];
    assert_eq!(summary.role, Role::User);
    assert!(summary.text().starts_with("[Summary of the earlier conversation]"));
    assert!(summary.text().contains("user: first question"), "{}", summary.text());
    assert!(summary.text().contains("assistant: first answer"));
    // the stored history is untouched
    assert_eq!(ids(&run.messages[..8]), ids(&two_lookups_history()));
}

#[tokio::test]
async fn below_every_trigger_nothing_changes() {
    let (sent, run, events) = run_once(SummarizationMiddleware::new(
        SummaryTrigger::messages(8).or_tokens(10_000),
    ))
    .await;
    assert_eq!(ids(&sent.messages), ids(&two_lookups_history()));
    assert!(run.compressions.is_empty());
    assert!(!events.iter().any(|e| e.kind() == EventKind::Compressed));
}

/// LangChain's known bug: a cut between an assistant tool-call message and
/// its tool results leaves orphan results the provider rejects.
#[tokio::test]
async fn the_kept_window_never_separates_a_tool_call_from_its_results() {
    for keep in 1..=7 {
        let (sent, _, _) =
            run_once(SummarizationMiddleware::new(SummaryTrigger::messages(1)).keep_messages(keep)).await;
        let m = &sent.messages;
        for (i, t) in m.iter().enumerate().filter(|(_, t)| t.role == Role::Tool) {
            let call = t.tool_call_id.as_deref().unwrap();
            assert!(
                m[..i].iter().any(|a| a.tool_calls.iter().any(|c| c.id == call)),
                "keep={keep}: tool result {call} separated from its call: {:?}",
                ids(m)
            );
        }
    }
    // keep = 2 would naively keep [t2, u3]: the whole tool unit is kept instead
    let (sent, _, _) = run_once(SummarizationMiddleware::new(SummaryTrigger::messages(1)).keep_messages(2)).await;
    assert_eq!(ids(&sent.messages)[2..], ["a2", "t1", "t2", "u3"]);
}

#[tokio::test]
async fn provenance_fields_are_filled_and_consistent() {
    let counter = ApproxTokenCounter::default();
    let (sent, run, events) =
        run_once(SummarizationMiddleware::new(SummaryTrigger::messages(5)).keep_messages(1)).await;
    assert_eq!(ids(&sent.messages)[2..], ["u3"]);
    let summary = &sent.messages[1];

    let recorded: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Compressed { provenance, .. } => Some((**provenance).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(recorded.len(), 1);
    assert_eq!(run.compressions, recorded, "the run keeps what the event said");
    let p = &recorded[0];
    assert_eq!(p.middleware, "summarization");
    assert_eq!(p.policy_version, "summarization/1+concat");
    assert_eq!(p.step, 1);
    let replaced: Vec<&str> = p.source_message_ids.iter().map(MessageId::as_str).collect();
    assert_eq!(replaced, ["u1", "a1", "u2", "a2", "t1", "t2"]);
    assert_eq!(p.source_artifact_ids, ["c1", "c2"]);
    assert_eq!(p.replacement_message_id.as_ref(), Some(&summary.id));
    let original: u64 = two_lookups_history()[1..7]
        .iter()
        .map(|m| counter.count_message(m))
        .sum();
    assert_eq!(p.original_tokens, original);
    assert_eq!(p.compressed_tokens, counter.count_message(summary));
    assert_eq!(p.prompt_segment_ids, ["system"]);
    assert_ne!(p.prefix_before.0, 0);
    assert_eq!(p.prefix_before, p.prefix_after);
    assert!(p.stable_prefix_preserved);
    assert_eq!(
        p.prefix_after,
        tinyagents::harness::cache::PromptCacheLayout::of(&sent).fingerprint,
        "the fingerprint after is the sent request's"
    );
}

#[tokio::test]
async fn a_token_or_fraction_trigger_fires_on_the_estimate() {
    let request_tokens = {
        let (sent, _, _) = run_once(SummarizationMiddleware::new(SummaryTrigger::tokens(1_000_000))).await;
        ApproxTokenCounter::default().count_request(&sent)
    };
    let (sent, _, _) =
        run_once(SummarizationMiddleware::new(SummaryTrigger::tokens(request_tokens - 1)).keep_messages(1)).await;
    assert_eq!(ids(&sent.messages)[2..], ["u3"]);
    let (sent, _, _) =
        run_once(SummarizationMiddleware::new(SummaryTrigger::tokens(request_tokens)).keep_messages(1)).await;
    assert_eq!(sent.messages.len(), 8, "at the threshold nothing fires");
    // 0.5 of a window of twice the request (minus one) is just below it
    let window = request_tokens * 2 - 2;
    let (sent, _, _) =
        run_once(SummarizationMiddleware::new(SummaryTrigger::fraction(0.5, window)).keep_messages(1)).await;
    assert_eq!(ids(&sent.messages)[2..], ["u3"]);
}

#[tokio::test]
async fn a_summary_is_reused_then_extended_across_steps_not_redone() {
    let recorder = Arc::new(Recorder::default());
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("lookup", json!({"q": "z"})),
        ScriptedTurn::text("done"),
    ]));
    let s = SummarizationMiddleware::new(SummaryTrigger::messages(3))
        .keep_messages(1)
        .with_summarizer(recorder.clone());
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(
            ToolRegistry::new()
                .with(RecordingTool::new("lookup").returning("z is 3"))
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(s).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), two_lookups_history()).await.unwrap();
    assert_eq!(run.final_text(), "done");

    let calls = recorder.calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].0, ["u1", "a1", "u2", "a2", "t1", "t2"]);
    assert_eq!(calls[0].1, None);
    // step 2: only the newly aged-out message is summarised, extending the first summary
    assert_eq!(calls[1].0, ["u3"]);
    assert_eq!(calls[1].1.as_deref(), Some("u1,a1,u2,a2,t1,t2"));
    let second = &model.requests()[1];
    assert!(second.messages[1].text().ends_with("u1,a1,u2,a2,t1,t2 + u3"));
    // the new tool call and its result are the kept window
    assert_eq!(second.messages[2].tool_calls.len(), 1);
    assert_eq!(second.messages[3].role, Role::Tool);
    assert_eq!(run.compressions.len(), 2);
    // the extension names what it replaced: the first summary and u3 (the
    // first summary's record names the six it replaced), not all seven again
    assert_eq!(run.compressions[0].source_message_ids.len(), 6);
    let first_summary = run.compressions[0].replacement_message_id.clone().unwrap();
    let second: Vec<&str> = run.compressions[1]
        .source_message_ids
        .iter()
        .map(MessageId::as_str)
        .collect();
    assert_eq!(second, [first_summary.as_str(), "u3"]);
}

#[tokio::test]
async fn a_model_backed_summariser_asks_the_model_and_counts_its_usage() {
    let summarizer_model = Arc::new(ScriptedModel::new([ScriptedTurn::Reply(
        ModelResponse::text("They looked up x and y.").with_usage(Usage::new(40, 7)),
    )]));
    let s = SummarizationMiddleware::new(SummaryTrigger::messages(5))
        .keep_messages(1)
        .with_summarizer(Arc::new(ModelSummarizer::new(summarizer_model.clone())));
    let (sent, run, _) = run_once(s).await;
    assert_eq!(
        sent.messages[1].text(),
        "[Summary of the earlier conversation]\nThey looked up x and y."
    );
    let asked = &summarizer_model.requests()[0];
    assert!(
        asked.messages[0].text().contains("assistant: called lookup"),
        "{}",
        asked.messages[0].text()
    );
    assert!(asked.messages[0].text().contains("tool lookup: x is 1"));
    assert_eq!(run.usage.input_tokens, 40);
    assert_eq!(run.usage.output_tokens, 7);
    assert_eq!(run.compressions[0].policy_version, "summarization/1+model:scripted");
}

#[tokio::test]
async fn a_failing_summariser_fails_the_run_clearly() {
    let s = SummarizationMiddleware::new(SummaryTrigger::messages(2))
        .keep_messages(1)
        .with_summarizer(Arc::new(Failing));
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(MiddlewareStack::new().with(s).unwrap());
    let err = agent
        .run(
            &mut RunContext::new(RunConfig::new("r"), ()),
            &(),
            two_lookups_history(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(err.to_string().contains("summariser overloaded"), "{err}");
    assert_eq!(model.calls(), 0, "the model is not called with an unsummarised request");
}

#[test]
fn bad_configuration_is_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<SummarizationConfig>("keep_messages = 5").unwrap_err();
    assert!(err.to_string().contains("at least one trigger"), "{err}");

    let err = from_toml_str::<SummarizationConfig>("trigger_fraction = 0.8").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("context_window"), "{text}");

    let err = from_toml_str::<SummarizationConfig>("trigger_messages = 10\nkeep_messages = 10").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`keep_messages` = 10"), "{text}");
    assert!(text.contains("below `trigger_messages`"), "{text}");

    let err = from_toml_str::<SummarizationConfig>("trigger_fraction = 1.5\ncontext_window = 1000").unwrap_err();
    assert!(err.to_string().contains("`trigger_fraction` = 1.5"), "{err}");

    let ok: SummarizationConfig = from_toml_str("trigger_tokens = 4000\ntrigger_messages = 30").unwrap();
    assert_eq!((ok.trigger_tokens, ok.keep_messages), (Some(4000), 20));
}

#[tokio::test]
async fn one_stack_serves_concurrent_runs_with_separate_summaries() {
    let recorder = Arc::new(Recorder::default());
    let stack = Arc::new(
        MiddlewareStack::new()
            .with(
                SummarizationMiddleware::new(SummaryTrigger::messages(2))
                    .keep_messages(1)
                    .with_summarizer(recorder.clone()),
            )
            .unwrap(),
    );
    let model = Arc::new(ScriptedModel::from_fn(|_| ScriptedTurn::text("ok")));
    let agent: Arc<Agent<()>> = Arc::new(Agent::from_shared(model).with_shared_stack(stack));
    let runs = (0..8).map(|i| {
        let agent = agent.clone();
        tokio::spawn(async move {
            let input = vec![
                msg(Message::user("hello"), &format!("r{i}-u1")),
                msg(Message::assistant("hi"), &format!("r{i}-a1")),
                msg(Message::user("again"), &format!("r{i}-u2")),
            ];
            let mut ctx = RunContext::new(RunConfig::new(format!("run-{i}")), ());
            agent.run(&mut ctx, &(), input).await.unwrap()
        })
    });
    for (i, run) in futures::future::join_all(runs).await.into_iter().enumerate() {
        let run = run.unwrap();
        let covered: Vec<String> = run.compressions[0]
            .source_message_ids
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            covered,
            [format!("r{i}-u1"), format!("r{i}-a1")],
            "run {i} summarised only its own messages"
        );
    }
    assert_eq!(recorder.calls.lock().unwrap().len(), 8);
}

/// When the run ends its compression records move onto `AgentRun::compressions`
/// (kept once, not copied): the log still counts them, and a reader keeping
/// its place with `since` is not handed them again.
#[tokio::test]
async fn the_run_record_takes_the_logs_compressions_without_a_copy() {
    use tinyagents::harness::compression::CompressionLog;
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let agent: Agent<()> = Agent::new(model).with_system_prompt("You are helpful.").with_stack(
        MiddlewareStack::new()
            .with(SummarizationMiddleware::new(SummaryTrigger::messages(5)).keep_messages(1))
            .unwrap(),
    );
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), two_lookups_history()).await.unwrap();
    assert_eq!(run.compressions.len(), 1, "{:?}", run.compressions);
    assert_eq!(run.compressions[0].middleware, "summarization");
    let log = ctx.locals().local::<CompressionLog>();
    assert_eq!(log.len(), 1, "the log still counts what the run recorded");
    assert!(log.entries().is_empty(), "moved, not kept twice");
    assert!(log.since(0).is_empty() && log.since(1).is_empty());
}

/// The texts and roles of a request's messages (summary ids differ run to run).
fn shown(request: &ModelRequest) -> Vec<(Role, String)> {
    request
        .messages
        .iter()
        .map(|m| (m.role, m.text().into_owned()))
        .collect()
}

/// Turn after turn of a growing history, the summary a run keeps — extended
/// from the messages it saw last time, found by address and not read again —
/// gives the request a fresh instance gives the same history (which reads
/// every message), system messages between the older ones included. Ids are
/// the identity: an older message edited under its id stays covered by the
/// summary (its text there is the one summarised); one replaced by a message
/// with another id makes the run summarise afresh, as a fresh instance does.
#[tokio::test]
async fn an_extended_summary_shows_what_a_fresh_one_shows_turn_after_turn() {
    use tinyagents::testing::MiddlewareHarness;
    let make = || SummarizationMiddleware::new(SummaryTrigger::messages(6)).keep_messages(2);
    let summary_of = |r: &ModelRequest| {
        r.messages
            .iter()
            .find(|m| m.text().starts_with("[Summary"))
            .map(|m| m.text().into_owned())
            .expect("a summary")
    };
    let mut kept: MiddlewareHarness = MiddlewareHarness::new(make());
    let mut history = vec![Message::system("sys")];
    for i in 0..40 {
        history.push(Message::user(format!("q{i}")));
        if i % 7 == 3 {
            history.push(Message::system(format!("note {i}")));
        }
        history.push(Message::assistant(format!("a{i}")));
        if i == 25 {
            // an older message's fields change, its id stays
            history[2].set_text("a0, edited");
        }
        if i == 33 {
            // an older message is replaced by another (a new id)
            history[3] = Message::user("q1, replaced");
        }
        let got = kept.before_model(ModelRequest::new(history.clone())).await.unwrap();
        let mut fresh: MiddlewareHarness = MiddlewareHarness::new(make());
        let fresh = fresh.before_model(ModelRequest::new(history.clone())).await.unwrap();
        if (25..33).contains(&i) {
            let (got_summary, fresh_summary) = (summary_of(&got), summary_of(&fresh));
            assert!(
                !got_summary.contains("edited") && fresh_summary.contains("a0, edited"),
                "turn {i}"
            );
            assert_eq!(
                got_summary.replace("assistant: a0\n", "assistant: a0, edited\n"),
                fresh_summary,
                "turn {i}"
            );
            let rest = |r: &ModelRequest| {
                shown(r)
                    .into_iter()
                    .filter(|(_, t)| !t.starts_with("[Summary"))
                    .collect::<Vec<_>>()
            };
            assert_eq!(rest(&got), rest(&fresh), "turn {i}");
        } else {
            assert_eq!(shown(&got), shown(&fresh), "turn {i}");
        }
        if i >= 33 {
            assert!(summary_of(&got).contains("q1, replaced"), "turn {i}");
        }
    }
}

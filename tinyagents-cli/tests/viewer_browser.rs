//! The run viewer in a real browser: runs are recorded (`run --record` and
//! `RunRecorder`), turned into pages (`run --html`, `view`), opened in
//! headless Chromium, and the DOM it built is checked: every span, detail
//! and chart with its values, no JavaScript error, no script from the run.
//!
//! Chromium is Debian's `chromium` (`.ci/run` installs it). Without it the
//! tests fail under `CI=true` or `TINYAGENTS_REQUIRE_BROWSER=1` (which
//! `.ci/run` sets) and are skipped, with a message, elsewhere.
//! Screenshots land in `target/viewer-screenshots/`. Each page is opened
//! once (`browser::open`).

mod browser;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use browser::{between, chromium, field, open, out_dir, row, rows, stat, workspace, Row};

use serde_json::json;
use tinyagents::config::BuildMiddleware;
use tinyagents::harness::event::{RecordedRun, RunRecorder};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

const BIN: &str = env!("CARGO_BIN_EXE_tinyagents");

/// The `file://` URL of `page` with `fragment` (`#…`, or empty).
fn file_url(page: &Path, fragment: &str) -> String {
    format!("file://{}{fragment}", page.display())
}

/// Records what `f` runs into `dir/name.jsonl`, then `tinyagents view` makes the page.
async fn record<F, Fut>(dir: &Path, name: &str, f: F) -> PathBuf
where
    F: FnOnce(Arc<dyn EventSink>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let log = dir.join(format!("{name}.jsonl"));
    let recorder = Arc::new(RunRecorder::new(std::fs::File::create(&log).unwrap()).unwrap());
    f(recorder.clone()).await;
    Arc::try_unwrap(recorder)
        .ok()
        .expect("the runs are over")
        .finish()
        .unwrap();
    let page = dir.join(format!("{name}.html"));
    let out = Command::new(BIN)
        .arg("view")
        .arg(&log)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    page
}

/// A `before_model` hook that sets a system prompt and appends a message to
/// every request (numbered by the run's model calls).
struct Reminder;

#[async_trait::async_trait]
impl Middleware<()> for Reminder {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL
    }
    async fn before_model(&self, ctx: &mut RunContext, _: &(), request: &mut ModelRequest) -> Result<()> {
        request.system = vec![PromptSegment::stable("persona", "You are terse.")].into();
        let n = ctx.counters().model_calls + 1;
        request
            .messages
            .push(Message::user(format!("Reminder {n}: answer in one line.")));
        Ok(())
    }
}

fn ctx(run_id: &str, sink: &Arc<dyn EventSink>) -> RunContext {
    RunContext::new(RunConfig::new(run_id), ()).with_sink(sink.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_shows_each_kind_of_run_in_a_real_browser() {
    let Some(chrome) = chromium() else { return };
    let dir = out_dir();

    // ---- a plain run, from the command line: `run --record --html`, and `view` makes the same page
    let log = dir.join("plain.jsonl");
    let page = dir.join("plain.html");
    let out = Command::new(BIN)
        .current_dir(workspace())
        .args(["run", "examples/agent.toml", "-q", "--record"])
        .arg(&log)
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = dir.join("plain-view.html");
    let out = Command::new(BIN)
        .arg("view")
        .arg(&log)
        .arg("-o")
        .arg(&again)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&page).unwrap(), std::fs::read(&again).unwrap());
    // the log holds each request the model received (the stream on stdout does not)
    let recorded = RecordedRun::read(std::io::BufReader::new(std::fs::File::open(&log).unwrap())).unwrap();
    let requests = recorded
        .events
        .iter()
        .filter(|e| e.event["type"] == "model_request")
        .count();
    assert_eq!(requests, 2, "one per model call");
    let dom = open(
        &chrome,
        &file_url(&page, "#select=tool:call-0-0"),
        3000,
        Some(&dir.join("plain.png")),
    );
    let r = rows(&dom);
    assert_eq!(stat(&dom, "status"), "ok");
    assert_eq!(stat(&dom, "model calls"), "2");
    assert_eq!(stat(&dom, "tool calls"), "1");
    // the scripted model has no price: unknown, not zero
    assert_eq!(stat(&dom, "cost"), "cost unknown");
    let run = row(&r, "run", "run run-1");
    assert_eq!((run.depth, run.outcome.as_str()), (0, "ok"));
    assert_eq!(r.iter().filter(|r| r.kind == "model" && r.outcome == "ok").count(), 2);
    assert_eq!(row(&r, "tool", "tool shell").outcome, "ok");
    // every hook is a span nested in its run, with its outcome
    let pii = row(&r, "hook", "pii · before_tool");
    assert_eq!((pii.outcome.as_str(), pii.depth >= 1), ("ok", true));
    // the model call is nested in the wrap_model hooks that wrap it
    let wrap = r.iter().position(|x| x.label == "pii · wrap_model").unwrap();
    assert!(
        r[wrap + 1].kind == "model" && r[wrap + 1].depth == r[wrap].depth + 1,
        "{:#?}",
        &r[wrap..wrap + 2]
    );
    // the selected call's details: effective arguments and the result
    assert_eq!(field(&dom, "tool"), "shell");
    assert!(field(&dom, "arguments").contains("\"command\": \"ls\""));
    assert_eq!(field(&dom, "result"), "agent.toml  hooks");
    // a chart series per kind of consumption, with its last value
    assert!(
        dom.contains("data-series=\"model\" data-last=\"2\""),
        "the budget chart"
    );
    assert!(dom.contains("data-series=\"tool\" data-last=\"1\""), "the budget chart");

    // keyboard navigation, replayed from the address through the page's keydown handler:
    // j j j k walks to the second row, Enter shows it, / focuses the search, and a j
    // typed there moves nothing
    let dom = open(&chrome, &file_url(&page, "#keys=j,j,j,k,Enter,/,j"), 1200, None);
    let r = rows(&dom);
    let selected: Vec<&Row> = r.iter().filter(|x| x.selected).collect();
    assert_eq!(selected.len(), 1, "{r:#?}");
    assert_eq!(selected[0].id, r[1].id, "{r:#?}");
    let details = between(&dom, "<aside id=\"details\"", ">").unwrap();
    assert!(details.contains(&format!("data-selected=\"{}\"", r[1].id)), "{details}");
    assert_eq!(between(&dom, "data-focus=\"", "\""), Some("search"));
    let dom = open(&chrome, &file_url(&page, "#keys=End,Home,j,Escape"), 1200, None);
    let r = rows(&dom);
    assert!(r[1].selected && r.iter().filter(|x| x.selected).count() == 1, "{r:#?}");
    assert_eq!(between(&dom, "data-focus=\"", "\""), Some("timeline"));

    // ---- the request as the model saw it: a before_model hook's message is in it
    let page = record(&dir, "request", |sink| async move {
        let agent: Agent<()> = Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new("s1", "search", json!({"q": "rust"}))]),
            ScriptedTurn::text("Rust is a language."),
        ]))
        .with_tools(
            ToolRegistry::new()
                .with(RecordingTool::new("search").returning("rust-lang.org"))
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(Reminder).unwrap());
        agent.run(&mut ctx("req", &sink), &(), "what is rust?").await.unwrap();
    })
    .await;
    let dom = open(&chrome, &file_url(&page, "#select=model:2.1"), 1200, None);
    let request = field(&dom, "request");
    let lines: Vec<&str> = request.lines().collect();
    assert_eq!(lines[0], "[system · persona] You are terse.", "{request}");
    assert_eq!(lines[1], "[tools] search", "{request}");
    assert_eq!(lines[2], "[user] what is rust?", "{request}");
    assert!(
        lines[3].starts_with("[assistant] ") && lines[3].ends_with("→ search({\"q\":\"rust\"})"),
        "{request}"
    );
    assert_eq!(lines[4], "[tool · s1] rust-lang.org", "{request}");
    assert_eq!(
        lines.last(),
        Some(&"[user] Reminder 2: answer in one line."),
        "{request}"
    );
    // the log carries each request as a delta: the second keeps the first's messages
    let log = RecordedRun::read(std::io::BufReader::new(
        std::fs::File::open(page.with_extension("jsonl")).unwrap(),
    ))
    .unwrap();
    let deltas: Vec<&serde_json::Value> = log
        .events
        .iter()
        .filter(|e| e.event["type"] == "model_request")
        .map(|e| &e.event["request"])
        .collect();
    assert_eq!(deltas.len(), 2);
    assert_eq!(
        (deltas[0]["kept"].as_u64(), deltas[1]["system"].is_null()),
        (Some(0), true)
    );
    assert!(deltas[1]["kept"].as_u64().unwrap() >= 1, "{}", deltas[1]);

    // ---- a refused and an approved call: a paused run, then its resume with a person's approval
    let page = record(&dir, "approvals", |sink| async move {
        let delete = RecordingTool::new("delete").returning("deleted a.txt");
        let wipe = RecordingTool::new("wipe");
        let agent: Agent<()> = Agent::new(
            ScriptedModel::new([
                ScriptedTurn::tool_calls(vec![
                    ToolCall::new("w1", "wipe", json!({"all": true})),
                    ToolCall::new("d1", "delete", json!({"path": "a.txt"})),
                ]),
                ScriptedTurn::Reply(
                    ModelResponse::text("Deleted a.txt; wiping is not allowed.").with_usage(Usage::new(40, 9)),
                ),
            ])
            // a model the price table knows, so the page prices its calls
            .with_id("openai:gpt-4o"),
        )
        .with_tools(ToolRegistry::new().with(delete).unwrap().with(wipe).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
                .unwrap()
                .with(ToolAllowlistMiddleware::from_lists(
                    Some(["delete"]),
                    Vec::<String>::new(),
                ))
                .unwrap(),
        );
        let mut first = ctx("first", &sink);
        let err = agent.run(&mut first, &(), "tidy up").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
        let interrupt = HumanInTheLoopMiddleware::take_interrupt(&first).unwrap();
        let resume = interrupt.decide([("d1", Decision::Approve)]).unwrap();
        let input = resume.input();
        let second = ctx("second", &sink);
        resume.attach(&second);
        let mut second = second;
        agent.run(&mut second, &(), input).await.unwrap();
    })
    .await;
    let dom = open(
        &chrome,
        &file_url(&page, "#select=tool:d1"),
        3000,
        Some(&dir.join("approvals.png")),
    );
    let r = rows(&dom);
    assert_eq!(
        row(&r, "run", "run first").outcome,
        "error",
        "the paused run ends interrupted"
    );
    assert_eq!(row(&r, "event", "approval requested: delete (d1)").outcome, "jump");
    assert_eq!(row(&r, "event", "decision: approve delete (d1)").outcome, "ok");
    assert_eq!(row(&r, "hook", "tool_allowlist · before_tool").outcome, "refused");
    assert_eq!(row(&r, "tool", "tool wipe (w1)").outcome, "refused");
    assert_eq!(row(&r, "tool", "tool delete (d1)").outcome, "ok");
    assert_eq!(row(&r, "run", "run second").outcome, "ok");
    assert_eq!(field(&dom, "decision"), "approve");
    assert_eq!(field(&dom, "result"), "deleted a.txt");
    assert!(
        dom.contains("data-turn=\"2\" data-input=\"40\" data-output=\"9\" data-cost=\"$0.000190\""),
        "the tokens chart, with the turn's cost: 40 in and 9 out at gpt-4o's catalog rates"
    );
    assert!(
        dom.contains("<circle") && dom.contains("data-usd=\"0.00019\""),
        "the cost per turn"
    );
    assert_eq!(stat(&dom, "cost"), "$0.000190");
    // the filters, set from the address: only refused rows, with their ancestors
    let dom = open(
        &chrome,
        &file_url(&page, "#outcome=refused&middleware=tool_allowlist"),
        1200,
        None,
    );
    let r = rows(&dom);
    let refused: Vec<&str> = r
        .iter()
        .filter(|x| x.outcome == "refused")
        .map(|x| x.label.as_str())
        .collect();
    assert_eq!(refused, ["tool_allowlist · before_tool"], "{r:#?}");
    assert_eq!(r.len(), 2, "the hook and its run: {r:#?}");
    assert_eq!(r[0].label, "run second");
    let dom = open(&chrome, &file_url(&page, "#q=WIPE"), 1200, None);
    let r = rows(&dom);
    assert!(
        r.iter().any(|x| x.kind == "tool" && x.label == "tool wipe (w1)"),
        "{r:#?}"
    );
    assert!(
        r.iter().all(|x| x.kind == "run" || x.label.contains("wipe")),
        "a match and its ancestors only: {r:#?}"
    );

    // ---- a retry and a fallback: two failed attempts on the primary, then the backup
    let page = record(&dir, "retry_fallback", |sink| async move {
        let primary = Arc::new(
            ScriptedModel::new([
                ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
                ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
            ])
            .with_id("big"),
        );
        let backup = Arc::new(
            ScriptedModel::new([ScriptedTurn::Reply(
                ModelResponse::text("from the backup").with_usage(Usage::new(12, 4)),
            )])
            .with_id("small"),
        );
        let retry = tinyagents::config::from_toml_str::<ModelRetryConfig>("max_attempts = 2\ninitial_delay_ms = 1")
            .unwrap()
            .build();
        let agent: Agent<()> = Agent::new(primary).with_stack(
            MiddlewareStack::new()
                .with(ModelFallbackMiddleware::new([backup as Arc<dyn ChatModel>]))
                .unwrap()
                .with(retry)
                .unwrap(),
        );
        agent.run(&mut ctx("r", &sink), &(), "question").await.unwrap();
    })
    .await;
    let dom = open(&chrome, &file_url(&page, "#select=model:1.3"), 3000, None);
    let r = rows(&dom);
    let retry = row(&r, "retry", "retry model: attempt 1/2 failed (model)");
    let fallback = row(&r, "fallback", "→ small (model)");
    let attempts: Vec<&Row> = r.iter().filter(|x| x.kind == "model").collect();
    assert_eq!(attempts.len(), 3, "{attempts:#?}");
    assert_eq!(
        attempts.iter().map(|a| a.outcome.as_str()).collect::<Vec<_>>(),
        ["error", "error", "ok"]
    );
    assert_eq!(retry.depth, attempts[0].depth, "a retry is a sibling of the attempts");
    assert!(fallback.depth < attempts[0].depth, "{fallback:?}");
    assert_eq!(stat(&dom, "retries"), "1");
    assert_eq!(stat(&dom, "fallbacks"), "1");
    assert_eq!(field(&dom, "model"), "small");
    assert_eq!(field(&dom, "reply"), "from the backup");
    assert_eq!(field(&dom, "input tokens"), "12");
    assert_eq!(field(&dom, "cost"), "cost unknown: no price for model small");

    // ---- a compression: the older messages summarised
    let page = record(&dir, "compression", |sink| async move {
        let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("ok")])).with_stack(
            MiddlewareStack::new()
                .with(SummarizationMiddleware::new(SummaryTrigger::messages(5)).keep_messages(4))
                .unwrap(),
        );
        let history = vec![
            Message::user("first question"),
            Message::assistant("first answer, a long one about many things"),
            Message::user("second question"),
            Message::assistant("second answer"),
            Message::user("third question"),
            Message::assistant("third answer"),
            Message::user("and now?"),
        ];
        agent.run(&mut ctx("r", &sink), &(), history).await.unwrap();
    })
    .await;
    let dom = open(&chrome, &file_url(&page, "#select=compressed:0"), 3000, None);
    let r = rows(&dom);
    let c = row(&r, "compressed", "compressed by summarization");
    assert_eq!(c.outcome, "ok");
    assert_eq!(stat(&dom, "compressions"), "1");
    let before: u64 = field(&dom, "tokens before").parse().unwrap();
    let after: u64 = field(&dom, "tokens after").parse().unwrap();
    assert!(before > 0 && after > 0, "{before} → {after}");
    assert!(c.label.contains(&format!("{before} → {after} tokens")), "{c:?}");
    assert_eq!(field(&dom, "replaced messages").split(", ").count(), 3);

    // ---- a sub-agent, nested under the tool call that ran it
    let page = record(&dir, "subagent", |sink| async move {
        let child = Arc::new(Agent::new(ScriptedModel::new([ScriptedTurn::text(
            "hi from the child",
        )])));
        let parent: Agent<()> = Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new("k1", "helper", json!({"input": "say hi"}))]),
            ScriptedTurn::text("parent done"),
        ]))
        .with_tools(
            ToolRegistry::new()
                .with(AgentTool::new(child, "helper", "A helper.", || ((), ())))
                .unwrap(),
        );
        parent.run(&mut ctx("p", &sink), &(), "delegate").await.unwrap();
    })
    .await;
    let dom = open(
        &chrome,
        &file_url(&page, "#select=tool:k1"),
        3000,
        Some(&dir.join("subagent.png")),
    );
    let r = rows(&dom);
    let tool = r
        .iter()
        .position(|x| x.kind == "tool" && x.label.contains("helper"))
        .unwrap();
    let sub = &r[tool + 1];
    assert_eq!((sub.kind.as_str(), sub.depth), ("run", r[tool].depth + 1), "{sub:?}");
    assert!(sub.label.starts_with("sub-agent run "), "{sub:?}");
    let child_model = &r[tool + 2..].iter().find(|x| x.kind == "model").unwrap();
    assert!(child_model.depth > sub.depth);
    assert_eq!(field(&dom, "result"), "hi from the child");

    // ---- a failed run, whose tool returned hostile text: shown as text, never run as script
    let page = record(&dir, "failed", |sink| async move {
        let hostile = "</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"><!-- &amp;";
        let tool = RecordingTool::new("fetch").returning(hostile);
        let agent: Agent<()> = Agent::new(ScriptedModel::new([
            ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
                "x1",
                "fetch",
                json!({"url": "<script>document.body.setAttribute('data-pwned','2')</script>"}),
            )])),
            ScriptedTurn::Fail(TinyAgentsError::model("the provider is down", false)),
        ]))
        .with_tools(ToolRegistry::new().with(tool).unwrap());
        let err = agent.run(&mut ctx("r", &sink), &(), "fetch it").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Model);
    })
    .await;
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("</script><img") && !html.contains("<!-- &amp;"),
        "the data slot is escaped"
    );
    let dom = open(
        &chrome,
        &file_url(&page, "#select=tool:x1"),
        3000,
        Some(&dir.join("failed.png")),
    );
    let r = rows(&dom);
    assert_eq!(stat(&dom, "status"), "failed: model");
    assert_eq!(row(&r, "run", "run r").outcome, "error");
    assert_eq!(r.iter().rfind(|x| x.kind == "model").unwrap().outcome, "error");
    let body = between(&dom, "<body", ">").unwrap();
    assert!(
        body.contains("data-ready") && !body.contains("data-pwned"),
        "a script from the run ran: {body}"
    );
    assert!(
        !dom.contains("<img") && !dom.contains("<script>document"),
        "the run's text became markup"
    );
    assert_eq!(
        field(&dom, "result"),
        "</script><img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"><!-- &amp;"
    );
    assert!(field(&dom, "arguments").contains("<script>document.body"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_turn_run_opens_and_renders_only_the_rows_in_view() {
    let Some(chrome) = chromium() else { return };
    let dir = out_dir();
    const TURNS: usize = 1000;
    let page = record(&dir, "thousand", |sink| async move {
        let model = ScriptedModel::from_fn(|request| {
            let turn = request.messages.iter().filter(|m| m.role == Role::Assistant).count();
            let reply = if turn < TURNS - 1 {
                ModelResponse::tool_calls(vec![ToolCall::new(format!("c{turn}"), "step", json!({"n": turn}))])
            } else {
                ModelResponse::text("done")
            };
            ScriptedTurn::Reply(reply.with_usage(Usage::new(100 + turn as u64, 10)))
        });
        let agent: Agent<()> = Agent::new(model)
            .with_tools(
                ToolRegistry::new()
                    .with(RecordingTool::new("step").returning("ok"))
                    .unwrap(),
            )
            .with_max_steps(TURNS as u32 + 1);
        agent.run(&mut ctx("long", &sink), &(), "go").await.unwrap();
    })
    .await;
    let log = page.with_extension("jsonl");
    let recorded = RecordedRun::read(std::io::BufReader::new(std::fs::File::open(&log).unwrap())).unwrap();
    let events = recorded.events.len();
    // the requests are recorded as deltas: each message of the conversation
    // travels once (the prompt, then a reply and a tool result per turn), not once per call
    let carried: usize = recorded
        .events
        .iter()
        .filter(|e| e.event["type"] == "model_request")
        .map(|e| e.event["request"]["messages"].as_array().unwrap().len())
        .sum();
    assert_eq!(carried, 2 * TURNS - 1);
    let started = Instant::now();
    let dom = open(&chrome, &file_url(&page, ""), 900, None);
    let wall = started.elapsed();
    let open_ms = between(&dom, "data-open-ms=\"", "\"").unwrap();
    println!(
        "a {TURNS}-turn run ({events} events, {} KiB page): ready (timeline, charts and the \
         rows in view drawn) {open_ms} ms after navigation began; chromium's start, load and exit took {} ms in all",
        std::fs::metadata(&page).unwrap().len() / 1024,
        wall.as_millis()
    );
    assert_eq!(stat(&dom, "model calls"), TURNS.to_string());
    let count = between(&dom, "<span id=\"count\">", "</span>").unwrap();
    let total: usize = count.split(" of ").next().unwrap().parse().unwrap();
    assert!(total > 2 * TURNS, "{count}");
    let drawn = rows(&dom).len();
    assert!(
        drawn > 10 && drawn < 120,
        "only the rows in view are in the DOM: {drawn} of {total}"
    );
    assert_eq!(
        dom.matches("<g data-turn=").count(),
        TURNS,
        "one bar per turn in the tokens chart"
    );
}

/// `view` on a damaged log fails, naming the file and the line; no page is written.
#[test]
fn view_refuses_a_damaged_log_naming_the_line() {
    let dir = std::env::temp_dir().join(format!("tinyagents-view-damaged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("cut.jsonl");
    std::fs::write(
        &log,
        "{\"format\":\"tinyagents-run\",\"version\":1,\"tinyagents\":\"0.1.0\"}\n{\"t_us\":3,\"event\":{\"type\":\"run_sta",
    )
    .unwrap();
    let page = dir.join("cut.html");
    let out = Command::new(BIN)
        .arg("view")
        .arg(&log)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("cut.jsonl`: line 2 of the recorded run") && stderr.contains("the log is damaged"),
        "{stderr}"
    );
    assert!(!page.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

//! External command hooks with real processes: small shell scripts written
//! by each test into a temporary directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tinyagents::external_hooks::{ExternalHooksMiddleware, HookCommand, HookEvent};
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use super::support::{hook, run_with, script, temp_dir};

#[tokio::test]
async fn exit_status_2_blocks_the_call_with_stderr_as_the_reason() {
    let dir = temp_dir("hooks", "exit2");
    let cmd = script(&dir, "deny.sh", "cat > /dev/null\necho 'no shell today' >&2\nexit 2");
    let tool = RecordingTool::new("shell");
    let out = run_with(&dir, vec![hook(HookEvent::PreToolUse, cmd)], tool.clone()).await;
    assert!(tool.calls().is_empty(), "a blocked call never runs");
    let results = out.tool_results();
    assert_eq!(results.len(), 1, "the call still gets exactly one result");
    assert!(results[0].contains("no shell today"), "{results:?}");
    assert_eq!(out.run.unwrap().final_text(), "done");
}

#[tokio::test]
async fn the_input_follows_the_schema_and_a_json_block_respects_the_matcher() {
    let dir = temp_dir("hooks", "schema");
    let cmd = script(
        &dir,
        "record.sh",
        "cat > input-$TINYAGENTS_HOOK_EVENT.json\necho \"$MODE $TINYAGENTS_RUN_ID $TINYAGENTS_HOOK_SCHEMA\" > env.txt\n\
         echo '{\"decision\": \"block\", \"reason\": \"not this one\"}'",
    );
    // the matcher does not match `shell`: nothing is blocked
    let tool = RecordingTool::new("shell");
    let hooks = vec![hook(HookEvent::PreToolUse, cmd.clone())
        .with_matcher("^write_file$")
        .unwrap()];
    let out = run_with(&dir, hooks, tool.clone()).await;
    assert_eq!(tool.calls().len(), 1);
    assert!(out.run.is_ok());
    assert!(!dir.join("input-pre_tool_use.json").exists());

    // it matches now
    let tool = RecordingTool::new("shell");
    let hooks = vec![hook(HookEvent::PreToolUse, cmd)
        .with_matcher("^(shell|write_file)$")
        .unwrap()
        .with_env("MODE", "strict")];
    let out = run_with(&dir, hooks, tool.clone()).await;
    assert!(tool.calls().is_empty());
    assert!(out.tool_results()[0].contains("not this one"));
    let input: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("input-pre_tool_use.json")).unwrap()).unwrap();
    assert_eq!(input["schema"], "tinyagents.hook/1");
    assert_eq!(input["event"], "pre_tool_use");
    assert_eq!(input["run_id"], "run-1");
    assert_eq!(input["depth"], 0);
    assert_eq!(input["tool_name"], "shell");
    assert_eq!(input["tool_call_id"], "call-shell");
    assert_eq!(input["tool_input"], json!({ "command": "ls" }));
    assert_eq!(input["cwd"], dir.display().to_string());
    assert!(input.get("tool_output").is_none());
    let env = std::fs::read_to_string(dir.join("env.txt")).unwrap();
    assert_eq!(env.trim(), "strict run-1 tinyagents.hook/1");
}

#[tokio::test]
async fn several_hooks_combine_in_list_order_last_rewrite_and_first_block_win() {
    let dir = temp_dir("hooks", "combine");
    let first = script(&dir, "first.sh", "echo '{\"updated_input\": {\"command\": \"ls -a\"}}'");
    let second = script(
        &dir,
        "second.sh",
        "echo '{\"updated_input\": {\"command\": \"ls -l\"}, \"decision\": \"approve\"}'",
    );
    let tool = RecordingTool::new("shell");
    let hooks = vec![
        hook(HookEvent::PreToolUse, first.clone()),
        hook(HookEvent::PreToolUse, second),
    ];
    let out = run_with(&dir, hooks, tool.clone()).await;
    assert!(out.run.is_ok());
    assert_eq!(tool.calls(), [json!({ "command": "ls -l" })], "the last rewrite wins");

    let block_a = script(
        &dir,
        "block_a.sh",
        "echo '{\"decision\": \"block\", \"reason\": \"A\"}'",
    );
    let block_b = script(&dir, "block_b.sh", "echo 'B' >&2; exit 2");
    let tool = RecordingTool::new("shell");
    let hooks = vec![
        hook(HookEvent::PreToolUse, first),
        hook(HookEvent::PreToolUse, block_a),
        hook(HookEvent::PreToolUse, block_b),
    ];
    let out = run_with(&dir, hooks, tool.clone()).await;
    assert!(tool.calls().is_empty(), "a block wins over any rewrite or approval");
    let result = &out.tool_results()[0];
    assert!(
        result.contains('A') && !result.contains(": B"),
        "the first block's reason: {result}"
    );
}

#[tokio::test]
async fn output_that_is_not_understood_and_a_failing_hook_become_notices_and_policy_hooks_refuse() {
    let dir = temp_dir("hooks", "notices");
    let chatty = script(&dir, "chatty.sh", "echo 'hello, I am not JSON'");
    let broken = script(&dir, "broken.sh", "echo 'oops' >&2; exit 1");
    // opted out on the policy event, fail-open by default on post_tool_use
    let tool = RecordingTool::new("shell");
    let hooks = vec![
        hook(HookEvent::PreToolUse, chatty.clone()).fail_closed(false),
        hook(HookEvent::PostToolUse, broken.clone()),
    ];
    let out = run_with(&dir, hooks, tool.clone()).await;
    assert_eq!(tool.calls().len(), 1, "neither blocks");
    assert_eq!(out.run.as_ref().unwrap().final_text(), "done");
    let notices = out.notices();
    assert_eq!(notices.len(), 2, "{notices:?}");
    assert!(notices[0].0.contains("not understood") && notices[0].0.contains("\"hello, I am not JSON\""));
    assert!(notices[0].0.contains("ignored (fail_closed = false)"), "{notices:?}");
    assert!(notices[0].1);
    assert!(notices[1].0.contains("exited with status 1: oops"), "{notices:?}");

    // by default, the same answers refuse a policy event's call
    for cmd in [chatty, broken] {
        let tool = RecordingTool::new("shell");
        let out = run_with(&dir, vec![hook(HookEvent::PreToolUse, cmd)], tool.clone()).await;
        assert!(tool.calls().is_empty());
        assert!(
            out.tool_results()[0].contains("fail_closed"),
            "{:?}",
            out.tool_results()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_times_out_is_killed_with_its_children() {
    let dir = temp_dir("hooks", "timeout");
    // a child that would outlive its parent, and the parent waiting on it
    let cmd = script(&dir, "slow.sh", "sleep 30 &\necho $! > child.pid\nwait");
    let tool = RecordingTool::new("shell");
    let started = Instant::now();
    // The script must fork its child and write child.pid before the timeout
    // kills it: a margin of a second, not a race a loaded machine can lose.
    let hooks = vec![HookCommand::new(HookEvent::PreToolUse, cmd).with_timeout(Duration::from_millis(1000))];
    let out = run_with(&dir, hooks, tool.clone()).await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "returned before the sleep would have ended"
    );
    assert!(tool.calls().is_empty(), "a timed-out policy hook refuses by default");
    assert!(
        out.tool_results()[0].contains("timed out after 1000 ms"),
        "{:?}",
        out.tool_results()
    );
    let notices = out.notices();
    assert!(
        notices.iter().any(|(m, e)| *e && m.contains("timed out after 1000 ms")),
        "{notices:?}"
    );

    let pid = std::fs::read_to_string(dir.join("child.pid"))
        .unwrap()
        .trim()
        .to_owned();
    let gone = || match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    };
    // SIGKILL was sent; give a loaded machine up to 5 s to carry it out.
    for _ in 0..500 {
        if gone() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        gone(),
        "the hook's child `sleep 30` (pid {pid}) was killed with its group"
    );
}

#[tokio::test]
async fn session_prompt_context_post_tool_and_stop_hooks() {
    let dir = temp_dir("hooks", "lifecycle");
    let start = script(
        &dir,
        "start.sh",
        "cat > start.json\necho '{\"additional_context\": \"Project: demo.\"}'",
    );
    let prompt = script(
        &dir,
        "prompt.sh",
        "cat > prompt.json\necho '{\"additional_context\": \"Be brief.\", \"system_message\": \"prompt seen\"}'",
    );
    let post = script(
        &dir,
        "post.sh",
        "cat > post.json\necho '{\"additional_context\": \"(checked by post hook)\"}'",
    );
    let stop = script(&dir, "stop.sh", "cat > stop.json");
    let tool = RecordingTool::new("shell").returning("a.txt b.txt");
    let hooks = vec![
        hook(HookEvent::SessionStart, start),
        hook(HookEvent::UserPromptSubmit, prompt),
        hook(HookEvent::PostToolUse, post),
        hook(HookEvent::Stop, stop),
    ];
    let out = run_with(&dir, hooks, tool).await;
    assert!(out.run.is_ok());
    let requests = out.model.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        let system = r.system_prompt();
        assert!(
            system.contains("Project: demo.") && system.contains("Be brief."),
            "{system}"
        );
    }
    assert_eq!(out.tool_results(), ["a.txt b.txt\n\n(checked by post hook)"]);
    assert_eq!(out.notices(), [("prompt seen".to_owned(), false)]);

    let read =
        |name: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap() };
    assert_eq!(read("start.json")["event"], "session_start");
    assert_eq!(read("prompt.json")["prompt"], "list the files");
    let post = read("post.json");
    assert_eq!(
        (post["tool_output"].as_str(), post["tool_error"].as_bool()),
        (Some("a.txt b.txt"), Some(false))
    );
    let stop = read("stop.json");
    assert_eq!(stop["final_text"], "done");
    assert_eq!(stop["stop_reason"], "Finished");
}

#[tokio::test]
async fn permission_requests_block_or_rewrite_and_continue_false_stops_the_run() {
    let dir = temp_dir("hooks", "permission");
    let rewrite = script(
        &dir,
        "rewrite.sh",
        "echo '{\"decision\": \"approve\", \"updated_input\": {\"command\": \"ls -1\"}}'",
    );
    let tool = RecordingTool::new("shell");
    let out = run_with(&dir, vec![hook(HookEvent::PermissionRequest, rewrite)], tool.clone()).await;
    assert!(out.run.is_ok());
    assert_eq!(tool.calls(), [json!({ "command": "ls -1" })]);

    let deny = script(&dir, "deny.sh", "echo 'ask a human' >&2; exit 2");
    let tool = RecordingTool::new("shell");
    let out = run_with(&dir, vec![hook(HookEvent::PermissionRequest, deny)], tool.clone()).await;
    assert!(tool.calls().is_empty());
    assert!(out.tool_results()[0].contains("permission denied by a hook: ask a human"));

    let halt = script(
        &dir,
        "halt.sh",
        "echo '{\"continue\": false, \"stop_reason\": \"Stopped by policy.\"}'",
    );
    let tool = RecordingTool::new("shell");
    let out = run_with(&dir, vec![hook(HookEvent::PostToolUse, halt)], tool.clone()).await;
    let run = out.run.unwrap();
    assert_eq!(run.final_text(), "Stopped by policy.");
    assert_eq!(out.model.calls(), 1, "no model call after the stop");
}

#[tokio::test]
async fn a_blocked_prompt_fails_the_run() {
    let dir = temp_dir("hooks", "prompt-block");
    let deny = script(
        &dir,
        "deny.sh",
        "echo '{\"decision\": \"block\", \"reason\": \"contains a secret\"}'",
    );
    let out = run_with(
        &dir,
        vec![hook(HookEvent::UserPromptSubmit, deny)],
        RecordingTool::new("shell"),
    )
    .await;
    let err = out.run.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("contains a secret"));
    assert_eq!(out.model.calls(), 0);
}

#[test]
fn a_runtime_without_io_reports_the_hook_as_failed_instead_of_panicking() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let dir = temp_dir("hooks", "no-io");
    let cmd = script(&dir, "ok.sh", "echo '{}'");
    let hook = hook(HookEvent::PreToolUse, cmd);
    let input = tinyagents::external_hooks::HookInput::new(HookEvent::PreToolUse, "run-1", dir.display().to_string());
    let run = rt.block_on(tinyagents::external_hooks::run_hook(&hook, &input, &dir));
    match run {
        tinyagents::external_hooks::HookRun::Failed(message) => assert!(message.contains("IO enabled"), "{message}"),
        other => panic!("expected a failed hook, got {other:?}"),
    }
}

/// A stand-in compactor: asks the `pre_compact` hooks before it would compact.
struct Compactor {
    blocked: Arc<std::sync::Mutex<Option<String>>>,
}

#[middleware(name = "compactor")]
impl Compactor {
    #[before_model]
    async fn compact<S, C>(&self, ctx: &mut RunContext<C>, state: &S) -> Result<()> {
        let mut plan = tinyagents::harness::provenance::CompactionPlan::new("compactor", "compactor/1", 3);
        tinyagents::harness::middleware::pre_compact(ctx, state, &mut plan).await?;
        *self.blocked.lock().unwrap() = plan.blocked().map(str::to_owned);
        Ok(())
    }
}

#[tokio::test]
async fn compaction_code_asks_the_pre_compact_hooks() {
    let dir = temp_dir("hooks", "pre-compact");
    let cmd = script(
        &dir,
        "keep.sh",
        "cat > compact.json\necho '{\"decision\": \"block\", \"reason\": \"keep the history\"}'",
    );
    let blocked = Arc::new(std::sync::Mutex::new(None));
    let stack = MiddlewareStack::new()
        .with(Compactor {
            blocked: blocked.clone(),
        })
        .unwrap()
        .with(ExternalHooksMiddleware::new([hook(HookEvent::PreCompact, cmd)]).in_dir(&dir))
        .unwrap();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("hi")])).with_stack(stack);
    agent
        .run(&mut RunContext::new(RunConfig::new("run-1"), ()), &(), "hello")
        .await
        .unwrap();
    assert_eq!(blocked.lock().unwrap().as_deref(), Some("keep the history"));
    let input: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("compact.json")).unwrap()).unwrap();
    assert_eq!(input["event"], "pre_compact");
    assert_eq!(input["compaction"]["messages"], 3);
}

#[tokio::test]
async fn a_pre_compact_hook_can_keep_the_summarization_built_in_from_compacting() {
    use tinyagents::middleware::{SummarizationMiddleware, SummaryTrigger};
    let dir = temp_dir("hooks", "pre-compact-summary");
    let cmd = script(&dir, "keep.sh", "cat > compact.json\necho 'not now' >&2\nexit 2");
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let stack = MiddlewareStack::new()
        .with(ExternalHooksMiddleware::new([hook(HookEvent::PreCompact, cmd)]).in_dir(&dir))
        .unwrap()
        .with(SummarizationMiddleware::new(SummaryTrigger::messages(2)).keep_messages(1))
        .unwrap();
    let agent: Agent<()> = Agent::from_shared(model.clone()).with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let history = vec![Message::user("one"), Message::assistant("two"), Message::user("three")];
    agent
        .run(
            &mut RunContext::new(RunConfig::new("run-1"), ()).with_sink(sink.clone()),
            &(),
            history,
        )
        .await
        .unwrap();
    // the model saw the whole history: the summary was blocked
    let texts: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(texts, ["one", "two", "three"]);
    let input: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("compact.json")).unwrap()).unwrap();
    assert_eq!(input["compaction"]["middleware"], "summarization");
    assert!(sink.events().iter().any(|e| matches!(e,
        AgentEvent::Notice { source, message, .. } if source == "pre_compact" && message.contains("not now"))));
}

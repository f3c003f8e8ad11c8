//! Human approval survives a restart (issue 15, item 6), with two OS
//! processes: the first runs an agent with the built-in `human_in_the_loop`
//! under `AgentGraph::run_durable` on a `FileCheckpointer`, pauses, writes
//! the interrupt (JSON) for the person and exits; a second process, started
//! fresh, reads it, decides, and resumes from the same store with
//! `AgentGraph::resume_with`. The tool appends a line to a file at each call,
//! so the count is exact across processes: an approved call runs exactly
//! once, a rejected one never, and a replayed resume (a third process with
//! the same decisions, or with them given fresh request ids) is refused and
//! runs nothing.
//!
//! `harness = false`: this binary is both the test and, when
//! `TINYAGENTS_APPROVAL_ROLE` is set, the process it starts.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;
use tinyagents::graph::{AgentGraph, Checkpointer, FileCheckpointer};
use tinyagents::middleware::{Decision, HitlInterrupt, HitlResume, HumanInTheLoopMiddleware, InterruptOn};
use tinyagents::prelude::*;

const ROLE: &str = "TINYAGENTS_APPROVAL_ROLE";
const DIR: &str = "TINYAGENTS_APPROVAL_DIR";
const THREAD: &str = "approval-thread";

/// The agent as each process builds it from scratch. `turns` is what its
/// model says from where that process starts.
fn agent(dir: &Path, turns: Vec<ScriptedTurn>) -> Agent<()> {
    let log = dir.join("calls.log");
    let delete = tool_fn("delete", "Deletes a file.", move |_cx, args| {
        let log = log.clone();
        async move {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap();
            writeln!(f, "{args}").unwrap();
            Ok(format!("deleted {}", args["path"]).into())
        }
    });
    let hitl = HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new());
    Agent::new(ScriptedModel::new(turns))
        .with_tools(ToolRegistry::new().with(delete).unwrap())
        .with_stack(MiddlewareStack::new().with(hitl).unwrap())
}

fn calls(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls.log"))
        .map(|s| s.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// One process's part; `Err` is reported on stderr with exit code 1.
async fn role(role: &str, dir: &Path) -> Result<String> {
    let store = FileCheckpointer::open(dir.join("store"))?;
    match role {
        "pause" => {
            let agent = agent(
                dir,
                vec![ScriptedTurn::tool_calls(vec![ToolCall::new(
                    "d1",
                    "delete",
                    json!({"path": "old.log"}),
                )])],
            );
            let mut ctx = RunContext::new(RunConfig::new("run-1"), ());
            let err = AgentGraph::new(&agent)
                .run_durable(&mut ctx, &(), "clean up", THREAD, &store)
                .await
                .expect_err("the run pauses");
            assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
            let interrupt = HumanInTheLoopMiddleware::take_interrupt(&ctx).expect("an interrupt");
            std::fs::write(dir.join("interrupt.json"), serde_json::to_vec(&interrupt).unwrap()).unwrap();
            Ok("paused".into())
        }
        "approve" | "reject" => {
            let shown: HitlInterrupt =
                serde_json::from_slice(&std::fs::read(dir.join("interrupt.json")).unwrap()).unwrap();
            let decision = if role == "approve" {
                Decision::Approve
            } else {
                Decision::Reject {
                    message: Some("keep it".into()),
                }
            };
            let resume = shown.decide([("d1", decision)])?;
            std::fs::write(dir.join("resume.json"), serde_json::to_vec(&resume).unwrap()).unwrap();
            let agent = agent(dir, vec![ScriptedTurn::text("all clean")]);
            let mut ctx = RunContext::new(RunConfig::new("run-2"), ());
            let run = AgentGraph::new(&agent)
                .resume_with(&mut ctx, &(), THREAD, &store, resume)
                .await?;
            Ok(run.final_text())
        }
        "replay" => {
            let resume: HitlResume = serde_json::from_slice(&std::fs::read(dir.join("resume.json")).unwrap()).unwrap();
            let agent = agent(dir, vec![ScriptedTurn::text("again")]);
            let mut ctx = RunContext::new(RunConfig::new("run-3"), ());
            match AgentGraph::new(&agent)
                .resume_with(&mut ctx, &(), THREAD, &store, resume)
                .await
            {
                Err(e) if e.kind() == ErrorKind::Conflict => Ok(format!("refused: {e}")),
                other => Err(TinyAgentsError::validation(format!(
                    "a replayed resume was not refused with a conflict: {other:?}"
                ))),
            }
        }
        "forged_replay" => {
            // The spent decisions with fresh request ids: the store knows what was asked.
            let mut forged: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.join("resume.json")).unwrap()).unwrap();
            forged["decisions"]["d1"]["request_id"] = json!("f".repeat(32));
            forged["interrupt"]["requests"][0]["request_id"] = json!("f".repeat(32));
            let resume: HitlResume = serde_json::from_value(forged).unwrap();
            let agent = agent(dir, vec![ScriptedTurn::text("again")]);
            let mut ctx = RunContext::new(RunConfig::new("run-5"), ());
            match AgentGraph::new(&agent)
                .resume_with(&mut ctx, &(), THREAD, &store, resume)
                .await
            {
                Err(e) if e.kind() == ErrorKind::Validation => Ok(format!("refused: {e}")),
                other => Err(TinyAgentsError::validation(format!(
                    "a forged replay was not refused: {other:?}"
                ))),
            }
        }
        "plain_resume" => {
            // No decisions: the run pauses again (it never runs the gated call).
            let agent = agent(dir, vec![]);
            let mut ctx = RunContext::new(RunConfig::new("run-4"), ());
            match AgentGraph::new(&agent).resume(&mut ctx, &(), THREAD, &store).await {
                Err(e) if e.kind() == ErrorKind::Interrupted => {
                    // a new pause asks anew: the person sees its interrupt
                    let interrupt = HumanInTheLoopMiddleware::take_interrupt(&ctx).expect("an interrupt");
                    std::fs::write(dir.join("interrupt.json"), serde_json::to_vec(&interrupt).unwrap()).unwrap();
                    Ok("paused again".into())
                }
                other => Err(TinyAgentsError::validation(format!("expected a new pause: {other:?}"))),
            }
        }
        other => panic!("unknown role {other}"),
    }
}

fn spawn(role: &str, dir: &Path) -> Result<String, String> {
    let out = Command::new(std::env::current_exe().unwrap())
        .env(ROLE, role)
        .env(DIR, dir)
        .output()
        .expect("start a process");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "process `{role}` failed ({}): {stdout} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-approval-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn check(failures: &mut Vec<String>, ok: bool, what: impl Into<String>) {
    if !ok {
        failures.push(what.into());
    }
}

fn main() {
    if let (Ok(r), Ok(dir)) = (std::env::var(ROLE), std::env::var(DIR)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        match rt.block_on(role(&r, Path::new(&dir))) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let mut failures = Vec::new();
    let mut passed = 0;

    // 1. Approve in a second process: the call runs exactly once; a replay is refused.
    let dir = fresh_dir("approve");
    match spawn("pause", &dir) {
        Ok(_) => check(
            &mut failures,
            calls(&dir).is_empty(),
            "the gated call ran before a decision",
        ),
        Err(e) => failures.push(e),
    }
    match spawn("plain_resume", &dir) {
        Ok(_) => check(
            &mut failures,
            calls(&dir).is_empty(),
            "a resume without decisions ran the call",
        ),
        Err(e) => failures.push(e),
    }
    match spawn("approve", &dir) {
        Ok(text) => {
            check(&mut failures, text == "all clean", format!("resumed run said {text:?}"));
            check(
                &mut failures,
                calls(&dir) == [r#"{"path":"old.log"}"#],
                format!("the approved call ran {:?}, expected exactly once", calls(&dir)),
            );
        }
        Err(e) => failures.push(e),
    }
    match spawn("replay", &dir) {
        Ok(text) => check(
            &mut failures,
            text.contains("already used"),
            format!("the replay was refused for another reason: {text}"),
        ),
        Err(e) => failures.push(e),
    }
    if let Err(e) = spawn("forged_replay", &dir) {
        failures.push(e);
    }
    check(
        &mut failures,
        calls(&dir).len() == 1,
        format!("after the replays the call ran {} times", calls(&dir).len()),
    );
    if failures.is_empty() {
        passed += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);

    // 2. Reject in a second process: the call never runs.
    let before = failures.len();
    let dir = fresh_dir("reject");
    if let Err(e) = spawn("pause", &dir) {
        failures.push(e);
    }
    match spawn("reject", &dir) {
        Ok(text) => check(&mut failures, text == "all clean", format!("resumed run said {text:?}")),
        Err(e) => failures.push(e),
    }
    check(&mut failures, calls(&dir).is_empty(), "the rejected call ran");
    match spawn("replay", &dir) {
        Ok(_) => {}
        Err(e) => failures.push(e),
    }
    check(
        &mut failures,
        calls(&dir).is_empty(),
        "a replayed rejection ran the call",
    );
    // the store holds the spent decisions: the latest checkpoint says so
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let latest = rt.block_on(async {
        FileCheckpointer::open(dir.join("store"))
            .unwrap()
            .latest(THREAD)
            .await
            .unwrap()
    });
    check(
        &mut failures,
        latest
            .as_ref()
            .and_then(|c| c.state.get("hitl_consumed"))
            .and_then(|v| v.as_array())
            .is_some_and(|a| a.len() == 1),
        format!(
            "the checkpoint does not record the used decision: {:?}",
            latest.map(|c| c.state)
        ),
    );
    if failures.len() == before {
        passed += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);

    if failures.is_empty() {
        println!("test result: ok. {passed} passed; 0 failed");
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        println!("test result: FAILED. {passed} passed; {} failed", 2 - passed);
        std::process::exit(1);
    }
}

//! What a hook process can reach and how much memory it can cost, in a
//! dedicated test binary with a single test: it re-runs itself with secrets
//! planted in the child's environment (so no test mutates its own process's
//! environment) and measures the heap with a counting global allocator (dhat
//! in testing mode).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tinyagents::external_hooks::{run_hook, HookCommand, HookEvent, HookInput, HookRun};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-hooks-iso-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn input(event: HookEvent, dir: &Path) -> HookInput {
    HookInput::new(event, "run-iso", dir.display().to_string()).with_tool("c1", "shell", serde_json::json!({}))
}

/// Set in the child run that has the planted environment.
const PLANTED: &str = "TINYAGENTS_HOOKS_ISO_PLANTED";

#[test]
fn hooks_see_only_the_allowed_environment_and_cost_bounded_memory() {
    let _profiler = dhat::Profiler::builder().testing().build();
    // The agent's secrets and ordinary variables are planted in a child
    // process's environment: this binary re-runs itself with them set, and the
    // child (which sees `PLANTED`) runs the checks below.
    if std::env::var_os(PLANTED).is_none() {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "hooks_see_only_the_allowed_environment_and_cost_bounded_memory",
                "--nocapture",
            ])
            .env(PLANTED, "1")
            .env("OPENAI_API_KEY", "sk-planted-openai")
            .env("ANTHROPIC_API_KEY", "sk-planted-anthropic")
            .env("SECRET_X", "planted-secret")
            .env("TINYAGENTS_PARENT_TOKEN", "planted-tinyagents")
            .env("CI_PASSED_ON", "yes")
            .env("LC_TINYAGENTS_TEST", "lc-ok")
            .status()
            .unwrap();
        assert!(status.success(), "the planted child run failed: {status}");
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let dir = temp_dir("env");
    let hook = HookCommand::new(HookEvent::PreToolUse, "env > env.txt")
        .with_timeout(Duration::from_secs(20))
        .with_env("MODE", "strict")
        .with_env("TINYAGENTS_HOOK_EVENT", "forged")
        .with_pass_env("CI_PASSED_ON");
    let run = rt.block_on(run_hook(&hook, &input(HookEvent::PreToolUse, &dir), &dir));
    assert!(matches!(run, HookRun::Answered(_)), "{run:?}");
    let env = std::fs::read_to_string(dir.join("env.txt")).unwrap();
    for secret in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "SECRET_X",
        "TINYAGENTS_PARENT_TOKEN",
        "planted",
    ] {
        assert!(!env.contains(secret), "the hook saw `{secret}`:\n{env}");
    }
    let has = |line: &str| env.lines().any(|l| l == line);
    for line in [
        "MODE=strict",
        "CI_PASSED_ON=yes",
        "LC_TINYAGENTS_TEST=lc-ok",
        "TINYAGENTS_HOOK_EVENT=pre_tool_use",
        "TINYAGENTS_HOOK_SCHEMA=tinyagents.hook/1",
        "TINYAGENTS_RUN_ID=run-iso",
    ] {
        assert!(has(line), "missing `{line}` in:\n{env}");
    }
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    assert!(
        !env.lines().any(|l| l.starts_with("TINYAGENTS_HOOK_EVENT=forged")),
        "an entry cannot forge the event"
    );

    // 200 MB on stdout: the read stops at the 1 MiB cap; the heap never holds the flood
    let before = dhat::HeapStats::get().max_bytes;
    let flood =
        HookCommand::new(HookEvent::PreToolUse, "head -c 209715200 /dev/zero").with_timeout(Duration::from_secs(60));
    let run = rt.block_on(run_hook(&flood, &input(HookEvent::PreToolUse, &dir), &dir));
    match &run {
        HookRun::Failed(message) => assert!(message.contains("more than 1048576 bytes to stdout"), "{message}"),
        other => panic!("expected a failed hook, got {other:?}"),
    }
    let peak = dhat::HeapStats::get().max_bytes;
    assert!(
        peak < before.max(1) + (8 << 20),
        "peak heap {peak} bytes (before: {before}): the read was not bounded"
    );
}

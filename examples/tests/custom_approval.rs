//! The `custom_approval` example in two (then three) OS processes: the
//! first runs until the example's own approval gate pauses the durable run
//! and prints the interrupt; a second, started fresh, answers it and resumes
//! from the file store. The tool appends a line per call to a file, so the
//! count is exact across processes: approved, the call runs exactly once,
//! and a third process replaying the answer is refused and runs nothing;
//! refused, it never runs.
//!
//! `harness = false`: this binary is both the test and, with arguments, the
//! example's processes (its `role`).

#[path = "../custom_approval.rs"]
#[allow(dead_code)] // the example's own `main` is not this binary's
mod example;

use std::path::PathBuf;

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-custom-approval-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

fn check(failures: &mut Vec<String>, ok: bool, what: impl Into<String>) {
    if !ok {
        failures.push(what.into());
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if matches!(args.first().map(String::as_str), Some("pause" | "resume")) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        match rt.block_on(example::role(&args)) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let mut failures = Vec::new();

    // Approved in a second process: the call runs exactly once; a replay is refused.
    let dir = fresh_dir("approve");
    let path = dir.to_string_lossy().into_owned();
    match example::me(&["pause", &path]) {
        Ok(interrupt) => {
            check(
                &mut failures,
                example::calls(&dir) == 0,
                "the gated call ran before the answer",
            );
            match example::me(&["resume", &path, "approve", &interrupt]) {
                Ok(text) => check(
                    &mut failures,
                    text == "done: deleted \"old.log\"",
                    format!("the approved run said {text:?}"),
                ),
                Err(e) => failures.push(format!("the approving process failed: {e}")),
            }
            check(
                &mut failures,
                example::calls(&dir) == 1,
                format!("approved, the call ran {} times, not once", example::calls(&dir)),
            );
            match example::me(&["resume", &path, "approve", &interrupt]) {
                Ok(text) => failures.push(format!("a replayed answer was accepted: {text:?}")),
                Err(e) => check(
                    &mut failures,
                    e.contains("already used"),
                    format!("a replay was refused for another reason: {e}"),
                ),
            }
            check(
                &mut failures,
                example::calls(&dir) == 1,
                format!("after a replay, the call ran {} times, not once", example::calls(&dir)),
            );
        }
        Err(e) => failures.push(format!("the pausing process failed: {e}")),
    }
    let _ = std::fs::remove_dir_all(&dir);

    // Refused in a second process: the call never runs, the model is told.
    let dir = fresh_dir("reject");
    let path = dir.to_string_lossy().into_owned();
    match example::me(&["pause", &path]) {
        Ok(interrupt) => {
            match example::me(&["resume", &path, "reject", &interrupt]) {
                Ok(text) => check(
                    &mut failures,
                    text.starts_with("done: ") && text.contains("refused"),
                    format!("the refused run said {text:?}"),
                ),
                Err(e) => failures.push(format!("the refusing process failed: {e}")),
            }
            check(
                &mut failures,
                example::calls(&dir) == 0,
                format!("refused, the call ran {} times", example::calls(&dir)),
            );
        }
        Err(e) => failures.push(format!("the pausing process failed: {e}")),
    }
    let _ = std::fs::remove_dir_all(&dir);

    if failures.is_empty() {
        println!("custom_approval: ok (approve once, replay refused, reject never runs)");
    } else {
        eprintln!(
            "custom_approval: {} failure(s):\n{}",
            failures.len(),
            failures.join("\n")
        );
        std::process::exit(1);
    }
}

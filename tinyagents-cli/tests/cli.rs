//! The `tinyagents` binary, run as a user would.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tinyagents(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tinyagents"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/agent.toml")
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn docs_prints_the_generated_middleware_table() {
    let out = tinyagents(&["docs"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // `--help` says it is the text of docs/middleware.md: all of it
    assert_eq!(stdout(&out), tinyagents::docs::render_builtin_docs());
    let committed = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(tinyagents::docs::MIDDLEWARE_MD),
    )
    .unwrap();
    assert_eq!(stdout(&out), committed);
}

#[test]
fn check_passes_on_the_example_and_prints_the_resolved_stack_with_hooks() {
    let out = tinyagents(&["check", example().to_str().unwrap()]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}{}", text, stderr(&out));
    assert!(text.contains(": ok — "), "{text}");
    // at least eight built-ins, plus the external hooks
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.trim_start()
                .split('.')
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .collect();
    assert!(rows.len() >= 9, "{text}");
    // listed last in the file, the hooks run first: the guards judge their rewrites
    assert!(rows.first().unwrap().contains("external_hooks"), "{text}");
    assert!(
        text.contains("before_tool"),
        "each middleware's hooks are listed: {text}"
    );
    assert!(
        text.contains("pre_tool_use /^shell$/: sh hooks/check-shell.sh"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("output_limit_recovery") && l.ends_with("(on by default)")),
        "{text}"
    );
    let catalog: Vec<&str> = tinyagents::middleware::catalog().iter().map(|d| d.name).collect();
    let builtins = rows
        .iter()
        .filter(|r| catalog.iter().any(|c| r.contains(&format!(" {c} "))))
        .count();
    assert!(builtins >= 8, "at least eight built-ins: {text}");
}

#[test]
fn check_reports_every_error_with_its_place_and_exits_1() {
    let bad = temp_file(
        "bad.toml",
        r#"[[middleware]]
type = "loging"

[[middleware]]
type = "message_trimming"
max_messages = 0

[[hooks]]
event = "pre_tool"
command = "true"

[agent]
max_steps = "many"
promt = "hi"
"#,
    );
    let out = tinyagents(&["check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let name = bad.display().to_string();
    assert!(
        err.contains(&format!(
            "{name}:2:8: `middleware[0].type` = \"loging\": unknown middleware type"
        )),
        "{err}"
    );
    assert!(err.contains("did you mean `logging`?"), "{err}");
    assert!(
        err.contains(&format!("{name}:6:16: `middleware[1].max_messages` = 0")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{name}:9:9: `hooks[0].event` = \"pre_tool\"")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{name}:13:13: `agent.max_steps` = \"many\"")),
        "{err}"
    );
    assert!(
        err.contains(&format!("{name}:14:9: `agent.promt` = \"hi\": unknown key"))
            && err.contains("did you mean `prompt`?"),
        "{err}"
    );
    assert!(err.contains("error: 5 problems found"), "{err}");
    assert!(stdout(&out).is_empty());
}

#[test]
fn run_streams_the_events_of_a_scripted_run() {
    let out = tinyagents(&["run", example().to_str().unwrap()]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.contains("▶ run run-1"), "{text}");
    assert!(text.contains("Let me look."), "{text}");
    assert!(
        text.contains("ℹ external_hooks: shell call checked by hooks/check-shell.sh"),
        "{text}"
    );
    assert!(text.contains("⚙ shell"), "{text}");
    assert!(text.contains("✓ shell"), "{text}");
    assert!(
        text.contains("final: The directory holds agent.toml and a hooks folder."),
        "{text}"
    );
}

#[test]
fn run_takes_a_json_script_and_a_refused_call_gets_an_error_result() {
    let script = temp_file(
        "replies.json",
        r#"[
            { "text": "Cleaning up.", "tool_calls": [{ "name": "shell", "arguments": { "command": "rm -rf build" } }] },
            { "text": "I was not allowed to delete it." }
        ]"#,
    );
    let out = tinyagents(&[
        "run",
        example().to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--prompt",
        "Delete the build directory.",
    ]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    // `rm` is refused (by the shell guard's batch review, before the hook would block it)
    let result = text
        .lines()
        .find(|l| l.starts_with("tool result shell"))
        .unwrap_or_default();
    assert!(
        result.contains("`rm` is denied"),
        "the refused call gets an error result: {text}"
    );
    assert!(text.contains("final: I was not allowed to delete it."), "{text}");
}

#[test]
fn run_without_a_script_says_how_to_give_one() {
    let file = temp_file("noscript.toml", "[[middleware]]\ntype = \"logging\"\n");
    let out = tinyagents(&["run", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no scripted replies"), "{}", stderr(&out));
}

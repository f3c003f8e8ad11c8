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
fn check_passes_on_the_output_limit_recovery_example() {
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/confs/output_limit_recovery.toml");
    let out = tinyagents(&["check", conf.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("output_limit_recovery"), "{text}");
}

#[test]
fn check_reports_every_error_with_its_place_and_exits_1() {
    let bad = temp_file(
        "bad.toml",
        r#"[[middleware]]
type = "loging"

[[middleware]]
type = "message_trim"
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

/// Runs the binary with `args` and `input` on standard input.
fn tinyagents_stdin(args: &[&str], input: &str) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tinyagents"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary starts");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input.as_bytes())
        .expect("stdin is written");
    child.wait_with_output().expect("the binary runs")
}

#[test]
fn an_empty_agent_file_is_an_error_naming_it_and_the_fix() {
    // `cat missing.toml | tinyagents check -`: `cat` fails, standard input is empty
    let out = tinyagents_stdin(&["check", "-"], "");
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("<stdin>: the agent file is empty"), "{err}");
    assert!(err.contains("standard input was empty"), "{err}");
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    // a file of blank lines and comments declares nothing either
    let blank = temp_file("blank.toml", "\n# nothing yet\n\n");
    let out = tinyagents(&["check", blank.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}: the agent file is empty", blank.display()))
            && err.contains("write at least one of `[[middleware]]`"),
        "{err}"
    );
}

#[test]
fn under_json_a_run_that_cannot_start_ends_with_a_failed_line() {
    let failed = |out: &Output| -> serde_json::Value {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(out));
        let text = stdout(out);
        let last = text.lines().last().unwrap_or_default();
        serde_json::from_str(last).unwrap_or_else(|e| panic!("the last line is JSON ({e}): {text}"))
    };
    // a bad agent file
    let bad = temp_file("bad-json.toml", "[[middleware]]\ntype = \"loging\"\n");
    let line = failed(&tinyagents(&["run", bad.to_str().unwrap(), "--json"]));
    assert_eq!(line["type"], "failed");
    assert_eq!(line["error"], "config");
    assert_eq!(line["status"], serde_json::Value::Null);
    assert!(
        line["message"].as_str().unwrap().contains("unknown middleware type"),
        "{line}"
    );
    // no model and no script
    let file = temp_file("noscript-json.toml", "[[middleware]]\ntype = \"logging\"\n");
    let line = failed(&tinyagents(&["run", file.to_str().unwrap(), "--json"]));
    assert_eq!(line["error"], "config");
    assert!(
        line["message"].as_str().unwrap().contains("no scripted replies"),
        "{line}"
    );
    // an empty file on standard input
    let line = failed(&tinyagents_stdin(&["run", "-", "--json"], ""));
    assert!(
        line["message"].as_str().unwrap().contains("the agent file is empty"),
        "{line}"
    );
}

#[test]
fn check_shows_each_preset_and_a_files_entries_extend_it() {
    for preset in tinyagents::presets::PRESETS {
        let path = temp_file(
            &format!("preset-{}.toml", preset.name),
            &format!("preset = \"{}\"\n", preset.name),
        );
        let out = tinyagents(&["check", path.to_str().unwrap()]);
        let text = stdout(&out);
        assert!(out.status.success(), "{}{}", text, stderr(&out));
        assert!(
            text.contains(&format!("preset: {} — {}", preset.name, preset.summary)),
            "{text}"
        );
        let stack = preset.preset.stack().unwrap();
        assert!(text.contains(&format!("ok — {} middleware", stack.len())), "{text}");
    }
    let path = temp_file(
        "preset-extended.toml",
        "preset = \"research\"\n\n[[middleware]]\ntype = \"logging\"\n",
    );
    let out = tinyagents(&["check", path.to_str().unwrap()]);
    let text = stdout(&out);
    assert!(out.status.success(), "{}{}", text, stderr(&out));
    let plain = tinyagents::presets::Preset::Research.stack().unwrap().len();
    assert!(text.contains(&format!("ok — {} middleware", plain + 1)), "{text}");

    let path = temp_file("preset-unknown.toml", "preset = \"codin\"\n");
    let out = tinyagents(&["check", path.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("unknown preset `codin`; did you mean `coding`?"),
        "{}",
        stderr(&out)
    );
}

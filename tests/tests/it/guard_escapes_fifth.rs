//! Fifth red-team pass on the default stack (`shell_fs_guard` with its
//! default configuration, `pii` with `PiiMiddleware::new(Redact)`). Each test
//! asserts the fail-closed outcome and fails on the code it was found in.

use crate::sandbox_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::json;
use tinyagents::harness::model::{DeltaContent, FinishReason};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use sandbox_support::{model_runs, sandbox_available, verdict, Workspace};

fn git(root: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository whose `main` is a commit carrying a `gpgsig` header (as every
/// commit signed by its author, or merged through a forge's web UI, has), and
/// whose (user-set, not model-written) `gpg.program` is a script that leaves
/// a marker: the stand-in for "git ran gpg".
fn signed_repo(root: &Path) -> PathBuf {
    git(root, &["init", "-q"]);
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    git(root, &["add", "a.txt"]);
    git(root, &["commit", "-q", "-m", "one"]);
    let tree = git(root, &["rev-parse", "HEAD^{tree}"]);
    let body = format!(
        "tree {tree}\nauthor t <t@t> 0 +0000\ncommitter t <t@t> 0 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n =abcd\n -----END PGP SIGNATURE-----\n\nsigned\n"
    );
    std::fs::write(root.join("c.txt"), body).unwrap();
    let commit = git(root, &["hash-object", "-t", "commit", "-w", "c.txt"]);
    std::fs::remove_file(root.join("c.txt")).unwrap();
    git(root, &["update-ref", "refs/heads/main", &commit]);
    let marker = root.join("gpg-ran");
    let script = root.join("fake-gpg");
    std::fs::write(&script, format!("#!/bin/sh\ntouch '{}'\nexit 1\n", marker.display())).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    git(root, &["config", "gpg.program", script.to_str().unwrap()]);
    marker
}

/// The guard refuses `%G` placeholders ("they run gpg") by looking for the
/// text `%G` in `--format`/`--pretty` (git.rs, `parse`). git's pretty formats
/// take a modifier between `%` and the placeholder (`%+x`, `%-x`, `% x`),
/// so `%+GG`, `%-G?`, `% GS` verify the signature too, running gpg.program:
/// admitted.
#[test]
fn git_signature_placeholders_with_a_modifier_are_refused() {
    let ws = Workspace::new("rt5-gpg");
    let marker = signed_repo(&ws.root);
    // the precondition: git really runs gpg.program for `%+GG`, not for `%H`
    git(&ws.root, &["log", "-1", "--format=%H"]);
    assert!(!marker.exists());
    let _ = Command::new("git")
        .args(["log", "-1", "--format=%+GG"])
        .current_dir(&ws.root)
        .output()
        .unwrap();
    assert!(marker.exists(), "git ran gpg.program for `%+GG`");
    // the plain spelling is refused...
    assert!(verdict(&ws.root, "git log -1 --format=%GG").is_err());
    // ...the modified ones must be too
    let admitted: Vec<&str> = [
        "git log -1 --format=%+GG",
        "git log -1 --format=%-G?",
        "git log -1 '--format=% GS'",
        "git show -s --pretty=format:%+GK",
        "git rev-list -1 main --format=%+G?",
    ]
    .into_iter()
    .filter(|c| verdict(&ws.root, c).is_ok())
    .collect();
    assert!(
        admitted.is_empty(),
        "admitted, and each runs gpg on a signed commit: {admitted:?}"
    );
}

/// The same end to end: a model's `git log --format=%+GG` through the
/// default guard and a sandboxed `ShellTool` runs gpg.program.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn git_signature_placeholder_with_a_modifier_runs_no_program_end_to_end() {
    if !sandbox_available("git_signature_placeholder_with_a_modifier_runs_no_program_end_to_end") {
        return;
    }
    let ws = Workspace::new("rt5-gpg-e2e");
    let marker = signed_repo(&ws.root);
    let result = model_runs(&ws, &[("", "git log -1 --format=%+GG")]).await;
    assert!(
        !marker.exists(),
        "the admitted `git log --format=%+GG` ran gpg.program: {result:?}"
    );
}

/// The guard refuses `git cat-file --follow-symlinks` and promises that
/// "abbreviations that the program itself would accept are refused", but
/// its cat-file table lists `--follow`, which cat-file does not have: git's
/// parse-options reads it as the unique abbreviation of `--follow-symlinks`.
#[test]
fn git_cat_file_follow_is_the_refused_follow_symlinks() {
    let ws = Workspace::new("rt5-catfile");
    git(&ws.root, &["init", "-q"]);
    std::fs::write(ws.root.join("a.txt"), "a\n").unwrap();
    git(&ws.root, &["add", "a.txt"]);
    git(&ws.root, &["commit", "-q", "-m", "one"]);
    // git itself: `--follow` is accepted and is `--follow-symlinks`
    let help = Command::new("git").args(["cat-file", "-h"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned() + &String::from_utf8_lossy(&help.stderr);
    assert!(
        help.contains("--[no-]follow-symlinks") || help.contains("--follow-symlinks"),
        "{help}"
    );
    assert!(
        !help.contains("--follow "),
        "cat-file has no option named `--follow`: {help}"
    );
    assert!(verdict(&ws.root, "git cat-file --batch-check --follow-symlinks").is_err());
    assert!(
        verdict(&ws.root, "git cat-file --batch-check --follow").is_err(),
        "`--follow` (an abbreviation of the refused `--follow-symlinks`) was admitted"
    );
}

// ----------------------------------------------------------------- pii

/// Invisible format characters the normaliser does not drop (it drops only
/// U+00AD, U+200B–U+200D, U+2060, U+FEFF): the left-to-right and
/// right-to-left marks, the invisible operators, the Mongolian vowel
/// separator, the combining grapheme joiner, variation selectors, tag
/// characters, bidi isolates. Each renders as nothing, so a reader (or a
/// program that strips format characters) sees the value whole.
const INVISIBLE: &[char] = &[
    '\u{200E}',
    '\u{200F}',
    '\u{2061}',
    '\u{2062}',
    '\u{2063}',
    '\u{2064}',
    '\u{180E}',
    '\u{034F}',
    '\u{FE0F}',
    '\u{E0020}',
    '\u{2066}',
    '\u{2069}',
    '\u{202A}',
    '\u{202C}',
];

fn strip_invisible(s: &str) -> String {
    s.chars().filter(|c| !INVISIBLE.contains(c)).collect()
}

fn hidden_values(x: char) -> Vec<(&'static str, String, &'static str)> {
    vec![
        ("credit_card", format!("4111{x}1111{x}1111{x}1111"), "4111111111111111"),
        ("email", format!("ann{x}@example.com"), "ann@example.com"),
        ("ipv4", format!("192.168.{x}10.20"), "192.168.10.20"),
        ("phone", format!("+1 415{x} 555 0100"), "+1 415 555 0100"),
        (
            "secret",
            format!("ghp_{x}abcdefghijklmnopqrstuvwxyz0123456789"),
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ),
    ]
}

#[test]
fn pii_invisible_format_characters_do_not_hide_a_value() {
    let pii = PiiMiddleware::new(PiiStrategy::Redact);
    // the plain values are found
    for (_, _, plain) in hidden_values('x') {
        let (out, _) = pii.redact_text(&format!("value: {plain} ok")).unwrap();
        assert!(!out.contains(plain), "{plain} -> {out}");
    }
    let mut leaked = Vec::new();
    for &x in INVISIBLE {
        for (kind, hidden, plain) in hidden_values(x) {
            let (out, _) = pii.redact_text(&format!("value: {hidden} ok")).unwrap();
            if strip_invisible(&out).contains(plain) {
                leaked.push(format!("{kind} with U+{:04X}", x as u32));
            }
        }
    }
    assert!(
        leaked.is_empty(),
        "{} values passed unredacted: {leaked:?}",
        leaked.len()
    );
}

/// End to end: a card and an email with a left-to-right mark (U+200E)
/// streamed by the model reach the event sink, the returned `AgentRun` and
/// a tool's arguments.
#[tokio::test]
async fn pii_a_left_to_right_mark_carries_a_card_and_an_email_everywhere() {
    let lrm = '\u{200E}';
    let card = format!("4111{lrm}1111{lrm}1111{lrm}1111");
    let email = format!("ann{lrm}@example.com");
    let send = RecordingTool::new("send").returning("sent");
    let model = ScriptedModel::new([
        ScriptedTurn::Deltas(vec![
            ModelDelta::text(format!("Paying with {card}, receipt to {email}.")),
            ModelDelta::new(DeltaContent::ToolCall {
                index: 0,
                id: Some("c1".into()),
                name: Some("send".into()),
                arguments: json!({ "to": email, "card": card }).to_string(),
            }),
            ModelDelta::finish(FinishReason::ToolCalls),
        ]),
        ScriptedTurn::text(format!("Done: {card}")),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(send.clone()).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(PiiMiddleware::new(PiiStrategy::Redact))
                .unwrap(),
        );
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "pay").await.unwrap();
    // serialised (Debug would escape the marks as `\u{200e}`)
    let events = strip_invisible(&serde_json::to_string(&sink.events()).unwrap());
    let tool_args = strip_invisible(&serde_json::to_string(&send.calls()).unwrap());
    let returned = strip_invisible(&serde_json::to_string(&run.messages).unwrap());
    let mut leaks = Vec::new();
    for (place, text) in [
        ("event sink", &events),
        ("tool arguments", &tool_args),
        ("AgentRun", &returned),
    ] {
        for plain in ["4111111111111111", "ann@example.com"] {
            if text.contains(plain) {
                leaks.push(format!("{plain} in the {place}"));
            }
        }
    }
    assert!(leaks.is_empty(), "{leaks:?}");
}

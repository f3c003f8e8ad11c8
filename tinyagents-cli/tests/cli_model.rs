//! `tinyagents run` on a real model: `--model provider:model` and `[model]`,
//! keys from the provider's variables (a missing one is an error naming it),
//! the agent file from standard input, `--json` event lines, the log level,
//! and clap's did-you-mean. The model is the provider tests' loopback server
//! speaking each provider's wire format.

#[path = "../../tests/tests/it/providers/support.rs"]
mod provider_support;

use std::process::{Output, Stdio};

use provider_support::{an_text_reply, oa_delta, oa_finish, oa_text_reply, oa_usage, openai_sse, Reply, Server};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

/// Every variable a provider reads, removed from the child's environment so
/// the developer's own keys never leak into (or satisfy) a test.
const PROVIDER_VARS: [&str; 12] = [
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_COMPATIBLE_API_KEY",
    "OPENAI_COMPATIBLE_BASE_URL",
    "OLLAMA_API_KEY",
    "OLLAMA_BASE_URL",
    "VLLM_API_KEY",
    "VLLM_BASE_URL",
    "TINYAGENTS_MODEL",
    "RUST_LOG",
];

/// Runs the binary with `args`, these variables and `stdin`.
async fn tinyagents(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_tinyagents"));
    cmd.args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for v in PROVIDER_VARS {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("the binary starts");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(text.as_bytes()).await.unwrap();
        drop(pipe);
    }
    child.wait_with_output().await.expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The JSON lines of `--json`, each parsed.
fn json_lines(o: &Output) -> Vec<Value> {
    stdout(o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

fn file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("tinyagents-cli-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

const AGENT: &str = r#"
[agent]
prompt = "What is six times seven?"
tool_outputs = { lookup = "42" }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_flag_runs_an_openai_model_with_its_key_and_prints_json_events() {
    let tool_call = openai_sse(&[
        oa_delta(json!({"role": "assistant", "content": null, "tool_calls": [
            {"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"6*7\"}"}}
        ]})),
        oa_finish("tool_calls"),
        oa_usage(20, 5, 0, 0),
    ]);
    let server = Server::start(vec![
        Reply::sse(&tool_call, 7),
        Reply::sse(&oa_text_reply("It is 42.", 30, 4), 5),
    ])
    .await;
    let path = file("openai.toml", AGENT);
    let out = tinyagents(
        &["run", &path, "--model", "openai:gpt-test", "--json"],
        &[("OPENAI_API_KEY", "sk-test-1"), ("OPENAI_BASE_URL", &server.url("/v1"))],
        None,
    )
    .await;
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    let lines = json_lines(&out);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"run_started"));
    let started: Vec<&Value> = lines.iter().filter(|l| l["type"] == "model_call_started").collect();
    assert_eq!(started.len(), 2);
    assert_eq!(started[0]["model"], "openai:gpt-test");
    let tool_done = lines
        .iter()
        .find(|l| l["type"] == "tool_call_completed")
        .expect("the fake tool ran");
    assert_eq!(tool_done["tool"], "lookup");
    assert_eq!(tool_done["is_error"], false);
    let streamed: String = lines
        .iter()
        .filter(|l| l["type"] == "model_delta" && l["delta"]["content"]["type"] == "text")
        .map(|l| l["delta"]["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "It is 42.");
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "finished");
    assert_eq!(last["final"], "It is 42.");
    assert_eq!(last["model_calls"], 2);
    assert_eq!(last["usage"]["output_tokens"], 9);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].header("authorization"), Some("Bearer sk-test-1"));
    assert_eq!(requests[0].body["model"], "gpt-test");
    assert_eq!(requests[0].body["messages"][0]["content"], "What is six times seven?");
    let tools = requests[0].body["tools"]
        .as_array()
        .expect("the fake tools are offered");
    assert_eq!(tools[0]["function"]["name"], "lookup");
    let second = requests[1].body["messages"].as_array().unwrap();
    let tool_message = second
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("the tool result goes back");
    assert_eq!(tool_message["content"], "42");
    assert_eq!(tool_message["tool_call_id"], "call_1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_section_read_from_stdin_takes_its_key_from_its_own_variable() {
    let server = Server::start(vec![Reply::sse(&an_text_reply("Bonjour.", 12, 3), 9)]).await;
    let text = format!(
        "{AGENT}\n[model]\nname = \"anthropic:claude-test\"\nbase_url = \"{}\"\napi_key_env = \"TEAM_ANTHROPIC_KEY\"\n",
        server.base
    );
    let out = tinyagents(
        &["run", "-", "-q"],
        &[
            ("TEAM_ANTHROPIC_KEY", "team-key"),
            ("ANTHROPIC_API_KEY", "personal-key"),
        ],
        Some(&text),
    )
    .await;
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out), "Bonjour.\n", "-q prints the final answer alone");
    let request = server.only_request();
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("team-key"));
    assert_eq!(request.body["model"], "claude-test");

    let check = tinyagents(&["check", "-"], &[], Some(&text)).await;
    assert!(check.status.success(), "{}", stderr(&check));
    assert!(stdout(&check).starts_with("<stdin>: ok"), "{}", stdout(&check));
    assert!(
        stdout(&check).contains("model: anthropic:claude-test"),
        "{}",
        stdout(&check)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_key_is_an_error_naming_the_variable_and_nothing_is_sent() {
    let server = Server::start(vec![]).await;
    let path = file("nokey.toml", AGENT);
    let out = tinyagents(
        &["run", &path, "--model", "openai:gpt-test"],
        &[("OPENAI_BASE_URL", &server.url("/v1"))],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("`OPENAI_API_KEY` is not set"), "{}", stderr(&out));

    // A file naming its own variable does not fall back to the usual one.
    let own = format!("{AGENT}\n[model]\nname = \"openai:gpt-test\"\napi_key_env = \"TEAM_OPENAI_KEY\"\n");
    let out = tinyagents(
        &["run", "-"],
        &[("OPENAI_API_KEY", "personal"), ("OPENAI_BASE_URL", &server.url("/v1"))],
        Some(&own),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("`TEAM_OPENAI_KEY` is not set"),
        "{}",
        stderr(&out)
    );
    assert!(server.requests().is_empty(), "no request without a key");
}

/// `--model` naming another provider than `[model]` does not take the
/// file's key variable, base URL or streaming along: the file's OpenAI team
/// key must never reach an Anthropic endpoint (nor the file's base URL get
/// the Anthropic key). The provider's own variables apply, with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_flag_for_another_provider_leaves_the_files_key_and_url_alone() {
    let file_server = Server::start(vec![]).await;
    let anthropic = Server::start(vec![Reply::sse(&an_text_reply("Hi.", 1, 1), 16)]).await;
    let text = format!(
        "{AGENT}\n[model]\nname = \"openai:gpt-test\"\nbase_url = \"{}\"\napi_key_env = \"TEAM_OPENAI_KEY\"\n",
        file_server.url("/v1")
    );
    let out = tinyagents(
        &["run", "-", "-q", "--model", "anthropic:claude-test"],
        &[
            ("TEAM_OPENAI_KEY", "sk-team-openai-secret"),
            ("ANTHROPIC_API_KEY", "sk-ant-real"),
            ("ANTHROPIC_BASE_URL", &anthropic.base),
        ],
        Some(&text),
    )
    .await;
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(
        file_server.requests().is_empty(),
        "the file's base URL was used for another provider"
    );
    let request = anthropic.only_request();
    assert_eq!(request.header("x-api-key"), Some("sk-ant-real"));
    assert!(stderr(&out).contains("are not used"), "{}", stderr(&out));
}

/// `check` reports a `[model]` name it cannot use, with its place and a
/// did-you-mean, and a base URL that is not one: `run` never gets to find
/// out without a place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_refuses_a_model_name_or_url_it_cannot_use() {
    let bad = "[model]\nname = \"opnai:gpt-4o\"\nbase_url = \"localhost:8080\"\n";
    let out = tinyagents(&["check", "-"], &[], Some(bad)).await;
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("<stdin>:2:8: `model.name`"), "{err}");
    assert!(err.contains("unknown model provider `opnai`"), "{err}");
    assert!(err.contains("did you mean `openai`?"), "{err}");
    assert!(err.contains("`model.base_url`"), "{err}");
    let out = tinyagents(&["check", "-"], &[], Some("[model]\nname = \"gpt-4o\"\n")).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("has no provider"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_model_sections_and_specs_are_located_errors() {
    let bad = "[model]\nnmae = \"openai:x\"\nstreaming = \"yes\"\n";
    let out = tinyagents(&["check", "-"], &[], Some(bad)).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("<stdin>:2:8: `model.nmae`"), "{err}");
    assert!(err.contains("did you mean `name`?"), "{err}");
    assert!(
        err.contains("`model.streaming` = \"yes\": must be `true` or `false`"),
        "{err}"
    );
    assert!(err.contains("`model.name`: required key is missing"), "{err}");

    let path = file("spec.toml", AGENT);
    let out = tinyagents(&["run", &path, "--model", "opena:gpt"], &[], None).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("unknown model provider `opena`"),
        "{}",
        stderr(&out)
    );

    let out = tinyagents(&["run", &path], &[], None).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("error: no model and no scripted replies: add `[model]`"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clap_suggests_the_subcommand_or_option_meant() {
    let out = tinyagents(&["chek", "x.toml"], &[], None).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("a similar subcommand exists: 'check'"),
        "{}",
        stderr(&out)
    );
    let out = tinyagents(&["run", "x.toml", "--jsno"], &[], None).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--json"), "{}", stderr(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_level_follows_rust_log_and_the_flags() {
    let script = "[agent]\nprompt = \"hi\"\n\n[[middleware]]\ntype = \"logging\"\nlevel = \"debug\"\n\n[[script]]\ntext = \"hello\"\n";
    let path = file("log.toml", script);
    let quiet = tinyagents(&["run", &path], &[], None).await;
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert!(!stderr(&quiet).contains("DEBUG"), "warn by default: {}", stderr(&quiet));

    let debug = tinyagents(&["run", &path, "-vv"], &[], None).await;
    assert!(debug.status.success());
    assert!(
        stderr(&debug).contains("DEBUG tinyagents::logging"),
        "{}",
        stderr(&debug)
    );

    let env = tinyagents(&["run", &path], &[("RUST_LOG", "tinyagents::logging=debug")], None).await;
    assert!(env.status.success());
    assert!(stderr(&env).contains("DEBUG tinyagents::logging"), "{}", stderr(&env));

    let json = tinyagents(&["run", &path, "--json", "-vv"], &[], None).await;
    assert!(json.status.success());
    // The log goes to stderr: stdout stays JSON lines only.
    assert_eq!(json_lines(&json).last().unwrap()["final"], "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_ends_the_json_lines_with_failed_and_the_status() {
    let server = Server::start(vec![Reply::status(
        400,
        &[],
        r#"{"error":{"message":"bad request","type":"invalid_request_error"}}"#,
    )])
    .await;
    let path = file("fail.toml", AGENT);
    let out = tinyagents(
        &["run", &path, "--model", "openai:gpt-test", "--json"],
        &[("OPENAI_API_KEY", "sk-test"), ("OPENAI_BASE_URL", &server.url("/v1"))],
        None,
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "failed", "{lines:?}");
    assert_eq!(last["error"], "model");
    assert_eq!(last["status"], 400);
    assert!(last["message"].as_str().unwrap().contains("HTTP 400"), "{last}");
    assert!(lines
        .iter()
        .any(|l| l["type"] == "run_completed" && l["error"] == "model"));
}

/// The API key of the secret tests, and the base URL's password and query key.
const SECRET_KEY: &str = "sk-cli-Zq7Wd93kLmNpRt5Vx8Yb2Cf4Gh6Jk";
const SECRET_PASSWORD: &str = "pw-cli-Jh5Kl8Mn2Qr4St7Uv";
const SECRET_QUERY_KEY: &str = "qk-cli-Ab3Cd6Ef9Gh2Ij5Kl8Mn";

/// Fails when any secret, or any 16 bytes in a row of one, shows in `text`.
fn assert_no_secret(what: &str, text: &str) {
    for secret in [SECRET_KEY, SECRET_PASSWORD, SECRET_QUERY_KEY] {
        for piece in secret.as_bytes().windows(16) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(!text.contains(piece), "{what} shows `{piece}` of a secret:\n{text}");
        }
    }
}

/// `tinyagents run --json -vv` on a model whose server fails in each way,
/// quoting the key and the URL back: neither the `--json` lines nor the
/// log and messages on stderr show a secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_prints_no_secret_in_json_or_the_log() {
    let echo = format!("key {SECRET_KEY}, password {SECRET_PASSWORD}, query {SECRET_QUERY_KEY}");
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        addr
    };
    for (provider, key_var, url_var) in [
        ("openai:gpt-test", "OPENAI_API_KEY", "OPENAI_BASE_URL"),
        ("anthropic:claude-test", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    ] {
        let auth = json!({"type": "error", "error": {
            "type": "authentication_error", "message": format!("Incorrect API key provided: {echo}"),
        }});
        let stream_error = if provider.starts_with("openai") {
            openai_sse(&[json!({"error": {"message": echo.clone(), "type": "server_error"}})])
        } else {
            format!(
                "event: error\ndata: {}\n\n",
                json!({"type": "error", "error": {"type": "api_error", "message": echo.clone()}})
            )
        };
        let modes: [(&str, Option<Reply>); 4] = [
            (
                "HTTP 401",
                Some(Reply::status(401, &[("x-request-id", SECRET_KEY)], &auth.to_string())),
            ),
            ("HTTP 500", Some(Reply::status(500, &[], &echo))),
            ("stream error event", Some(Reply::sse(&stream_error, 11))),
            ("connect refused", None),
        ];
        for (mode, reply) in modes {
            let server = match reply {
                Some(reply) => Some(Server::start(vec![reply]).await),
                None => None,
            };
            let host = server
                .as_ref()
                .map_or(closed.clone(), |s| s.base.trim_start_matches("http://").to_owned());
            let base = format!("http://user:{SECRET_PASSWORD}@{host}/v1?api-key={SECRET_QUERY_KEY}");
            let path = file("secrets.toml", AGENT);
            let out = tinyagents(
                &["run", &path, "--model", provider, "--json", "-vv"],
                &[(key_var, SECRET_KEY), (url_var, &base)],
                None,
            )
            .await;
            let what = format!("{provider} {mode}");
            assert_eq!(out.status.code(), Some(1), "{what}: {}{}", stdout(&out), stderr(&out));
            assert_no_secret(&format!("{what}: --json"), &stdout(&out));
            assert_no_secret(&format!("{what}: stderr"), &stderr(&out));
            let lines = json_lines(&out);
            let last = lines.last().expect("a last line");
            assert_eq!(last["type"], "failed", "{what}: {last}");
            if let Some(server) = &server {
                let message = last["message"].as_str().unwrap();
                assert!(message.contains("***"), "{what}: the echo is masked: {message}");
                let request = &server.requests()[0];
                assert!(
                    request.path.contains(SECRET_QUERY_KEY),
                    "{what}: the query key still goes out"
                );
            }
        }
    }
}

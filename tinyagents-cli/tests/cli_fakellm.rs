//! `tinyagents run --model provider:model` against fakellm, a mock
//! OpenAI/Anthropic server from PyPI that nobody here wrote (`.ci/run` starts
//! it and sets `FAKELLM_URL`; see tests/tests/it/providers/fakellm.rs): the
//! command a new user types, against an OpenAI-compatible server, in both
//! wire formats, with the events as JSON lines.
#![cfg(feature = "fakellm")]

use std::process::Command;

use serde_json::Value;

fn server() -> String {
    std::env::var("FAKELLM_URL").expect("FAKELLM_URL is not set: start fakellm (see .ci/run)")
}

fn file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("tinyagents-cli-fakellm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn run_with_a_model_flag_talks_to_an_openai_compatible_and_an_anthropic_server() {
    let path = file("agent.toml", "[agent]\nprompt = \"Say hello.\"\n");
    for (model, base_var, key_var, base) in [
        (
            "openai:fake-gpt",
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            format!("{}/v1", server()),
        ),
        (
            "anthropic:fake-claude",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            server(),
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tinyagents"))
            .args(["run", &path, "--model", model, "--json"])
            .env_remove("RUST_LOG")
            .env(base_var, &base)
            .env(key_var, "sk-fake")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{model}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let started = lines
            .iter()
            .find(|l| l["type"] == "model_call_started")
            .expect("a model call");
        assert_eq!(started["model"], model);
        let last = lines.last().unwrap();
        assert_eq!(last["type"], "finished", "{model}");
        assert_eq!(last["stop"], "finished");
        let text = last["final"].as_str().unwrap();
        assert!(text.contains("mock response for fake-"), "{model}: {text}");
    }
}

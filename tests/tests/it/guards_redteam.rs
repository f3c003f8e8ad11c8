//! Red-team pass (fresh areas): provider redirects, hook answers and hook
//! inheritance. Each test asserts the fail-closed outcome.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tinyagents::external_hooks::{ExternalHooksMiddleware, HookCommand, HookEvent};
use tinyagents::harness::tool::SandboxMode;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-rt-fresh-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(dir).unwrap()
}

/// A parent's `permission_request` policy hook refuses `delete` (exit 2).
/// It is a policy event (fails closed by default, `HookEvent::is_policy`),
/// yet, unlike a `pre_tool_use` hook, it records no restriction: a sub-agent
/// with an empty stack runs `delete` unasked.
#[tokio::test]
async fn a_parent_s_permission_request_hook_holds_in_a_sub_agent_run() {
    let dir = temp_dir("perm-inherit");
    let hooks = ExternalHooksMiddleware::new([HookCommand::new(
        HookEvent::PermissionRequest,
        "cat > /dev/null; echo 'delete is not allowed here' >&2; exit 2",
    )
    .with_matcher("^delete$")
    .unwrap()
    .with_sandbox(SandboxMode::Off)
    .with_timeout(Duration::from_secs(20))])
    .in_dir(&dir);

    let delete = RecordingTool::new("delete").returning("deleted");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        // the parent's own call is refused by its hook
        ScriptedTurn::tool_calls(vec![ToolCall::new("p1", "delete", json!({"path": "a.txt"}))]),
        // so it asks a sub-agent to do it
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "delete a.txt"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(hooks).unwrap());

    let mut ctx = RunContext::new(RunConfig::new("p"), ());
    let run = parent.run(&mut ctx, &(), "tidy").await.unwrap();
    assert!(
        run.messages
            .iter()
            .any(|m| m.text().contains("delete is not allowed here")),
        "the parent's hook refused the parent's own call"
    );
    assert!(
        delete.calls().is_empty(),
        "the parent's permission_request hook must refuse `delete` in its sub-agent too; it ran: {:?}",
        delete.calls()
    );
}

/// A `pre_tool_use` hook answering `{"continue": false}` ("stop the run")
/// about a call: the call still runs, and the run stops only after its side
/// effect. A policy hook that says "stop" must not let the call it was asked
/// about through.
#[tokio::test]
async fn a_pre_tool_use_stop_answer_does_not_let_the_call_run() {
    let dir = temp_dir("pre-stop");
    let hooks = ExternalHooksMiddleware::new([HookCommand::new(
        HookEvent::PreToolUse,
        r#"cat > /dev/null; echo '{"continue": false, "stop_reason": "Stopped by policy."}'"#,
    )
    .with_sandbox(SandboxMode::Off)
    .with_timeout(Duration::from_secs(20))])
    .in_dir(&dir);
    let tool = RecordingTool::new("delete").returning("deleted");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(hooks).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "tidy").await.unwrap();
    assert_eq!(run.final_text(), "Stopped by policy.");
    assert!(
        tool.calls().is_empty(),
        "the hook said stop before the call; it ran anyway: {:?}",
        tool.calls()
    );
}

#[cfg(feature = "providers")]
mod providers {
    use crate::provider_support::*;
    use tinyagents::harness::model::providers::ProviderConfig;
    use tinyagents::harness::model::ModelRequest;
    use tinyagents::prelude::*;

    async fn drain(config: ProviderConfig) -> Result<()> {
        use futures::StreamExt;
        let model = config.build().unwrap();
        let request = ModelRequest::new(vec![Message::user("the secret plan")]);
        let mut stream = model.stream(&request).await?;
        while let Some(item) = stream.next().await {
            item?;
        }
        Ok(())
    }

    /// Anthropic authenticates with `x-api-key`. A provider (or anything on
    /// the path that can answer) replying `307 Location: <other host>` gets
    /// the key and the whole conversation re-posted there: reqwest's default
    /// redirect policy strips only `Authorization`/`Cookie` across hosts.
    #[tokio::test]
    async fn anthropic_key_and_conversation_do_not_follow_a_redirect_to_another_host() {
        let other = Server::start(vec![Reply::sse(&an_text_reply("hi", 1, 1), 64)]).await;
        let target = other.url("/v1/messages");
        let first = Server::start(vec![Reply::status(307, &[("location", target.as_str())], "")]).await;
        let config = ProviderConfig::parse("anthropic:claude-test")
            .unwrap()
            .with_base_url(first.url(""))
            .with_api_key("sk-ant-SECRET");
        let _ = drain(config).await;
        let leaked: Vec<_> = other
            .requests()
            .iter()
            .filter_map(|r| r.header("x-api-key").map(str::to_owned))
            .collect();
        assert!(leaked.is_empty(), "the API key reached another host: {leaked:?}");
        assert!(
            other.requests().is_empty(),
            "the conversation was re-posted to another host: {:?}",
            other.requests().iter().map(|r| r.body.clone()).collect::<Vec<_>>()
        );
    }

    /// A non-streamed reply with invalid UTF-8 in the model's text is a
    /// malformed reply, as it is in a stream: never repaired into
    /// replacement characters the model did not send.
    #[tokio::test]
    async fn invalid_utf8_in_a_whole_reply_is_refused_not_repaired() {
        use tinyagents::harness::model::providers::{AnthropicModel, OpenAiModel};
        let mut openai_body =
            br#"{"id":"c","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"caf"#
                .to_vec();
        openai_body.extend_from_slice(b"\xff\xfe");
        openai_body.extend_from_slice(br#""}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#);
        let server = Server::start(vec![Reply::bytes(200, &openai_body)]).await;
        let config = ProviderConfig::parse("openai-compatible:m")
            .unwrap()
            .with_base_url(server.url("/v1"))
            .with_streaming(false);
        let err = OpenAiModel::new(config)
            .unwrap()
            .complete(&ModelRequest::new(vec![Message::user("Hi")]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("invalid UTF-8"), "{err}");
        let mut anthropic_body =
            br#"{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"caf"#
                .to_vec();
        anthropic_body.extend_from_slice(b"\xff");
        anthropic_body
            .extend_from_slice(br#""}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#);
        let server = Server::start(vec![Reply::bytes(200, &anthropic_body)]).await;
        let config = ProviderConfig::parse("anthropic:claude-test")
            .unwrap()
            .with_base_url(server.url(""))
            .with_api_key("k")
            .with_streaming(false);
        let err = AnthropicModel::new(config)
            .unwrap()
            .complete(&ModelRequest::new(vec![Message::user("Hi")]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("invalid UTF-8"), "{err}");
    }

    /// The same with an OpenAI-compatible server authenticated by a
    /// configured header (`api-key`, as Azure OpenAI uses).
    #[tokio::test]
    async fn a_configured_auth_header_does_not_follow_a_redirect_to_another_host() {
        let other = Server::start(vec![Reply::sse(&oa_text_reply("hi", 1, 1), 64)]).await;
        let target = other.url("/v1/chat/completions");
        let first = Server::start(vec![Reply::status(308, &[("location", target.as_str())], "")]).await;
        let config = ProviderConfig::parse("openai-compatible:m")
            .unwrap()
            .with_base_url(first.url("/v1"))
            .with_header("api-key", "azure-SECRET");
        let _ = drain(config).await;
        let leaked: Vec<_> = other
            .requests()
            .iter()
            .filter_map(|r| r.header("api-key").map(str::to_owned))
            .collect();
        assert!(
            leaked.is_empty(),
            "the configured auth header reached another host: {leaked:?}"
        );
    }
}

/// `StoreUrl` promises "Displaying a URL hides its password". libpq URLs
/// (which the postgres store accepts: "any libpq URL") may carry the
/// password as a query parameter, and a raw `/` or `#` in a userinfo
/// password ends the authority early in `redact`: both are shown in full,
/// in `check`'s output, in every store error and in config errors.
#[test]
fn a_store_url_never_shows_its_password() {
    use tinyagents::store::StoreUrl;
    let leaks: Vec<String> = [
        "postgres://db.internal/app?user=agent&password=hunter2",
        "postgresql://agent:hun/ter2@db.internal/app",
        "postgres://agent:hunter2#x@db.internal/app",
    ]
    .into_iter()
    .map(|url| match StoreUrl::parse(url) {
        Ok(parsed) => parsed.to_string(),
        Err(message) => message,
    })
    .filter(|shown| shown.contains("hunter2") || shown.contains("hun/ter2"))
    .collect();
    assert!(leaks.is_empty(), "the password shows: {leaks:#?}");
    // what is not secret stays readable: the user, the host, the database, other parameters
    // (shown by `Display`, or in the error of a build without the `postgres` feature)
    let url = "postgres://agent:pw@db.internal:5432/app?sslmode=require&password=pw";
    let shown = match StoreUrl::parse(url) {
        Ok(parsed) => parsed.to_string(),
        Err(message) => message,
    };
    assert!(
        shown.contains("postgres://agent:***@db.internal:5432/app?sslmode=require&password=***"),
        "{shown}"
    );
}

mod checkpoints {
    use futures::FutureExt;
    use serde_json::{json, Value};
    use tinyagents::graph::{
        node_fn, update, Checkpoint, Checkpointer, Command, FileCheckpointer, GraphState, InterruptRecord, StateGraph,
        END,
    };

    fn graph() -> tinyagents::graph::CompiledGraph<()> {
        StateGraph::<()>::new()
            .node(
                "inc",
                node_fn(|_| async { Ok(Command::Update(update([("n", json!(1))]))) }),
            )
            .entry("inc")
            .edge("inc", END)
            .compile()
            .unwrap()
    }

    fn cp(seq: u64, interrupt: Option<InterruptRecord>) -> Checkpoint {
        Checkpoint {
            thread_id: "t".into(),
            seq,
            steps: 0,
            next: Some("inc".into()),
            state: GraphState::new(),
            interrupt,
            updates: vec![],
        }
    }

    /// A stored checkpoint whose sequence number is `u64::MAX` (a damaged or
    /// hostile store; the file store accepts and reads it, its name is 20
    /// digits): resuming the thread panics with an arithmetic overflow
    /// (`d.seq += 1` in `CompiledGraph::save`) instead of refusing it.
    /// (In a release build it wraps to 0 and the file store writes
    /// checkpoint 0 while `latest` keeps returning the old one.)
    #[tokio::test]
    async fn a_checkpoint_at_the_last_sequence_number_is_refused_not_a_panic() {
        let dir = super::temp_dir("seq-max");
        let store = FileCheckpointer::open(&dir).unwrap();
        // a number past what any store keeps is refused when stored
        let refused = store.put(&cp(u64::MAX, None)).await.unwrap_err();
        assert_eq!(refused.kind(), tinyagents::prelude::ErrorKind::Validation, "{refused}");
        // the last one a store keeps is stored; the thread cannot go past it
        store
            .put(&cp(tinyagents::graph::MAX_CHECKPOINT_SEQ, None))
            .await
            .unwrap();
        let outcome = std::panic::AssertUnwindSafe(graph().resume(&mut (), "t", &store, None))
            .catch_unwind()
            .await;
        match outcome {
            Err(_) => panic!("resuming a thread at checkpoint u64::MAX panicked"),
            Ok(result) => assert!(
                result.is_err(),
                "a resume past the last sequence number must be refused"
            ),
        }
    }

    /// "A field this version does not know is refused, not dropped": the
    /// check only looks at the top-level keys, so an unknown field inside
    /// `interrupt` (or inside `updates[]`) written by a newer release is
    /// silently dropped, and the thread resumes without it.
    #[tokio::test]
    async fn an_unknown_nested_field_of_a_checkpoint_is_refused_not_dropped() {
        let dir = super::temp_dir("nested-field");
        let store = FileCheckpointer::open(&dir).unwrap();
        let interrupt = InterruptRecord {
            node: "inc".into(),
            message: "approve?".into(),
        };
        store.put(&cp(1, Some(interrupt))).await.unwrap();
        let path = store.thread_dir("t").join(format!("{:020}.ckpt", 1));
        let bytes = std::fs::read(&path).unwrap();
        let nl = bytes.iter().position(|&b| b == b'\n').unwrap();
        let mut body: Value = serde_json::from_slice(&bytes[nl + 1..]).unwrap();
        body["interrupt"]["requires"] = json!("two_person_approval");
        let body = serde_json::to_vec(&body).unwrap();
        let sum_path = dir.join("body");
        std::fs::write(&sum_path, &body).unwrap();
        let sum = std::process::Command::new("sha256sum").arg(&sum_path).output().unwrap();
        let sum = String::from_utf8(sum.stdout).unwrap();
        let sum = sum.split_whitespace().next().unwrap();
        let mut file = format!("tinyagents-checkpoint v2 bytes={} sha256={sum}\n", body.len()).into_bytes();
        file.extend_from_slice(&body);
        std::fs::write(&path, file).unwrap();
        let read = store.latest("t").await;
        assert!(
            read.is_err(),
            "a checkpoint with an unknown nested field was read, the field dropped: {:?}",
            read.map(|c| c.map(|c| c.interrupt))
        );
    }
}

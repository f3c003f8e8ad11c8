//! Acceptance tests of a new user's first hour: documented defaults and
//! options of the built-ins (docs/middleware.md) and the providers' documented
//! configuration, checked as written by someone who had not read the code.
//! (What the same pass found broken was in the `tinyagents` command; its
//! tests are in `tinyagents-cli/tests/`.)

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::FinishReason;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::{trace, RecordingTool};
use tokio::time::Instant;

fn ctx_with_sink() -> (RunContext, Arc<CollectingSink>) {
    let sink = Arc::new(CollectingSink::new());
    (RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone()), sink)
}

// ---- model_retry: the documented defaults -----------------------------------

/// docs/middleware.md `model_retry`: `initial_delay_ms` default 1000, `jitter`
/// default 0.25 ("0.25 = ±25%"): with only `max_attempts` set, the one wait
/// lies in 750..=1250 ms.
#[tokio::test(start_paused = true)]
async fn model_retry_defaults_wait_about_one_second() {
    let model = ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::text("ok"),
    ]);
    let retry: ModelRetryMiddleware = from_toml_str::<ModelRetryConfig>("max_attempts = 2").unwrap().build();
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(retry).unwrap());
    let (mut ctx, _) = ctx_with_sink();
    let start = Instant::now();
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(run.final_text(), "ok");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(750) && waited <= Duration::from_millis(1250),
        "waited {waited:?}"
    );
}

// ---- rate_limiter: the documented defaults ----------------------------------

/// docs/middleware.md `rate_limiter`: defaults `rate_per_second = 1.0`,
/// `burst = 1`, `key = "global"` (every model *and tool* call), `mode = "wait"`.
/// A run of model → tool → model takes three tokens: two seconds of waiting.
#[tokio::test(start_paused = true)]
async fn rate_limiter_defaults_share_one_bucket_between_model_and_tool_calls() {
    let model = ScriptedModel::new([ScriptedTurn::tool_call("t", json!({})), ScriptedTurn::text("done")]);
    let limiter: RateLimiterMiddleware = from_toml_str::<RateLimiterConfig>("").unwrap().build();
    let tools = ToolRegistry::new().with(RecordingTool::new("t")).unwrap();
    let agent: Agent<()> = Agent::new(model)
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(limiter).unwrap());
    let (mut ctx, _) = ctx_with_sink();
    let start = Instant::now();
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(start.elapsed(), Duration::from_secs(2));
}

// ---- agent_mode: config keys ------------------------------------------------

/// docs/middleware.md `agent_mode`: `default = "plan"` starts in plan mode, the
/// `reminder` key is the plan reminder (a volatile segment `agent_mode`), and
/// `read_only_tools` stay visible while the rest are hidden.
#[tokio::test]
async fn agent_mode_from_config_starts_in_plan_with_its_reminder() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let mode: AgentModeMiddleware = from_toml_str::<AgentModeConfig>(
        "default = \"plan\"\nreminder = \"PLAN ONLY\"\nread_only_tools = [\"read_file\"]",
    )
    .unwrap()
    .build();
    let tools = ToolRegistry::new()
        .with(RecordingTool::new("read_file"))
        .unwrap()
        .with(RecordingTool::new("write_file"))
        .unwrap();
    let agent: Agent<()> = Agent::from_shared(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(mode).unwrap());
    let (mut ctx, _) = ctx_with_sink();
    agent.run(&mut ctx, &(), "hi").await.unwrap();
    let sent = model.requests().remove(0);
    let names: Vec<&str> = sent.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["read_file"]);
    assert!(sent.system_prompt().contains("PLAN ONLY"), "{}", sent.system_prompt());
}

// ---- parallel_edit_guard: `multiedit_tool` ----------------------------------

/// docs/middleware.md `parallel_edit_guard`: `multiedit_tool` "The tool the
/// guidance recommends for several edits to one file" (default `multiedit`).
#[tokio::test]
async fn parallel_edit_guard_names_the_configured_multiedit_tool() {
    use tinyagents::harness::tool::{FileAccess, ToolContext, ToolOutput};
    struct Edit(ToolSchema);
    #[async_trait::async_trait]
    impl Tool for Edit {
        fn schema(&self) -> &ToolSchema {
            &self.0
        }
        fn file_access(&self, arguments: &serde_json::Value) -> Vec<FileAccess> {
            crate::support::writes_path(arguments)
        }
        async fn call(&self, _cx: ToolContext, _arguments: serde_json::Value) -> Result<ToolOutput> {
            Ok("edited".into())
        }
    }
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("c1", "edit", json!({"path": "a.rs"})),
            ToolCall::new("c2", "edit", json!({"path": "a.rs"})),
        ]),
        ScriptedTurn::text("done"),
    ]));
    let guard: ParallelEditGuardMiddleware =
        from_toml_str::<ParallelEditGuardConfig>("multiedit_tool = \"apply_patch\"")
            .unwrap()
            .build();
    let tools = ToolRegistry::new()
        .with(Edit(ToolSchema::new("edit", "Edits a file.")))
        .unwrap();
    let agent: Agent<()> = Agent::from_shared(model.clone())
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(guard).unwrap());
    let (mut ctx, _) = ctx_with_sink();
    agent.run(&mut ctx, &(), "hi").await.unwrap();
    let second = model.requests().remove(1);
    let guidance = second.messages.last().unwrap().text();
    assert!(guidance.contains("apply_patch"), "{guidance}");
}

// ---- pii: config keys -------------------------------------------------------

/// docs/middleware.md `pii`: `types` "The built-in types to detect": with
/// `types = ["email"]` a phone number passes, an email is redacted; with
/// `apply_to_input = false` the request goes out unchanged.
#[tokio::test]
async fn pii_types_and_apply_to_input_from_config() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let pii: PiiMiddleware = from_toml_str::<PiiConfig>("types = [\"email\"]").unwrap().build();
    let agent: Agent<()> = Agent::from_shared(model.clone()).with_stack(MiddlewareStack::new().with(pii).unwrap());
    let (mut ctx, _) = ctx_with_sink();
    agent
        .run(&mut ctx, &(), "mail bob@example.com or call +1 415 555 0100")
        .await
        .unwrap();
    let reqs = model.requests();
    let sent = reqs[0].messages.last().unwrap().text().to_string();
    assert!(!sent.contains("bob@example.com"), "{sent}");
    assert!(sent.contains("+1 415 555 0100"), "{sent}");

    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let pii: PiiMiddleware = from_toml_str::<PiiConfig>("apply_to_input = false").unwrap().build();
    let agent: Agent<()> = Agent::from_shared(model.clone()).with_stack(MiddlewareStack::new().with(pii).unwrap());
    let (mut ctx, _) = ctx_with_sink();
    agent.run(&mut ctx, &(), "mail bob@example.com").await.unwrap();
    let reqs = model.requests();
    let sent = reqs[0].messages.last().unwrap().text().to_string();
    assert_eq!(sent, "mail bob@example.com");
}

// ---- structured_output: `instruct = false` from config ----------------------

/// docs/middleware.md `structured_output`: `instruct` (default true) "Put the
/// schema in the system prompt (a stable segment...)": `instruct = false`
/// leaves the system prompt without it, `response_format` still set.
#[tokio::test]
async fn structured_output_instruct_false_from_config() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("{\"a\": 1}")]));
    let so: StructuredOutputMiddleware = from_toml_str::<StructuredOutputConfig>(
        "schema = '{\"type\":\"object\",\"required\":[\"a\"]}'\ninstruct = false",
    )
    .unwrap()
    .build();
    let agent: Agent<()> = Agent::from_shared(model.clone()).with_stack(MiddlewareStack::new().with(so).unwrap());
    let (mut ctx, _) = ctx_with_sink();
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(run.structured_output, Some(json!({"a": 1})));
    let sent = model.requests().remove(0);
    assert!(!sent.system_prompt().contains("required"), "{}", sent.system_prompt());
    assert!(sent.response_format.is_some());
}

// ---- delta_compression: `max_interval_ms = 0` -------------------------------

/// docs/middleware.md `delta_compression`: `max_interval_ms` "0: no time
/// limit": text is forwarded only once `min_chars` are buffered, however
/// long the gaps between deltas.
#[tokio::test(start_paused = true)]
async fn delta_compression_zero_interval_means_no_time_limit() {
    let deltas: Vec<ModelDelta> = ["ab", "cd", "ef"].into_iter().map(ModelDelta::text).collect();
    let mut all = deltas.clone();
    all.push(ModelDelta::finish(FinishReason::Stop));
    let model = ScriptedModel::new([ScriptedTurn::Deltas(all)]);
    let dc: DeltaCompressionMiddleware =
        from_toml_str::<DeltaCompressionConfig>("min_chars = 100\nmax_interval_ms = 0")
            .unwrap()
            .build();
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(dc).unwrap());
    let (mut ctx, sink) = ctx_with_sink();
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(run.final_text(), "abcdef");
    let text_deltas: Vec<String> = trace(&sink.events())
        .into_iter()
        .filter(|l| l.starts_with("delta "))
        .collect();
    assert_eq!(text_deltas, ["delta \"abcdef\""]);
}

// ---- providers: headers and the idle timeout, as documented ------------------

#[cfg(feature = "providers")]
mod providers {
    use std::time::Duration;

    use crate::providers::support::*;
    use tinyagents::harness::model::providers::ProviderConfig;
    use tinyagents::prelude::*;

    /// Runs an agent on `model` once, input "Hi".
    async fn run(model: std::sync::Arc<dyn ChatModel>) -> Result<AgentRun> {
        Agent::<()>::from_shared(model)
            .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "Hi")
            .await
    }

    /// The one request a run on `config` sent to `server`.
    async fn sent(config: ProviderConfig, server: &Server) -> Recorded {
        run(config.build().unwrap()).await.unwrap();
        server.only_request()
    }

    /// `ProviderConfig::with_header`: "sending one more HTTP header on every
    /// call (`OpenAI-Organization`, `anthropic-beta`, a gateway's routing header)".
    #[tokio::test]
    async fn a_configured_header_goes_out_on_openai_and_anthropic_calls() {
        let server = Server::start(vec![Reply::sse(&oa_text_reply("ok", 1, 1), 64)]).await;
        let request = sent(openai(&server).with_header("OpenAI-Organization", "org-42"), &server).await;
        assert_eq!(request.header("openai-organization"), Some("org-42"));
        assert_eq!(request.header("authorization"), Some("Bearer sk-test"));

        let server = Server::start(vec![Reply::sse(&an_text_reply("ok", 1, 1), 64)]).await;
        let beta = anthropic(&server).with_header("anthropic-beta", "prompt-caching-2024-07-31");
        let request = sent(beta, &server).await;
        assert_eq!(request.header("anthropic-beta"), Some("prompt-caching-2024-07-31"));
        assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
    }

    /// `ProviderConfig::with_idle_timeout`: "how long to wait for the next
    /// bytes of a reply": a stream that stops mid-way fails with a `Timeout`
    /// naming that limit (real clock: the server is real I/O).
    #[tokio::test]
    async fn a_stalled_stream_fails_after_the_idle_timeout() {
        let body = oa_text_reply("Hello there", 1, 1);
        let first_event = body.split("\n\n").next().unwrap().to_owned() + "\n\n";
        let server = Server::start(vec![Reply::SseHold(vec![first_event.into_bytes()])]).await;
        let model = openai(&server)
            .with_idle_timeout(Duration::from_millis(300))
            .build()
            .unwrap();
        let err = run(model).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        assert!(err.is_retryable(), "{err}");
    }
}

//! Every Rust example of QueryMT's middleware page, with only its crate path
//! changed (`querymt_agent` → `tinyagents::compat::querymt`). Each is a
//! module of its own; where the page shows a fragment (no `use` lines, or
//! `// ...` for a helper's body), the module adds the page's imports and
//! the smallest helper, marked. The tests check what the page's text says
//! each example does.

#![allow(dead_code, unused_imports, unused_variables)]

use std::sync::{Arc, Mutex};

use serde_json::json;
use tinyagents::compat::querymt::DriverMiddleware;
use tinyagents::harness::error::ErrorKind;
use tinyagents::prelude::{Role, ScriptedTurn, ToolCall as NativeCall};
use tinyagents::testing::{RecordingTool, Scenario};

/// "Middleware Driver Trait": the trait as the page writes it, implemented
/// with exactly its signatures (and `on_prepared_tool_calls`).
mod driver_trait {
    use tinyagents::compat::querymt::middleware::state::{Request, Response, ToolCall, ToolResult};
    use tinyagents::compat::querymt::middleware::{MiddlewareDriver, PreparedBatch, PreparedCallVerdict, Result};

    pub struct Every;

    impl MiddlewareDriver for Every {
        fn name(&self) -> &str {
            "every"
        }
        fn process_request(&self, request: &mut Request) -> Result<()> {
            let _ = request;
            Ok(())
        }
        fn process_response(&self, response: &mut Response) -> Result<()> {
            let _ = response;
            Ok(())
        }
        fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
            let _ = tool_call;
            Ok(())
        }
        fn process_tool_result(&self, result: &mut ToolResult) -> Result<()> {
            let _ = result;
            Ok(())
        }
        fn on_prepared_tool_calls(&self, batch: &PreparedBatch) -> Result<Vec<PreparedCallVerdict>> {
            Ok(batch.calls().iter().map(|_| PreparedCallVerdict::Proceed).collect())
        }
    }
}

/// "Basic Middleware", verbatim.
mod basic {
    use std::sync::Arc;
    use tinyagents::compat::querymt::middleware::state::{ExecutionState, ToolCall, ToolResult};
    use tinyagents::compat::querymt::middleware::{MiddlewareDriver, MiddlewareError, Result};
    // (the page uses `Request` and `Response` without importing them)
    use tinyagents::compat::querymt::middleware::state::{Request, Response};

    pub struct LoggingMiddleware {
        name: String,
    }

    impl LoggingMiddleware {
        pub fn new() -> Self {
            Self {
                name: "logging".to_string(),
            }
        }
    }

    impl MiddlewareDriver for LoggingMiddleware {
        fn name(&self) -> &str {
            &self.name
        }

        fn process_request(&self, request: &mut Request) -> Result<()> {
            log::info!("Request: {:?}", request);
            Ok(())
        }

        fn process_response(&self, response: &mut Response) -> Result<()> {
            log::info!("Response: {:?}", response);
            Ok(())
        }

        fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
            log::info!(
                "Tool call: {}({})",
                tool_call.function.name,
                tool_call.function.arguments
            );
            Ok(())
        }

        fn process_tool_result(&self, result: &mut ToolResult) -> Result<()> {
            log::info!("Tool result: {} -> {} bytes", result.tool_name, result.result.len());
            Ok(())
        }
    }
}

/// "Middleware with State", verbatim (the page's imports above it).
mod with_state {
    use tinyagents::compat::querymt::prelude::*;

    use std::sync::{Arc, Mutex};

    pub struct RateLimitMiddleware {
        name: String,
        requests: Arc<Mutex<Vec<u64>>>,
        max_per_second: usize,
    }

    impl RateLimitMiddleware {
        pub fn new(max_per_second: usize) -> Self {
            Self {
                name: "rate_limit".to_string(),
                requests: Arc::new(Mutex::new(Vec::new())),
                max_per_second,
            }
        }

        fn cleanup_old_requests(&self) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();

            let mut requests = self.requests.lock().unwrap();
            requests.retain(|&t| now - t < 1);
        }
    }

    impl MiddlewareDriver for RateLimitMiddleware {
        fn name(&self) -> &str {
            &self.name
        }

        fn process_request(&self, request: &mut Request) -> Result<()> {
            self.cleanup_old_requests();

            let mut requests = self.requests.lock().unwrap();
            if requests.len() >= self.max_per_second {
                return Err(MiddlewareError::rate_limit_exceeded(self.name().to_string()));
            }
            requests.push(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs(),
            );

            Ok(())
        }

        // Other methods...
    }
}

/// "Middleware with Configuration", verbatim (the page's imports above it).
pub mod with_configuration {
    use tinyagents::compat::querymt::prelude::*;

    use serde::{Deserialize, Serialize};
    use serde_json::Value;

    #[derive(Debug, Clone, Deserialize)]
    pub struct MyMiddlewareConfig {
        pub enabled: bool,
        pub option1: String,
        pub option2: Option<usize>,
    }

    pub struct MyMiddleware {
        config: MyMiddlewareConfig,
    }

    impl MyMiddleware {
        pub fn new(config: MyMiddlewareConfig) -> Self {
            Self { config }
        }
    }

    impl MiddlewareDriver for MyMiddleware {
        fn name(&self) -> &str {
            "my_middleware"
        }

        fn process_request(&self, request: &mut Request) -> Result<()> {
            if !self.config.enabled {
                return Ok(());
            }

            // Custom logic here
            Ok(())
        }

        // Other methods...
    }
}

/// "Middleware Factory Pattern", verbatim; the registration lines run in
/// [`register_factory`] (the page writes them at the top level).
mod factory {
    use super::with_configuration::{MyMiddleware, MyMiddlewareConfig};

    use serde_json::Value;
    use std::sync::Arc;
    use tinyagents::compat::querymt::agent::agent_config::AgentConfig;
    use tinyagents::compat::querymt::middleware::{MiddlewareDriver, MiddlewareFactory, Result};

    pub struct MyMiddlewareFactory;

    impl MiddlewareFactory for MyMiddlewareFactory {
        fn type_name(&self) -> &'static str {
            "my_middleware"
        }

        fn create(&self, config: &Value, _agent_config: &AgentConfig) -> Result<Arc<dyn MiddlewareDriver>> {
            let config: MyMiddlewareConfig =
                serde_json::from_value(config.clone()).map_err(|e| anyhow::anyhow!("Invalid config: {}", e))?;

            Ok(Arc::new(MyMiddleware::new(config)))
        }
    }

    pub fn register_factory() {
        // Register the factory
        use tinyagents::compat::querymt::middleware::MIDDLEWARE_REGISTRY;
        MIDDLEWARE_REGISTRY.register(Arc::new(MyMiddlewareFactory));
    }
}

/// "Request Validation", verbatim; `// ...` filled with a list of tools
/// needing permission and the user's (scripted) answer.
mod request_validation {
    use tinyagents::compat::querymt::prelude::*;

    pub struct PermissionMiddleware {
        // ...
        pub protected: Vec<String>,
        pub answer: bool,
    }

    impl PermissionMiddleware {
        fn requires_permission(&self, tool: &str) -> bool {
            self.protected.iter().any(|p| p == tool)
        }
        fn request_permission(&self) -> Result<bool> {
            Ok(self.answer)
        }
    }

    impl MiddlewareDriver for PermissionMiddleware {
        fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
            if self.requires_permission(&tool_call.function.name) {
                // Request permission from user
                let granted = self.request_permission()?;
                if !granted {
                    return Err(MiddlewareError::permission_denied(tool_call.function.name.clone()));
                }
            }
            Ok(())
        }
    }
}

/// "Response Modification", verbatim; `// ...` filled with the secret to remove.
mod response_modification {
    use tinyagents::compat::querymt::prelude::*;

    pub struct SanitizationMiddleware {
        // ...
        pub secret: String,
    }

    impl SanitizationMiddleware {
        fn sanitize(&self, text: &str) -> String {
            text.replace(&self.secret, "[redacted]")
        }
    }

    impl MiddlewareDriver for SanitizationMiddleware {
        fn process_response(&self, response: &mut Response) -> Result<()> {
            // Remove sensitive information
            response.content = self.sanitize(&response.content);
            Ok(())
        }
    }
}

/// "Tool Call Interception", verbatim; `// ...` filled with a log and a
/// safety prefix for shell commands.
mod tool_interception {
    use std::sync::Mutex;

    use tinyagents::compat::querymt::prelude::*;

    pub struct ToolLoggingMiddleware {
        // ...
        pub logged: Mutex<Vec<String>>,
    }

    impl ToolLoggingMiddleware {
        fn log_tool_call(&self, tool_call: &ToolCall) {
            self.logged.lock().unwrap().push(tool_call.function.name.clone());
        }
        fn sanitize_shell_args(&self, arguments: &str) -> String {
            let mut args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
            if let Some(command) = args.get("command").and_then(|c| c.as_str()) {
                args["command"] = format!("set -eu; {command}").into();
            }
            args.to_string()
        }
    }

    impl MiddlewareDriver for ToolLoggingMiddleware {
        fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
            // Log before execution
            self.log_tool_call(tool_call);

            // Modify arguments if needed
            if tool_call.function.name == "shell" {
                // Add safety prefix
                tool_call.function.arguments = self.sanitize_shell_args(&tool_call.function.arguments);
            }

            Ok(())
        }
    }
}

/// "Error Handling": the five kinds, exactly (an exhaustive match).
#[test]
fn the_error_enum_has_the_five_kinds_the_page_lists() {
    use tinyagents::compat::querymt::middleware::MiddlewareError;
    let all = [
        MiddlewareError::InternalError("a".into()),
        MiddlewareError::ValidationError("b".into()),
        MiddlewareError::PermissionDenied("c".into()),
        MiddlewareError::RateLimitExceeded("d".into()),
        MiddlewareError::ConfigError("e".into()),
    ];
    let kinds: Vec<ErrorKind> = all
        .into_iter()
        .map(|e| match e {
            MiddlewareError::InternalError(_)
            | MiddlewareError::ValidationError(_)
            | MiddlewareError::PermissionDenied(_)
            | MiddlewareError::RateLimitExceeded(_)
            | MiddlewareError::ConfigError(_) => e.into_native("x").kind(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ErrorKind::Middleware,
            ErrorKind::Validation,
            ErrorKind::Validation,
            ErrorKind::RateLimited,
            ErrorKind::Config
        ]
    );
}

fn one_call(name: &str, arguments: serde_json::Value) -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_calls(vec![NativeCall::new("c1", name, arguments)]),
        ScriptedTurn::text("done"),
    ]
}

/// The logging example runs in a native stack: every hook bracketed by the
/// native events under its name, and the run unchanged.
#[tokio::test]
async fn the_logging_example_runs_each_hook_with_native_events() {
    let read = RecordingTool::new("read_tool").returning("hello");
    let done = Scenario::new(one_call("read_tool", json!({"path": "a.txt"})))
        .without_defaults()
        .tool(read.clone())
        .middleware(DriverMiddleware::new(basic::LoggingMiddleware::new()))
        .run("read a.txt")
        .await;
    assert_eq!(done.text(), "done");
    assert_eq!(read.calls(), [json!({"path": "a.txt"})]);
    let trace = done.trace();
    for hook in [
        "before_model",
        "after_model",
        "before_tool",
        "on_prepared_tool_calls",
        "after_tool",
    ] {
        assert!(
            trace.contains(&format!("started logging.{hook}")),
            "{hook} in {trace:#?}"
        );
        assert!(
            trace.contains(&format!("completed logging.{hook} ok")),
            "{hook} in {trace:#?}"
        );
    }
}

/// "Rejects requests when limits exceeded": the second model call of a run
/// is refused as a native rate-limit error.
#[tokio::test]
async fn the_rate_limit_example_refuses_the_request_over_its_limit() {
    let done = Scenario::new(one_call("read_tool", json!({})))
        .without_defaults()
        .tool(RecordingTool::new("read_tool"))
        .middleware(DriverMiddleware::new(with_state::RateLimitMiddleware::new(1)))
        .run("go")
        .await;
    let err = done.error().expect("the second request is over the limit");
    assert_eq!(err.kind(), ErrorKind::RateLimited);
    assert!(err.to_string().contains("middleware `rate_limit`"), "{err}");
    assert!(done
        .trace()
        .contains(&"completed rate_limit.before_model error:rate_limited".to_owned()));
}

/// "Via Config File" + the factory: the page's TOML builds the page's
/// middleware through `MIDDLEWARE_REGISTRY`, in a native registry's stack.
#[test]
fn the_factory_builds_the_config_file_entry() {
    use tinyagents::config::MiddlewareRegistry;
    factory::register_factory();
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let toml = "[[middleware]]\ntype = \"my_middleware\"\nenabled = true\noption1 = \"value1\"\noption2 = 42\n";
    let stack = registry.stack_from_toml(toml).unwrap();
    assert!(stack.names().contains(&"my_middleware"), "{:?}", stack.names());

    // a table the config struct cannot read is the entry's located error
    let bad = "[[middleware]]\ntype = \"my_middleware\"\nenabled = true\n";
    let err = registry.stack_from_toml(bad).unwrap_err().to_string();
    assert!(err.contains("middleware[0]"), "{err}");
    assert!(err.contains("Invalid config: missing field `option1`"), "{err}");

    // `enabled = false` leaves it out, as for a built-in
    let off = "[[middleware]]\ntype = \"my_middleware\"\nenabled = false\noption1 = \"v\"\n";
    assert!(!registry
        .stack_from_toml(off)
        .unwrap()
        .names()
        .contains(&"my_middleware"));
}

/// Runs the "Request Validation" example guarding `shell` (the user's
/// `answer` to the permission question) on one `shell` call of `command`;
/// the run and the recording `shell` tool.
async fn permission_example(
    command: &str,
    answer: bool,
    input: &str,
) -> (tinyagents::testing::ScenarioRun, RecordingTool) {
    let shell = RecordingTool::new("shell").returning("ran");
    let done = Scenario::new(one_call("shell", json!({"command": command})))
        .without_defaults()
        .tool(shell.clone())
        .middleware(DriverMiddleware::new(request_validation::PermissionMiddleware {
            protected: vec!["shell".into()],
            answer,
        }))
        .run(input.to_owned())
        .await;
    (done, shell)
}

/// "Request Validation": a denied tool call does not run; the model gets
/// its error result naming the tool, and the run goes on.
#[tokio::test]
async fn the_permission_example_stops_the_denied_call() {
    let (done, shell) = permission_example("rm -rf /", false, "clean up").await;
    assert_eq!(done.text(), "done");
    assert!(shell.calls().is_empty(), "the denied call ran");
    let answer = done
        .run()
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .expect("the call has its one result");
    assert!(answer.text().contains("permission denied: shell"), "{}", answer.text());
    assert!(done
        .trace()
        .contains(&"completed PermissionMiddleware.before_tool error:validation".to_owned()));

    // granted: it runs
    let (done, shell) = permission_example("ls", true, "list").await;
    assert_eq!(done.text(), "done");
    assert_eq!(shell.calls().len(), 1);
}

/// "Response Modification": `response.content` written back is the reply's text.
#[tokio::test]
async fn the_sanitization_example_rewrites_the_reply() {
    let done = Scenario::new([ScriptedTurn::text("the key is sk-123")])
        .without_defaults()
        .middleware(DriverMiddleware::new(response_modification::SanitizationMiddleware {
            secret: "sk-123".into(),
        }))
        .run("key?")
        .await;
    assert_eq!(done.text(), "the key is [redacted]");
}

/// "Tool Call Interception": rewritten arguments are what the tool receives.
#[tokio::test]
async fn the_interception_example_rewrites_shell_arguments() {
    let shell = RecordingTool::new("shell");
    let logging = Arc::new(tool_interception::ToolLoggingMiddleware {
        logged: Mutex::new(Vec::new()),
    });
    let done = Scenario::new(one_call("shell", json!({"command": "ls"})))
        .without_defaults()
        .tool(shell.clone())
        .middleware(DriverMiddleware::shared(logging.clone()))
        .run("list")
        .await;
    assert_eq!(done.text(), "done");
    assert_eq!(shell.calls(), [json!({"command": "set -eu; ls"})]);
    assert_eq!(*logging.logged.lock().unwrap(), ["shell"]);
}

/// The trait as the page writes it runs, every hook passing through.
#[tokio::test]
async fn the_full_trait_passes_everything_through() {
    let tool = RecordingTool::new("read_tool").returning("x");
    let done = Scenario::new(one_call("read_tool", json!({"path": "a"})))
        .without_defaults()
        .tool(tool.clone())
        .middleware(DriverMiddleware::new(driver_trait::Every))
        .run("go")
        .await;
    assert_eq!(done.text(), "done");
    assert_eq!(tool.calls().len(), 1);
}

/// "Programmatically", verbatim, in a fn returning this module's `Result`
/// (the page leaves the enclosing fn out).
mod programmatic {
    use super::basic::LoggingMiddleware;
    use super::with_state::RateLimitMiddleware;

    pub async fn build() -> tinyagents::compat::querymt::Result<tinyagents::single::SingleAgent> {
        use tinyagents::compat::querymt::middleware::MiddlewareDriver;
        use tinyagents::compat::querymt::prelude::*;

        let agent = Agent::single()
            .provider("anthropic", "claude-sonnet-4-5-20250929")
            .cwd(".")
            .tools(["read_tool", "shell"])
            .middleware(LoggingMiddleware::new())
            .middleware(RateLimitMiddleware::new(10))
            .build()
            .await?;
        Ok(agent)
    }

    /// The same agent on the scripted model, to run offline.
    pub async fn build_scripted(
        turns: Vec<tinyagents::prelude::ScriptedTurn>,
    ) -> tinyagents::compat::querymt::Result<tinyagents::single::SingleAgent> {
        use tinyagents::compat::querymt::prelude::*;

        let agent = Agent::single()
            .model(tinyagents::prelude::ScriptedModel::new(turns))
            .cwd(".")
            .tools(["read_tool", "shell"])
            .middleware(LoggingMiddleware::new())
            .middleware(RateLimitMiddleware::new(10))
            .build()
            .await?;
        Ok(agent)
    }
}

/// The page's agent builds with the provider when it is compiled in and its
/// key set; otherwise the error names the call and what is missing.
#[tokio::test]
async fn the_programmatic_example_builds_or_says_what_is_missing() {
    match programmatic::build().await {
        Ok(agent) => {
            assert!(agent.model_id().contains("claude-sonnet-4-5-20250929"));
            assert_eq!(agent.config().provider.as_deref(), Some("anthropic"));
        }
        Err(e) => {
            assert_eq!(e.kind_name(), "ConfigError", "{e}");
            assert!(
                e.message()
                    .contains("Agent::single().provider(\"anthropic\", \"claude-sonnet-4-5-20250929\")"),
                "{e}"
            );
            assert!(
                e.message().contains("ANTHROPIC_API_KEY") || e.message().contains("`providers` feature"),
                "{e}"
            );
        }
    }
}

/// The page's agent, on the scripted model: its tools and both drivers, in order.
#[tokio::test]
async fn the_programmatic_example_runs_on_the_scripted_model() {
    let turns = vec![
        ScriptedTurn::tool_calls(vec![NativeCall::new("c1", "read_tool", json!({"path": "Cargo.toml"}))]),
        ScriptedTurn::text("read it"),
    ];
    let agent = programmatic::build_scripted(turns).await.unwrap();
    assert!(agent.tools().get("read_tool").is_some());
    assert!(agent.tools().get("shell").is_some());
    let names = agent.stack().names();
    let at = |n: &str| {
        names
            .iter()
            .position(|x| *x == n)
            .unwrap_or_else(|| panic!("{n} in {names:?}"))
    };
    assert!(at("logging") < at("rate_limit"));
    let run = agent.prompt("read the manifest").await.unwrap();
    assert_eq!(run.final_text(), "read it");
    let answer = run.messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(answer.text().contains("[package]"), "{}", answer.text());
}

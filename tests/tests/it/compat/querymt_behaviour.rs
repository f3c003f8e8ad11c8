//! What QueryMT's middleware page promises of drivers, in a native stack:
//! the order ("executed in the order it was added", responses in reverse),
//! `CompositeDriver` (with a native middleware in it), one verdict per
//! prepared call, errors that block and surface classified, and fail-closed
//! handling of what a driver gets wrong.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tinyagents::compat::querymt::prelude::*;
use tinyagents::harness::error::ErrorKind;
use tinyagents::prelude::{
    HookSet, Middleware, MiddlewareStack, ModelRequest, ModelResponse, Role, RunContext, ScriptedTurn,
    ToolCall as NativeCall, ToolResult as NativeResult,
};
use tinyagents::testing::{RecordingTool, Scenario};

type Log = Arc<Mutex<Vec<String>>>;

/// Writes `name.hook` into the log for each of its hooks.
struct Recorder {
    name: &'static str,
    log: Log,
}

impl Recorder {
    fn push(&self, what: &str) {
        self.log.lock().unwrap().push(format!("{}.{what}", self.name));
    }
}

impl MiddlewareDriver for Recorder {
    fn name(&self) -> &str {
        self.name
    }
    fn process_request(&self, _request: &mut Request) -> Result<()> {
        self.push("request");
        Ok(())
    }
    fn process_response(&self, _response: &mut Response) -> Result<()> {
        self.push("response");
        Ok(())
    }
    fn process_tool_call(&self, _tool_call: &mut ToolCall) -> Result<()> {
        self.push("tool_call");
        Ok(())
    }
    fn process_tool_result(&self, _result: &mut ToolResult) -> Result<()> {
        self.push("tool_result");
        Ok(())
    }
}

/// The same log, written by a native middleware.
struct NativeRecorder(Log);

#[async_trait]
impl Middleware<()> for NativeRecorder {
    fn name(&self) -> &str {
        "native"
    }
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL | HookSet::AFTER_MODEL | HookSet::BEFORE_TOOL | HookSet::AFTER_TOOL
    }
    async fn before_model(&self, _: &mut RunContext, _: &(), _: &mut ModelRequest) -> tinyagents::Result<()> {
        self.0.lock().unwrap().push("native.request".into());
        Ok(())
    }
    async fn after_model(&self, _: &mut RunContext, _: &(), _: &mut ModelResponse) -> tinyagents::Result<()> {
        self.0.lock().unwrap().push("native.response".into());
        Ok(())
    }
    async fn before_tool(&self, _: &mut RunContext, _: &(), _: &mut NativeCall) -> tinyagents::Result<()> {
        self.0.lock().unwrap().push("native.tool_call".into());
        Ok(())
    }
    async fn after_tool(&self, _: &mut RunContext, _: &(), _: &mut NativeResult) -> tinyagents::Result<()> {
        self.0.lock().unwrap().push("native.tool_result".into());
        Ok(())
    }
}

fn one_call(name: &str) -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_calls(vec![NativeCall::new("c1", name, json!({"path": "a.txt"}))]),
        ScriptedTurn::text("done"),
    ]
}

fn first_turn(log: &Log) -> Vec<String> {
    // the first model call and its tool call: 4 hooks x 3 middleware
    log.lock().unwrap().iter().take(12).cloned().collect()
}

/// "Middleware Execution Order": first added sees requests first and
/// responses last; a native middleware in a `CompositeDriver` keeps its place.
#[tokio::test]
async fn a_composite_runs_in_the_order_added_with_responses_in_reverse() {
    let log: Log = Arc::default();
    let chain = CompositeDriver::new(vec![Arc::new(Recorder {
        name: "m1",
        log: log.clone(),
    })])
    .with_middleware(NativeRecorder(log.clone()))
    .with(Recorder {
        name: "m3",
        log: log.clone(),
    });
    assert_eq!(chain.names(), ["m1", "native", "m3"]);
    let mut stack = MiddlewareStack::empty();
    chain.add_to(&mut stack).unwrap();
    let done = Scenario::new(one_call("read_tool"))
        .without_defaults()
        .tool(RecordingTool::new("read_tool"))
        .stack(stack)
        .run("go")
        .await;
    assert_eq!(done.text(), "done");
    assert_eq!(
        first_turn(&log),
        [
            "m1.request",
            "native.request",
            "m3.request",
            "m3.response",
            "native.response",
            "m1.response",
            "m1.tool_call",
            "native.tool_call",
            "m3.tool_call",
            "m3.tool_result",
            "native.tool_result",
            "m1.tool_result",
        ]
    );
}

/// Called directly (as QueryMT code may), a composite of drivers chains
/// them; one holding a native middleware refuses, naming it.
#[test]
fn a_composite_called_directly_chains_drivers_and_refuses_native_links() {
    let log: Log = Arc::default();
    let chain: CompositeDriver = CompositeDriver::default()
        .with(Recorder {
            name: "a",
            log: log.clone(),
        })
        .with(Recorder {
            name: "b",
            log: log.clone(),
        });
    let mut result = ToolResult {
        call_id: "c".into(),
        tool_name: "t".into(),
        result: String::new(),
        is_error: false,
    };
    chain.process_tool_result(&mut result).unwrap();
    assert_eq!(*log.lock().unwrap(), ["b.tool_result", "a.tool_result"]);

    let mixed = chain.with_middleware(NativeRecorder(log.clone()));
    let err = mixed.process_tool_result(&mut result).unwrap_err();
    assert_eq!(err.kind_name(), "InternalError");
    assert!(err.message().contains("native middleware `native`"), "{err}");
}

/// Rejects every call to `name`, with its own result text.
struct RejectByName(&'static str);

impl MiddlewareDriver for RejectByName {
    fn name(&self) -> &str {
        "reject_by_name"
    }
    fn on_prepared_tool_calls(&self, batch: &PreparedBatch) -> Result<Vec<PreparedCallVerdict>> {
        Ok(batch
            .calls()
            .iter()
            .map(|p| {
                if p.call.name == self.0 {
                    let mut result = tinyagents::prelude::ToolResult::ok(&p.call, "not in this batch");
                    result.error = None; // the adapter makes it an error result
                    PreparedCallVerdict::Reject(result)
                } else {
                    PreparedCallVerdict::Proceed
                }
            })
            .collect())
    }
}

/// "Return one PreparedCallVerdict per call": a rejected call does not run
/// and has exactly one (error) result; the others run.
#[tokio::test]
async fn each_prepared_call_gets_its_verdict() {
    let read = RecordingTool::new("read_tool");
    let write = RecordingTool::new("write_file");
    let done = Scenario::new([
        ScriptedTurn::tool_calls(vec![
            NativeCall::new("c1", "read_tool", json!({"path": "a"})),
            NativeCall::new("c2", "write_file", json!({"path": "a", "content": "x"})),
            NativeCall::new("c3", "read_tool", json!({"path": "b"})),
        ]),
        ScriptedTurn::text("done"),
    ])
    .without_defaults()
    .tool(read.clone())
    .tool(write.clone())
    .middleware(DriverMiddleware::new(RejectByName("write_file")))
    .run("go")
    .await;
    assert_eq!(done.text(), "done");
    assert_eq!(read.calls().len(), 2);
    assert!(write.calls().is_empty());
    let results: Vec<_> = done.run().messages.iter().filter(|m| m.role == Role::Tool).collect();
    assert_eq!(results.len(), 3, "one result per call");
    let rejected = results
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("c2"))
        .unwrap();
    assert_eq!(rejected.text(), "not in this batch");
}

/// Too few verdicts is the driver's bug: the run fails naming it, no call runs.
struct ShortVerdicts;

impl MiddlewareDriver for ShortVerdicts {
    fn on_prepared_tool_calls(&self, _batch: &PreparedBatch) -> Result<Vec<PreparedCallVerdict>> {
        Ok(vec![PreparedCallVerdict::Proceed])
    }
}

#[tokio::test]
async fn a_wrong_number_of_verdicts_fails_closed() {
    let read = RecordingTool::new("read_tool");
    let done = Scenario::new([
        ScriptedTurn::tool_calls(vec![
            NativeCall::new("c1", "read_tool", json!({})),
            NativeCall::new("c2", "read_tool", json!({})),
        ]),
        ScriptedTurn::text("done"),
    ])
    .without_defaults()
    .tool(read.clone())
    .middleware(DriverMiddleware::new(ShortVerdicts))
    .run("go")
    .await;
    let err = done.error().expect("the run fails");
    assert_eq!(err.kind(), ErrorKind::Middleware);
    assert!(
        err.to_string().contains("returned 1 verdicts for a batch of 2 calls"),
        "{err}"
    );
    assert!(read.calls().is_empty());
}

/// Fails `process_request` with the error it holds.
struct FailRequest(MiddlewareError);

impl MiddlewareDriver for FailRequest {
    fn name(&self) -> &str {
        "failing"
    }
    fn process_request(&self, _request: &mut Request) -> Result<()> {
        Err(self.0.clone())
    }
}

/// "Errors can block execution": each kind stops the run as its native
/// class, with the driver's name, the `completed … error:KIND` event, and
/// the message.
#[tokio::test]
async fn errors_block_and_surface_classified() {
    let cases = [
        (MiddlewareError::internal("db down"), ErrorKind::Middleware),
        (MiddlewareError::validation("empty prompt"), ErrorKind::Validation),
        (MiddlewareError::permission_denied("model"), ErrorKind::Validation),
        (
            MiddlewareError::rate_limit_exceeded("per_second"),
            ErrorKind::RateLimited,
        ),
        (MiddlewareError::config("no key"), ErrorKind::Config),
    ];
    for (error, kind) in cases {
        let message = error.message().to_owned();
        let done = Scenario::new([ScriptedTurn::text("never")])
            .without_defaults()
            .middleware(DriverMiddleware::new(FailRequest(error)))
            .run("go")
            .await;
        let err = done.error().expect("the run fails");
        assert_eq!(err.kind(), kind, "{err}");
        assert!(err.to_string().contains("failing"), "{err}");
        assert!(err.to_string().contains(&message), "{err}");
        assert!(
            done.trace()
                .contains(&format!("completed failing.before_model error:{kind}")),
            "{:#?}",
            done.trace()
        );
        assert_eq!(done.run_model_calls(), 0);
    }
}

trait ModelCalls {
    fn run_model_calls(&self) -> usize;
}

impl ModelCalls for tinyagents::testing::ScenarioRun {
    fn run_model_calls(&self) -> usize {
        self.trace().iter().filter(|l| l.starts_with("model_call ")).count()
    }
}

/// Arguments that are not JSON refuse the call (it does not run); a driver
/// that panics fails the run as a native hook's panic does.
struct Garble;

impl MiddlewareDriver for Garble {
    fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
        tool_call.function.arguments = "{not json".into();
        Ok(())
    }
}

struct Panics;

impl MiddlewareDriver for Panics {
    fn process_response(&self, _response: &mut Response) -> Result<()> {
        panic!("driver bug")
    }
}

#[tokio::test]
async fn what_a_driver_gets_wrong_fails_closed() {
    let read = RecordingTool::new("read_tool");
    let done = Scenario::new(one_call("read_tool"))
        .without_defaults()
        .tool(read.clone())
        .middleware(DriverMiddleware::new(Garble))
        .run("go")
        .await;
    assert!(read.calls().is_empty(), "a call with broken arguments ran");
    let answer = done.run().messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert!(answer.text().contains("not JSON"), "{}", answer.text());

    let done = Scenario::new([ScriptedTurn::text("hi")])
        .without_defaults()
        .middleware(DriverMiddleware::new(Panics))
        .run("go")
        .await;
    assert_eq!(done.error().map(|e| e.kind()), Some(ErrorKind::MiddlewarePanic));
}

/// A driver's edits to a tool result reach the history.
struct Edits;

impl MiddlewareDriver for Edits {
    fn process_tool_result(&self, result: &mut ToolResult) -> Result<()> {
        result.result = format!("{} (checked)", result.result);
        Ok(())
    }
}

#[tokio::test]
async fn driver_edits_are_written_back() {
    let done = Scenario::new(one_call("read_tool"))
        .without_defaults()
        .tool(RecordingTool::new("read_tool").returning("hello"))
        .middleware(DriverMiddleware::new(Edits))
        .run("go")
        .await;
    assert_eq!(done.text(), "done");
    let answer = done.run().messages.iter().find(|m| m.role == Role::Tool).unwrap();
    assert_eq!(answer.text(), "hello (checked)");
}

/// A native config type named `compat_probe`, to collide with a factory.
#[derive(Debug, tinyagents::MiddlewareConfig)]
#[config(type = "compat_probe", builds = Probe)]
struct ProbeConfig {}

struct Probe;

impl From<ProbeConfig> for Probe {
    fn from(_: ProbeConfig) -> Self {
        Probe
    }
}

#[tinyagents::middleware(name = "compat_probe")]
impl Probe {
    #[tinyagents::before_model]
    fn probe(&self, _request: &mut ModelRequest) -> tinyagents::Result<()> {
        Ok(())
    }
}

struct ProbeFactory;

impl MiddlewareFactory for ProbeFactory {
    fn type_name(&self) -> &'static str {
        "compat_probe"
    }
    fn create(&self, _config: &serde_json::Value, _agent: &AgentConfig) -> Result<Arc<dyn MiddlewareDriver>> {
        Ok(Arc::new(Recorder {
            name: "probe_driver",
            log: Arc::default(),
        }))
    }
}

/// A factory named like a native type never shadows it: naming the type is
/// refused as ambiguous, located, until one is renamed.
#[test]
fn a_factory_named_like_a_native_type_is_refused_not_chosen() {
    use tinyagents::config::MiddlewareRegistry;
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::new().with::<ProbeConfig>().unwrap();
    assert_eq!(
        registry
            .stack_from_toml("[[middleware]]\ntype = \"compat_probe\"")
            .unwrap()
            .names(),
        ["compat_probe"]
    );
    MIDDLEWARE_REGISTRY.register(Arc::new(ProbeFactory));
    let err = registry
        .stack_from_toml("[[middleware]]\ntype = \"compat_probe\"")
        .unwrap_err()
        .to_string();
    assert!(err.contains("`middleware[0].type` = \"compat_probe\""), "{err}");
    assert!(err.contains("rename the factory's `type_name`"), "{err}");
}

//! Shared fakes for the behaviour tests in `tests/tests/`: a [`Recorder`]
//! middleware that logs every hook it sees into a shared [`Log`].

use std::sync::{Arc, Mutex};

/// The README's Rust snippets, compiled and run as doc tests.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

use async_trait::async_trait;
use tinyagents::harness::middleware::MiddlewareInfo;
use tinyagents::prelude::*;

/// A shared, ordered log of `name:hook` lines.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    /// Appends a line.
    pub fn push(&self, line: impl Into<String>) {
        self.0.lock().unwrap().push(line.into());
    }

    /// The lines so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    /// The lines that mention `hook` (`"before_model"` matches `a:before_model`).
    pub fn only(&self, hook: &str) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.split(':').nth(1) == Some(hook))
            .collect()
    }

    /// Forgets every line.
    pub fn clear(&self) {
        self.0.lock().unwrap().clear();
    }
}

/// A middleware that logs `name:hook` for every hook it implements, can fail
/// or panic in one hook, and wraps model and tool calls (logging
/// `name:wrap_model>` on the way in and `name:wrap_model<` on the way out).
#[derive(Clone)]
pub struct Recorder {
    /// Its name.
    pub name: String,
    /// Where it logs.
    pub log: Log,
    /// The hooks it reports implementing.
    pub hooks: HookSet,
    /// A hook in which it returns a `Validation` error.
    pub fail_in: Option<HookKind>,
    /// A hook in which it panics.
    pub panic_in: Option<HookKind>,
    /// Ordering constraints.
    pub before: Vec<String>,
    /// Ordering constraints.
    pub after: Vec<String>,
}

impl Recorder {
    /// A recorder implementing every lifecycle hook and both wraps.
    pub fn new(name: &str, log: &Log) -> Self {
        Self {
            name: name.to_owned(),
            log: log.clone(),
            hooks: HookSet::EVERY,
            fail_in: None,
            panic_in: None,
            before: Vec::new(),
            after: Vec::new(),
        }
    }

    /// The same recorder implementing only `hooks` (wraps included when they are in it).
    pub fn only(mut self, hooks: HookSet) -> Self {
        self.hooks = hooks;
        self
    }

    /// The same recorder failing in `hook`.
    pub fn failing_in(mut self, hook: HookKind) -> Self {
        self.fail_in = Some(hook);
        self
    }

    /// The same recorder panicking in `hook`.
    pub fn panicking_in(mut self, hook: HookKind) -> Self {
        self.panic_in = Some(hook);
        self
    }

    /// The same recorder ordered before `name`.
    pub fn before(mut self, name: &str) -> Self {
        self.before.push(name.to_owned());
        self
    }

    /// The same recorder ordered after `name`.
    pub fn after(mut self, name: &str) -> Self {
        self.after.push(name.to_owned());
        self
    }

    fn hit(&self, hook: HookKind) -> Result<()> {
        self.log.push(format!("{}:{}", self.name, hook));
        if self.panic_in == Some(hook) {
            panic!("{} panics in {hook} on purpose", self.name);
        }
        if self.fail_in == Some(hook) {
            return Err(TinyAgentsError::validation(format!("{} fails in {hook}", self.name)));
        }
        Ok(())
    }
}

#[async_trait]
impl<S: Send + Sync + 'static> Middleware<S> for Recorder {
    fn name(&self) -> &str {
        &self.name
    }
    fn hooks(&self) -> HookSet {
        self.hooks
    }
    fn info(&self) -> MiddlewareInfo {
        let mut info = MiddlewareInfo::new(self.name.clone()).with_hooks(self.hooks);
        for b in &self.before {
            info = info.before(b.clone());
        }
        for a in &self.after {
            info = info.after(a.clone());
        }
        info
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &S,
        request: ModelRequest,
        next: ModelHandler<'_, S>,
    ) -> Result<MiddlewareModelOutcome> {
        self.hit(HookKind::WrapModel)?;
        self.log.push(format!("{}:wrap_model>", self.name));
        let out = next.run(ctx, state, request).await;
        self.log.push(format!("{}:wrap_model<", self.name));
        out
    }
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext,
        state: &S,
        call: ToolCall,
        next: ToolHandler<'_, S>,
    ) -> Result<MiddlewareToolOutcome> {
        self.hit(HookKind::WrapTool)?;
        self.log.push(format!("{}:wrap_tool>", self.name));
        let out = next.run(ctx, state, call).await;
        self.log.push(format!("{}:wrap_tool<", self.name));
        out
    }
    async fn before_agent(&self, _: &mut RunContext, _: &S) -> Result<()> {
        self.hit(HookKind::BeforeAgent)
    }
    async fn after_agent(&self, _: &mut RunContext, _: &S, _: &mut AgentRun) -> Result<()> {
        self.hit(HookKind::AfterAgent)
    }
    async fn before_model(&self, _: &mut RunContext, _: &S, _: &mut ModelRequest) -> Result<()> {
        self.hit(HookKind::BeforeModel)
    }
    async fn before_model_stream(&self, _: &mut RunContext, _: &S, _: &mut ModelRequest) -> Result<()> {
        self.hit(HookKind::BeforeModelStream)
    }
    async fn after_model(&self, _: &mut RunContext, _: &S, _: &mut ModelResponse) -> Result<()> {
        self.hit(HookKind::AfterModel)
    }
    async fn on_tool_batch(&self, _: &mut RunContext, _: &S, _: &mut PreparedBatch) -> Result<()> {
        self.hit(HookKind::OnToolBatch)
    }
    async fn before_tool(&self, _: &mut RunContext, _: &S, _: &mut ToolCall) -> Result<()> {
        self.hit(HookKind::BeforeTool)
    }
    async fn on_prepared_tool_calls(&self, _: &mut RunContext, _: &S, _: &mut PreparedBatch) -> Result<()> {
        self.hit(HookKind::OnPreparedToolCalls)
    }
    async fn after_tool(&self, _: &mut RunContext, _: &S, _: &mut ToolResult) -> Result<()> {
        self.hit(HookKind::AfterTool)
    }
    async fn on_error(&self, _: &mut RunContext, _: &S, error: &TinyAgentsError) -> Result<()> {
        self.log.push(format!("{}:on_error:{}", self.name, error.kind()));
        Err(TinyAgentsError::validation("errors from on_error are ignored"))
    }
}

/// Checks that every `started X.h` has exactly one later `completed X.h …`,
/// properly nested, and returns the completed lines' outcomes in order.
pub fn assert_balanced(trace: &[String]) {
    let mut open: Vec<String> = Vec::new();
    for line in trace {
        if let Some(rest) = line.strip_prefix("started ") {
            open.push(rest.to_owned());
        } else if let Some(rest) = line.strip_prefix("completed ") {
            let key = rest.split(' ').next().unwrap();
            let top = open
                .pop()
                .unwrap_or_else(|| panic!("`{line}` has no matching start in {trace:#?}"));
            assert_eq!(top, key, "events are not properly nested in {trace:#?}");
        }
    }
    assert!(open.is_empty(), "unbalanced: {open:?} never completed in {trace:#?}");
}

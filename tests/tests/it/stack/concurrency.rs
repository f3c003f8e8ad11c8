//! One stack shared by 1,000 concurrent runs on a multi-thread runtime: every
//! run's result is correct and nothing leaks between runs.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::prelude::*;

/// Per-run state kept in the run context (never in the middleware).
#[derive(Default)]
struct Seen(AtomicU32);

/// Tags each request with the run id, counts model calls per run, and
/// checks in `after_model` that the reply belongs to this run.
struct Tagger;

#[async_trait]
impl Middleware<()> for Tagger {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL | HookSet::AFTER_MODEL | HookSet::AFTER_TOOL
    }
    async fn before_model(&self, ctx: &mut RunContext, _: &(), request: &mut ModelRequest) -> Result<()> {
        ctx.locals().local::<Seen>().0.fetch_add(1, Ordering::Relaxed);
        request.set_volatile("run", ctx.run_id().to_string());
        tokio::task::yield_now().await; // interleave runs
        Ok(())
    }
    async fn after_model(&self, ctx: &mut RunContext, _: &(), response: &mut ModelResponse) -> Result<()> {
        let text = response.message.text();
        if !text.is_empty() && !text.ends_with(&**ctx.run_id()) {
            return Err(TinyAgentsError::validation(format!(
                "cross-talk: {} got {text}",
                ctx.run_id()
            )));
        }
        Ok(())
    }
    async fn after_tool(&self, ctx: &mut RunContext, _: &(), result: &mut ToolResult) -> Result<()> {
        result.content.push_str(&format!(" for {}", ctx.run_id()));
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_runs_share_one_stack_without_cross_talk() {
    // The model echoes the run id it finds in the volatile prompt segment;
    // the first turn of each run asks for the `echo` tool.
    let model = Arc::new(ScriptedModel::from_fn(|req| {
        let run = req.segment("run").map(|s| s.text.clone()).unwrap_or_default();
        let tool_answered = req.messages.iter().any(|m| m.role == Role::Tool);
        if tool_answered {
            let tool_text = req
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::Tool)
                .unwrap()
                .text()
                .into_owned();
            ScriptedTurn::text(format!("{tool_text} / answer for {run}"))
        } else {
            ScriptedTurn::tool_call("echo", json!({"run": run}))
        }
    }));
    let tools = ToolRegistry::new()
        .with(tool_fn("echo", "Echoes its run argument.", |_cx, args| async move {
            Ok(format!("echo {}", args["run"].as_str().unwrap_or("?")).into())
        }))
        .unwrap();
    let stack = Arc::new(MiddlewareStack::new().with(Tagger).unwrap());
    let agent = Arc::new(Agent::from_shared(model).with_tools(tools).with_shared_stack(stack));

    let handles: Vec<_> = (0..1000)
        .map(|i| {
            let agent = agent.clone();
            tokio::spawn(async move {
                let id = format!("run-{i}");
                let mut ctx = RunContext::new(RunConfig::new(id.clone()), ());
                let run = agent.run(&mut ctx, &(), "go").await.expect("run succeeds");
                (id, run, ctx.locals().local::<Seen>().0.load(Ordering::Relaxed))
            })
        })
        .collect();
    for h in handles {
        let (id, run, seen) = h.await.unwrap();
        assert_eq!(run.final_text(), format!("echo {id} for {id} / answer for {id}"));
        assert_eq!(seen, 2, "two model calls in {id}, counted in its own context");
        assert_eq!(run.counters.tool_calls, 1);
    }
}

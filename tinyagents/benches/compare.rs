//! Our side of the LangChain comparison (`bench/compare.sh` runs it next to
//! `bench/langchain_bench.py` in one invocation): the same agent shapes on
//! the scripted model, timed the same way (median of repeated runs), printed
//! as one JSON object of microseconds.
//!
//! Run alone: `cargo bench -p tinyagents --bench compare`.

#![allow(missing_docs)] // the DSL's generated types

mod common;

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tinyagents::harness::event::{EventKind, EventMask, EventSink};
use tinyagents::prelude::*;

/// Before/after no-op hooks, like LangChain's `AgentMiddleware.before_model`/`after_model` returning None.
struct Noop;

#[middleware(name = "noop")]
impl Noop {
    #[before_model]
    fn before(&self, _request: &mut ModelRequest) -> Result<()> {
        Ok(())
    }

    #[after_model]
    fn after(&self, _response: &mut ModelResponse) -> Result<()> {
        Ok(())
    }
}

/// A pass-through wrap, like `wrap_model_call` returning `handler(request)`.
struct Pass;

#[middleware(name = "pass")]
impl Pass {
    #[wrap_model]
    async fn wrap(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        next.run(ctx, state, request).await
    }
}

/// Consumes streamed deltas, like iterating `agent.stream(stream_mode="messages")`.
struct Deltas;

impl EventSink for Deltas {
    fn emit(&self, event: AgentEvent) {
        std::hint::black_box(event);
    }
    fn interest(&self) -> EventMask {
        EventMask::only([EventKind::ModelDelta])
    }
}

fn median_us(rounds: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..rounds.div_ceil(10) {
        f();
    }
    let mut samples: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn main() {
    if common::quick_mode() {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let text_model = || ScriptedModel::from_fn(|_| ScriptedTurn::text("done"));
    let run = |agent: &Agent<()>, sink: Option<Arc<dyn EventSink>>| {
        rt.block_on(async {
            let mut ctx = RunContext::new(RunConfig::new("bench"), ());
            if let Some(sink) = sink {
                ctx = ctx.with_sink(sink);
            }
            agent.run(&mut ctx, &(), "hi").await.unwrap();
        })
    };
    let rounds = 2001;

    let plain: Agent<()> = Agent::new(text_model());
    let mut noop10 = MiddlewareStack::empty();
    for i in 0..10 {
        noop10.add_named(format!("noop-{i}"), Noop).unwrap();
    }
    let hooks: Agent<()> = Agent::new(text_model()).with_stack(noop10);
    let mut pass10 = MiddlewareStack::empty();
    for i in 0..10 {
        pass10.add_named(format!("pass-{i}"), Pass).unwrap();
    }
    let wraps: Agent<()> = Agent::new(text_model()).with_stack(pass10);
    let tools = ToolRegistry::new()
        .with(tool_fn("echo", "Echoes.", |_cx, args| async move { Ok(args.into()) }))
        .unwrap();
    let round_trip: Agent<()> = Agent::new(ScriptedModel::from_fn(|req| {
        if req.messages.iter().any(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("echo", json!({"x": 1}))
        }
    }))
    .with_tools(tools);
    let long_text = "tok ".repeat(1000);
    let one_token: Agent<()> = Agent::new(ScriptedModel::from_fn(|_| ScriptedTurn::text("tok")));
    let thousand: Agent<()> = Agent::new(ScriptedModel::from_fn(move |_| ScriptedTurn::text(long_text.clone())));
    let sink: Arc<dyn EventSink> = Arc::new(Deltas);

    let base = median_us(rounds, || run(&plain, None));
    let with_hooks = median_us(rounds, || run(&hooks, None));
    let with_wraps = median_us(rounds, || run(&wraps, None));
    let tool_trip = median_us(rounds, || run(&round_trip, None));
    let stream1 = median_us(rounds / 4, || run(&one_token, Some(sink.clone())));
    let stream1000 = median_us(rounds / 4, || run(&thousand, Some(sink.clone())));
    let out = json!({
        "agent_turn_us": base,
        "agent_turn_10_noop_before_after_us": with_hooks,
        "per_hook_us": (with_hooks - base) / 20.0,
        "agent_turn_10_wraps_us": with_wraps,
        "per_wrap_layer_us": (with_wraps - base) / 10.0,
        "tool_round_trip_us": tool_trip,
        "stream_1000_tokens_us": stream1000,
        "per_token_us": (stream1000 - stream1) / 999.0,
    });
    println!("{out}");
}

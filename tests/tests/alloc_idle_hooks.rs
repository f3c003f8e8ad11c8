//! Exact allocation counts on the dispatch hot path, measured with a counting
//! global allocator (dhat in testing mode) in a dedicated test binary.
//!
//! * dispatching a hook that no middleware implements, on a stack of 10,
//!   allocates nothing;
//! * a dispatch reaching one async hook allocates exactly two blocks (the
//!   hook's boxed future and the boxed pass awaiting it);
//! * a sync delta hook allocates nothing;
//! * a plain (non-async) DSL lifecycle hook allocates nothing;
//! * with a sink that wants nothing, no event is built;
//! * a run whose stack keeps no run state (`run_state = T`) never makes a
//!   run state table: its first dispatch on a fresh context allocates nothing;
//! * a plain DSL hook taking `&mut T` run state allocates on its run's first
//!   call only (the table, its cell, the value's box), then nothing;
//! * a wrap layer allocates exactly one block, its boxed future: an onion of
//!   ten pass-through layers allocates ten blocks more than no onion.
//!
//! `harness = false`: one `main`, so no other test thread allocates meanwhile.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use tinyagents::prelude::*;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Polls a future that completes without waiting, once.
fn ready<F: Future>(fut: F) -> F::Output {
    match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the future was expected to complete at once"),
    }
}

/// Implements exactly the hooks it is told to.
struct Only(HookSet, &'static str);

#[async_trait]
impl Middleware<()> for Only {
    fn name(&self) -> &str {
        self.1
    }
    fn hooks(&self) -> HookSet {
        self.0
    }
    async fn before_model(&self, _: &mut RunContext, _: &(), request: &mut ModelRequest) -> Result<()> {
        request.params.temperature = Some(0.5);
        Ok(())
    }
    fn on_model_delta_sync(&self, _: &mut RunContext, _: &(), delta: &mut ModelDelta) -> Result<()> {
        if let Some(t) = delta.text_mut() {
            t.make_ascii_uppercase();
        }
        Ok(())
    }
}

/// A plain fn through the DSL: the stack calls it with no future at all.
#[before_model]
fn plain_hook(request: &mut ModelRequest) -> Result<()> {
    request.params.max_tokens = Some(64);
    Ok(())
}

/// A plain DSL hook with run state.
#[before_model(run_state = u32)]
fn counted(calls: &mut u32, request: &mut ModelRequest) -> Result<()> {
    *calls += 1;
    request.params.max_tokens = Some(*calls);
    Ok(())
}

/// The innermost call of a model onion: an answer at once.
struct Answer;

#[async_trait]
impl tinyagents::harness::middleware::ModelBaseCall<()> for Answer {
    async fn call(&self, _: &mut RunContext, _: &(), _: ModelRequest) -> Result<ModelResponse> {
        Ok(ModelResponse::text("ok"))
    }
}

const NAMES: [&str; 10] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"];

fn blocks_during(f: impl FnOnce()) -> u64 {
    let before = dhat::HeapStats::get().total_blocks;
    f();
    dhat::HeapStats::get().total_blocks - before
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();

    // Ten middleware, none of which implements before_model or on_model_delta.
    let mut idle: MiddlewareStack<()> = MiddlewareStack::new();
    for name in NAMES {
        idle.add(Only(HookSet::AFTER_TOOL | HookSet::BEFORE_AGENT, name))
            .unwrap();
    }
    // Ten middleware, one of which implements before_model and a sync delta hook.
    let mut one: MiddlewareStack<()> = MiddlewareStack::new();
    for (i, name) in NAMES.into_iter().enumerate() {
        let hooks = if i == 4 {
            HookSet::BEFORE_MODEL | HookSet::ON_MODEL_DELTA | HookSet::SYNC_MODEL_DELTA
        } else {
            HookSet::AFTER_TOOL
        };
        one.add(Only(hooks, name)).unwrap();
    }
    // Ten middleware, one of which is a plain DSL fn implementing before_model.
    let mut plain: MiddlewareStack<()> = MiddlewareStack::new();
    for name in &NAMES[..9] {
        plain.add(Only(HookSet::AFTER_TOOL, name)).unwrap();
    }
    plain.add(PlainHook).unwrap();
    let mut ctx: RunContext = RunContext::new(RunConfig::new("alloc"), ());
    let mut request = ModelRequest::default();
    let mut delta = ModelDelta::text("hello");

    // Warm up (lazy statics, first-use paths).
    ready(idle.run_before_model(&mut ctx, &(), &mut request)).unwrap();
    ready(one.run_before_model(&mut ctx, &(), &mut request)).unwrap();

    let idle_blocks = blocks_during(|| {
        for _ in 0..1000 {
            ready(idle.run_before_model(&mut ctx, &(), &mut request)).unwrap();
            ready(idle.run_on_model_delta(&mut ctx, &(), &mut delta)).unwrap();
            ready(idle.run_after_model(&mut ctx, &(), &mut ModelResponse::text(""))).unwrap_or(());
        }
    });
    let response_blocks = blocks_during(|| {
        for _ in 0..1000 {
            drop(ModelResponse::text(""));
        }
    });
    let one_blocks = blocks_during(|| {
        for _ in 0..1000 {
            ready(one.run_before_model(&mut ctx, &(), &mut request)).unwrap();
        }
    });
    ready(plain.run_before_model(&mut ctx, &(), &mut request)).unwrap();
    let plain_blocks = blocks_during(|| {
        for _ in 0..1000 {
            ready(plain.run_before_model(&mut ctx, &(), &mut request)).unwrap();
        }
    });
    let sync_delta_blocks = blocks_during(|| {
        for _ in 0..1000 {
            ready(one.run_on_model_delta(&mut ctx, &(), &mut delta)).unwrap();
        }
    });

    // A fresh context's first dispatch through a stack with no run state:
    // exactly what making the context costs, nothing for run state.
    let context_blocks = blocks_during(|| drop(RunContext::new(RunConfig::new("fresh"), ())));
    // (`MiddlewareStack::empty()`: a default-on built-in keeps run state.)
    let mut stateless: MiddlewareStack<()> = MiddlewareStack::empty();
    for name in &NAMES[..9] {
        stateless.add(Only(HookSet::AFTER_TOOL, name)).unwrap();
    }
    stateless.add(PlainHook).unwrap();
    let fresh_plain_blocks = blocks_during(|| {
        let mut fresh: RunContext = RunContext::new(RunConfig::new("fresh"), ());
        ready(stateless.run_before_model(&mut fresh, &(), &mut request)).unwrap();
    });
    // A stack of ten, one of which keeps run state.
    let mut stateful: MiddlewareStack<()> = MiddlewareStack::empty();
    for name in &NAMES[..9] {
        stateful.add(Only(HookSet::AFTER_TOOL, name)).unwrap();
    }
    stateful.add(Counted).unwrap();
    let mut run: RunContext = RunContext::new(RunConfig::new("stateful"), ());
    let mut counted_request = ModelRequest::default();
    let first_state_blocks = blocks_during(|| {
        ready(stateful.run_before_model(&mut run, &(), &mut counted_request)).unwrap();
    });
    let state_blocks = blocks_during(|| {
        for _ in 0..1000 {
            ready(stateful.run_before_model(&mut run, &(), &mut counted_request)).unwrap();
        }
    });

    // Ten wrap layers that proceed once (the trait's default `wrap_model`),
    // against no layer around the same innermost call.
    let mut wraps: MiddlewareStack<()> = MiddlewareStack::empty();
    for name in NAMES {
        wraps.add(Only(HookSet::WRAP_MODEL, name)).unwrap();
    }
    let no_wraps: MiddlewareStack<()> = MiddlewareStack::empty();
    ready(wraps.run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &Answer)).unwrap();
    ready(no_wraps.run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &Answer)).unwrap();
    let onion_blocks = blocks_during(|| {
        for _ in 0..1000 {
            let out = ready(wraps.run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &Answer)).unwrap();
            assert_eq!(out.message.text(), "ok");
        }
    });
    let bare_blocks = blocks_during(|| {
        for _ in 0..1000 {
            ready(no_wraps.run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &Answer)).unwrap();
        }
    });

    let mut failures = Vec::new();
    if onion_blocks != bare_blocks + 10 * 1000 {
        failures.push(format!(
            "1000 passes through ten wrap layers allocated {} blocks more than without them (expected exactly \
             10000: one boxed future a layer)",
            onion_blocks as i64 - bare_blocks as i64
        ));
    }
    if fresh_plain_blocks != context_blocks {
        failures.push(format!(
            "a fresh context's first dispatch through a stack without run state allocated {} blocks beyond the \
             context's own {context_blocks} (expected 0: no run state table)",
            fresh_plain_blocks.saturating_sub(context_blocks)
        ));
    }
    // The run's table (an `Arc` and its slice of cells), the cell (`Arc`) and the value's `Box`.
    if first_state_blocks != 4 {
        failures.push(format!(
            "the first call of a run state hook allocated {first_state_blocks} blocks (expected exactly 4: the \
             table, its cells, the cell and the value)"
        ));
    }
    if state_blocks != 0 {
        failures.push(format!(
            "1000 later calls of a plain run state hook allocated {state_blocks} blocks (expected 0)"
        ));
    }
    assert_eq!(
        counted_request.params.max_tokens,
        Some(1001),
        "the run state hook counted every call of its run"
    );
    // The ModelResponse values themselves allocate; dispatch adds nothing.
    if idle_blocks != response_blocks {
        failures.push(format!(
            "dispatching unimplemented hooks on a stack of 10 allocated {} blocks in 1000 rounds (expected 0)",
            idle_blocks - response_blocks
        ));
    }
    // An async hook is boxed (a `dyn` async method), and so is the pass that
    // awaits it (the dispatch future stays 16 bytes on every path): exactly
    // two blocks per dispatch reaching one async hook.
    if one_blocks != 2000 {
        failures.push(format!(
            "1000 dispatches of one async hook allocated {one_blocks} blocks (expected exactly 2000: the hook's boxed future and the pass's)"
        ));
    }
    if plain_blocks != 0 {
        failures.push(format!(
            "1000 plain (sync) DSL lifecycle hooks allocated {plain_blocks} blocks (expected 0)"
        ));
    }
    if sync_delta_blocks != 0 {
        failures.push(format!(
            "1000 sync delta hooks allocated {sync_delta_blocks} blocks (expected 0)"
        ));
    }
    assert_eq!(delta.as_text(), Some("HELLO"), "the sync delta hook ran");
    assert_eq!(request.params.temperature, Some(0.5), "the async hook ran");
    assert_eq!(request.params.max_tokens, Some(64), "the plain hook ran");

    if failures.is_empty() {
        println!("test result: ok. 8 passed; 0 failed");
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        println!(
            "test result: FAILED. {} passed; {} failed",
            8 - failures.len(),
            failures.len()
        );
        std::process::exit(1);
    }
}

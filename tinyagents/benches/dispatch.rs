#![allow(missing_docs)] // criterion_group! generates an undocumented fn
//! Dispatch cost of the middleware stack: ns per `run_before_model` for an
//! empty stack, 10 registered with 1 implementing, the same 1 alone, 10 of
//! 10 implementing; a 10-layer wrap onion; 1,000 deltas through 5 sync
//! delta hooks. Prints the "1 of 10 vs alone" ratio (target ≤ 1.5).
//!
//! Run: `cargo bench -p tinyagents --bench dispatch`.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use async_trait::async_trait;
use criterion::{criterion_group, Criterion};
use tinyagents::harness::middleware::ModelBaseCall;
use tinyagents::prelude::*;

/// Polls a future that completes without waiting.
fn ready<F: Future>(fut: F) -> F::Output {
    match pin!(fut).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("benchmark futures complete at once"),
    }
}

struct Mw(HookSet, &'static str);

#[async_trait]
impl Middleware<()> for Mw {
    fn name(&self) -> &str {
        self.1
    }
    fn hooks(&self) -> HookSet {
        self.0
    }
    async fn before_model(&self, _: &mut RunContext, _: &(), request: &mut ModelRequest) -> Result<()> {
        request.params.max_tokens = Some(black_box(100));
        Ok(())
    }
    fn on_model_delta_sync(&self, _: &mut RunContext, _: &(), delta: &mut ModelDelta) -> Result<()> {
        if let Some(t) = delta.text_mut() {
            black_box(t.len());
        }
        Ok(())
    }
}

struct Layer(&'static str);

#[async_trait]
impl Middleware<()> for Layer {
    fn name(&self) -> &str {
        self.0
    }
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        next.run(ctx, state, request).await
    }
}

struct Base(ModelResponse);

#[async_trait]
impl ModelBaseCall<()> for Base {
    async fn call(&self, _: &mut RunContext, _: &(), _: ModelRequest) -> Result<ModelResponse> {
        Ok(self.0.clone())
    }
}

const NAMES: [&str; 10] = ["m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"];

fn stack_of(n: usize, implementing: impl Fn(usize) -> bool) -> MiddlewareStack<()> {
    let mut stack = MiddlewareStack::empty();
    for (i, name) in NAMES.into_iter().enumerate().take(n) {
        let hooks = if implementing(i) {
            HookSet::BEFORE_MODEL
        } else {
            HookSet::AFTER_TOOL
        };
        stack.add(Mw(hooks, name)).unwrap();
    }
    stack
}

fn before_model_cost(stack: &MiddlewareStack<()>, ctx: &mut RunContext, request: &mut ModelRequest) {
    ready(stack.run_before_model(ctx, &(), request)).unwrap();
}

struct Cases {
    empty: MiddlewareStack<()>,
    one_of_ten: MiddlewareStack<()>,
    alone: MiddlewareStack<()>,
    ten_of_ten: MiddlewareStack<()>,
    onion: MiddlewareStack<()>,
    deltas: MiddlewareStack<()>,
}

fn cases() -> Cases {
    let mut onion = MiddlewareStack::empty();
    for name in NAMES {
        onion.add(Layer(name)).unwrap();
    }
    let mut deltas = MiddlewareStack::empty();
    for name in &NAMES[..5] {
        deltas
            .add(Mw(HookSet::ON_MODEL_DELTA | HookSet::SYNC_MODEL_DELTA, name))
            .unwrap();
    }
    Cases {
        empty: MiddlewareStack::empty(),
        one_of_ten: stack_of(10, |i| i == 4),
        alone: stack_of(1, |_| true),
        ten_of_ten: stack_of(10, |_| true),
        onion,
        deltas,
    }
}

fn bench_dispatch(c: &mut Criterion) {
    let cases = cases();
    let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
    let mut request = ModelRequest::default();
    let mut g = c.benchmark_group("run_before_model");
    g.bench_function("empty stack", |b| {
        b.iter(|| before_model_cost(&cases.empty, &mut ctx, &mut request))
    });
    g.bench_function("10 registered, 1 implements", |b| {
        b.iter(|| before_model_cost(&cases.one_of_ten, &mut ctx, &mut request))
    });
    g.bench_function("the 1 alone", |b| {
        b.iter(|| before_model_cost(&cases.alone, &mut ctx, &mut request))
    });
    g.bench_function("10 of 10 implement", |b| {
        b.iter(|| before_model_cost(&cases.ten_of_ten, &mut ctx, &mut request))
    });
    g.finish();

    let base = Base(ModelResponse::text("ok"));
    let mut g = c.benchmark_group("run_wrapped_model");
    g.bench_function("no layers (the base call alone)", |b| {
        b.iter(|| {
            ready(
                cases
                    .empty
                    .run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &base),
            )
            .unwrap()
        })
    });
    g.bench_function("onion of 10 layers", |b| {
        b.iter(|| {
            ready(
                cases
                    .onion
                    .run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &base),
            )
            .unwrap()
        })
    });
    g.finish();
    let mut delta = ModelDelta::text("token");
    c.bench_function("1000 deltas through 5 sync delta hooks", |b| {
        b.iter(|| {
            for _ in 0..1000 {
                ready(cases.deltas.run_on_model_delta(&mut ctx, &(), &mut delta)).unwrap();
            }
        })
    });
}

/// Median ns per call over 21 samples of `iters` calls.
fn median_ns(iters: u32, mut f: impl FnMut()) -> f64 {
    let mut samples: Vec<f64> = (0..21)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(iters)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn print_ratios() {
    let cases = cases();
    let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
    let mut request = ModelRequest::default();
    let iters = 200_000;
    let empty = median_ns(iters, || before_model_cost(&cases.empty, &mut ctx, &mut request));
    let one = median_ns(iters, || before_model_cost(&cases.one_of_ten, &mut ctx, &mut request));
    let alone = median_ns(iters, || before_model_cost(&cases.alone, &mut ctx, &mut request));
    let ten = median_ns(iters, || before_model_cost(&cases.ten_of_ten, &mut ctx, &mut request));
    println!();
    println!("run_before_model, median ns per call:");
    println!("  empty stack                  {empty:8.1}");
    println!("  10 registered, 1 implements  {one:8.1}");
    println!("  the 1 alone                  {alone:8.1}");
    println!("  10 of 10 implement           {ten:8.1}");
    println!("ratio 1-of-10 / alone = {:.3} (target <= 1.5)", one / alone);
}

criterion_group!(benches, bench_dispatch);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if !std::env::args().any(|a| a == "--test" || a == "--list") {
        print_ratios();
    }
}

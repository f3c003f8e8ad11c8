//! Streaming: 10,000 deltas through 0, 1 and 5 delta hooks written as plain
//! fns with the DSL (the sync fast path: no boxed future per delta), against
//! calling the same hook bodies directly in a loop (the floor). Prints the
//! ratios (targets: 5 hooks <= 3x the floor; 0 hooks no measurable cost).
//!
//! Run: `cargo bench -p tinyagents --bench streaming`.

#![allow(missing_docs)] // criterion_group! and the DSL's generated types

mod common;

use std::hint::black_box;

use common::{median_ns, quick_mode, ready};
use criterion::{criterion_group, Criterion};
use tinyagents::prelude::*;

/// The hook body: look at the text and count it (what a meter or a filter does).
#[inline(never)]
fn body(delta: &mut ModelDelta) -> Result<()> {
    if let Some(t) = delta.as_text() {
        black_box(t.len());
    }
    Ok(())
}

#[on_model_delta]
fn hook_a(delta: &mut ModelDelta) -> Result<()> {
    body(delta)
}
#[on_model_delta]
fn hook_b(delta: &mut ModelDelta) -> Result<()> {
    body(delta)
}
#[on_model_delta]
fn hook_c(delta: &mut ModelDelta) -> Result<()> {
    body(delta)
}
#[on_model_delta]
fn hook_d(delta: &mut ModelDelta) -> Result<()> {
    body(delta)
}
#[on_model_delta]
fn hook_e(delta: &mut ModelDelta) -> Result<()> {
    body(delta)
}

const DELTAS: usize = 10_000;

fn stacks() -> [MiddlewareStack<()>; 3] {
    let zero = MiddlewareStack::empty();
    let one = MiddlewareStack::empty().with(HookA).unwrap();
    let five = MiddlewareStack::empty()
        .with(HookA)
        .unwrap()
        .with(HookB)
        .unwrap()
        .with(HookC)
        .unwrap()
        .with(HookD)
        .unwrap()
        .with(HookE)
        .unwrap();
    [zero, one, five]
}

fn through(stack: &MiddlewareStack<()>, ctx: &mut RunContext, deltas: &mut [ModelDelta]) {
    for d in deltas.iter_mut() {
        ready(stack.run_on_model_delta(ctx, &(), d)).unwrap();
        black_box(&d);
    }
}

fn direct(hooks: usize, deltas: &mut [ModelDelta]) {
    for d in deltas.iter_mut() {
        for _ in 0..hooks {
            body(d).unwrap();
        }
        black_box(&d);
    }
}

fn deltas() -> Vec<ModelDelta> {
    (0..DELTAS).map(|i| ModelDelta::text(format!("tok{i} "))).collect()
}

fn bench_streaming(c: &mut Criterion) {
    let [zero, one, five] = stacks();
    let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
    let mut ds = deltas();
    let mut g = c.benchmark_group("10,000 deltas");
    g.bench_function("0 hooks, floor (forward only)", |b| b.iter(|| direct(0, &mut ds)));
    g.bench_function("0 hooks, through the stack", |b| {
        b.iter(|| through(&zero, &mut ctx, &mut ds))
    });
    g.bench_function("1 hook, floor", |b| b.iter(|| direct(1, &mut ds)));
    g.bench_function("1 hook, through the stack", |b| {
        b.iter(|| through(&one, &mut ctx, &mut ds))
    });
    g.bench_function("5 hooks, floor", |b| b.iter(|| direct(5, &mut ds)));
    g.bench_function("5 hooks, through the stack", |b| {
        b.iter(|| through(&five, &mut ctx, &mut ds))
    });
    g.finish();
}

fn print_ratios() {
    let [zero, one, five] = stacks();
    let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
    let mut ds = deltas();
    let per = |ns: f64| ns / DELTAS as f64;
    let iters = 200;
    let f0 = per(median_ns(iters, || direct(0, &mut ds)));
    let s0 = per(median_ns(iters, || through(&zero, &mut ctx, &mut ds)));
    let f1 = per(median_ns(iters, || direct(1, &mut ds)));
    let s1 = per(median_ns(iters, || through(&one, &mut ctx, &mut ds)));
    let f5 = per(median_ns(iters, || direct(5, &mut ds)));
    let s5 = per(median_ns(iters, || through(&five, &mut ctx, &mut ds)));
    println!("\nns per delta (median):      floor   stack   ratio");
    println!("  0 hooks                  {f0:6.2}  {s0:6.2}   +{:.2} ns", s0 - f0);
    println!("  1 hook                   {f1:6.2}  {s1:6.2}   {:.2}x", s1 / f1);
    println!(
        "  5 hooks                  {f5:6.2}  {s5:6.2}   {:.2}x (target <= 3x)",
        s5 / f5
    );
}

criterion_group!(benches, bench_streaming);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if !quick_mode() {
        print_ratios();
    }
}

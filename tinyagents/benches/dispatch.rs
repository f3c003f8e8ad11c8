#![allow(missing_docs)] // criterion_group! generates an undocumented fn
//! Dispatch cost of the middleware stack: ns per `run_before_model` for an
//! empty stack, 10 registered with 1 implementing, the same 1 alone, 10 of
//! 10 implementing; a plain DSL hook against its body called through a
//! vtable, alone and per hook in a pass of eight; a 10-layer wrap onion;
//! 1,000 deltas through 5 sync delta hooks. Prints the "1 of 10 vs alone"
//! and the plain-hook ratios (targets ≤ 1.5).
//!
//! Run: `cargo bench -p tinyagents --bench dispatch`.

use std::hint::black_box;

mod common;

use async_trait::async_trait;
use common::{median_ns, quick_mode, ready};
use criterion::{criterion_group, Criterion};
use tinyagents::harness::middleware::ModelBaseCall;
use tinyagents::prelude::*;

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

/// The body both the DSL hook and the direct call run.
#[inline(never)]
fn cap(request: &mut ModelRequest) -> Result<()> {
    request.params.max_tokens = Some(black_box(100));
    Ok(())
}

/// A plain fn through the DSL: the stack calls its synchronous form.
#[before_model]
fn plain_cap(request: &mut ModelRequest) -> Result<()> {
    cap(request)
}

/// Eight plain DSL hooks of eight types, for the cost of a hook in a pass.
macro_rules! plain_hooks {
    ($($f:ident $t:ident),*) => {
        $(
            /// One of eight plain DSL hooks with the same body.
            #[before_model]
            fn $f(request: &mut ModelRequest) -> Result<()> {
                cap(request)
            }
        )*
        fn eight_plain() -> MiddlewareStack<()> {
            let mut stack = MiddlewareStack::empty();
            $( stack.add($t).unwrap(); )*
            stack
        }
        $(
            impl Direct for $t {
                fn before_model(&self, request: &mut ModelRequest) -> Result<()> {
                    cap(request)
                }
            }
        )*
        /// The same eight bodies behind eight vtables.
        fn eight_direct() -> Vec<Box<dyn Direct>> {
            vec![$(Box::new($t)),*]
        }
    };
}

plain_hooks!(p0 P0, p1 P1, p2 P2, p3 P3, p4 P4, p5 P5, p6 P6, p7 P7);

/// Calls each of `direct` once: the floor of a pass of eight hooks.
fn direct_pass(direct: &[Box<dyn Direct>], request: &mut ModelRequest) {
    for d in black_box(direct) {
        d.before_model(request).unwrap();
    }
}

/// The floor a DSL hook is measured against: the same body behind a vtable.
trait Direct {
    fn before_model(&self, request: &mut ModelRequest) -> Result<()>;
}

struct DirectCap;

impl Direct for DirectCap {
    fn before_model(&self, request: &mut ModelRequest) -> Result<()> {
        cap(request)
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
    ready(black_box(stack).run_before_model(ctx, &(), request)).unwrap();
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
    let plain_stack = MiddlewareStack::empty().with(PlainCap).unwrap();
    g.bench_function("a plain DSL hook alone", |b| {
        b.iter(|| before_model_cost(&plain_stack, &mut ctx, &mut request))
    });
    let direct: &dyn Direct = black_box(&DirectCap);
    g.bench_function("its body through a vtable", |b| {
        b.iter(|| direct.before_model(&mut request).unwrap())
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

fn print_ratios() {
    let cases = cases();
    let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
    let mut request = ModelRequest::default();
    let iters = 200_000;
    let empty = median_ns(iters, || before_model_cost(&cases.empty, &mut ctx, &mut request));
    let one = median_ns(iters, || before_model_cost(&cases.one_of_ten, &mut ctx, &mut request));
    let alone = median_ns(iters, || before_model_cost(&cases.alone, &mut ctx, &mut request));
    let ten = median_ns(iters, || before_model_cost(&cases.ten_of_ten, &mut ctx, &mut request));
    let plain_stack = MiddlewareStack::empty().with(PlainCap).unwrap();
    let direct: &dyn Direct = black_box(&DirectCap);
    let mut plain = Vec::new();
    let mut floor = Vec::new();
    for _ in 0..5 {
        plain.push(median_ns(iters, || {
            before_model_cost(&plain_stack, &mut ctx, &mut request)
        }));
        floor.push(median_ns(iters, || direct.before_model(&mut request).unwrap()));
    }
    plain.sort_by(f64::total_cmp);
    floor.sort_by(f64::total_cmp);
    let (plain, floor) = (plain[2], floor[2]);
    // The cost of a hook in a pass: eight plain hooks, less the empty
    // stack's dispatch (its own target), per hook; against eight bodies
    // behind eight vtables, per call.
    let eight_stack = eight_plain();
    let eight_floor = eight_direct();
    let mut per_hook = Vec::new();
    let mut per_call = Vec::new();
    for _ in 0..5 {
        let empty = median_ns(iters, || before_model_cost(&cases.empty, &mut ctx, &mut request));
        let eight = median_ns(iters, || before_model_cost(&eight_stack, &mut ctx, &mut request));
        per_hook.push((eight - empty) / 8.0);
        per_call.push(median_ns(iters, || direct_pass(&eight_floor, &mut request)) / 8.0);
    }
    per_hook.sort_by(f64::total_cmp);
    per_call.sort_by(f64::total_cmp);
    let (per_hook, per_call) = (per_hook[2], per_call[2]);
    // A run whose middleware keep state (every real run): the dispatch must
    // not look its hook observers up in that state each time.
    let mut busy: RunContext = RunContext::new(RunConfig::new("bench"), ());
    busy.locals().local::<std::sync::atomic::AtomicU64>();
    let with_locals = median_ns(iters, || before_model_cost(&plain_stack, &mut busy, &mut request));
    println!();
    println!("run_before_model, median ns per call:");
    println!("  empty stack                  {empty:8.1}   (target <= 5 ns)");
    println!("  10 registered, 1 implements  {one:8.1}");
    println!("  the 1 alone                  {alone:8.1}");
    println!("  10 of 10 implement           {ten:8.1}");
    println!("  a plain DSL hook alone       {plain:8.1}");
    println!("  its body through a vtable    {floor:8.1}");
    println!("  the plain hook, run state    {with_locals:8.1}   (a run with middleware state, no observer)");
    println!("  8 plain DSL hooks, per hook  {per_hook:8.1}   (the pass less the empty stack's dispatch, / 8)");
    println!("  8 bodies, 8 vtables, per call{per_call:8.1}");
    println!("ratio 1-of-10 / alone = {:.3} (target <= 1.5)", one / alone);
    println!(
        "ratio a plain DSL hook alone / a direct call through a vtable = {:.2} (the whole dispatch: the empty \
         stack's fixed cost has its own target)",
        plain / floor
    );
    println!(
        "ratio a plain DSL hook alone, less the empty stack's dispatch / a direct call through a vtable = {:.2} \
         (the hook and the set-up a non-empty pass pays once per dispatch)",
        (plain - empty) / floor
    );
    println!(
        "ratio a plain DSL hook in a pass, per hook / a direct call through a vtable = {:.2} (target <= 1.5: \
         what a hook costs)",
        per_hook / per_call
    );
}

criterion_group!(benches, bench_dispatch);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if !quick_mode() {
        print_ratios();
    }
}

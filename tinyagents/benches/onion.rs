//! Wrap onions, model and tool, at depths 1, 10 and 50: the stack's
//! `run_wrapped_*` against an equivalent tower stack of boxed layers (each
//! layer a `BoxCloneService` whose future is boxed), with the same request
//! and response types and the same innermost call. Prints ns per layer and
//! the ratio (target: no slower than tower), at depth 50 and 10. (Each tower
//! layer clones the service inside it, and a `BoxCloneService` clones its
//! whole inner chain, so tower's figure grows with the depth.)
//!
//! Beside them, two floors for a model layer of an onion of trait objects:
//! one that only passes on (one boxed future a layer), and one that also
//! catches a panic of the layer inside it, as the stack must for every
//! layer. A deep onion pays the allocator's slower path for its boxes
//! (glibc's per-thread cache keeps seven blocks of a size; past it, blocks
//! over 120 bytes take the slower path), so a layer costs more at depth 50
//! than at 10.
//!
//! Run: `cargo bench -p tinyagents --bench onion` (`-- --ratios` prints only
//! the per-layer figures; `-- --profile-onion` runs only our depth-50 model
//! onion, for `perf record`).

#![allow(missing_docs)] // criterion_group! generates an undocumented fn

mod common;

use std::panic::AssertUnwindSafe;
use std::task::Poll;

use async_trait::async_trait;
use common::{median_ns, quick_mode, ready};
use criterion::{criterion_group, Criterion};
use futures::future::BoxFuture;
use tinyagents::harness::middleware::{ModelBaseCall, ToolBaseCall};
use tinyagents::prelude::*;
use tower::util::BoxCloneService;
use tower::{Service, ServiceExt};

/// A pass-through wrap layer, model and tool.
struct Layer(String);

#[async_trait]
impl Middleware<()> for Layer {
    fn name(&self) -> &str {
        &self.0
    }
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL | HookSet::WRAP_TOOL
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
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext,
        state: &(),
        call: ToolCall,
        next: ToolHandler<'_, ()>,
    ) -> Result<MiddlewareToolOutcome> {
        next.run(ctx, state, call).await
    }
}

struct Base;

fn response() -> ModelResponse {
    ModelResponse::text("ok")
}

#[async_trait]
impl ModelBaseCall<()> for Base {
    async fn call(&self, _: &mut RunContext, _: &(), _: ModelRequest) -> Result<ModelResponse> {
        Ok(response())
    }
}

#[async_trait]
impl ToolBaseCall<()> for Base {
    async fn call(&self, _: &mut RunContext, _: &(), call: ToolCall) -> Result<ToolResult> {
        Ok(ToolResult::ok(&call, "ok"))
    }
}

fn stack(depth: usize) -> MiddlewareStack<()> {
    let mut stack = MiddlewareStack::empty();
    for i in 0..depth {
        stack.add(Layer(format!("layer-{i}"))).unwrap();
    }
    stack
}

// ----- the floor: a dyn onion and nothing else -------------------------------

/// The least a layer of an onion of trait objects can cost: an
/// `async_trait` method (one boxed future, as every wrap layer has) that
/// passes the request, the context and the state on, with none of the
/// stack's per-layer work (event bracket, panic guard, jump check). With
/// `GUARD`, a panic of the layer inside also becomes an error this layer
/// sees, as the stack's handler does for every layer (`DESIGN.md`: a panic
/// inside a hook is caught and becomes a classified error).
#[async_trait]
trait FloorLayer<const GUARD: bool>: Send + Sync {
    async fn wrap(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        rest: &[Box<dyn FloorLayer<GUARD>>],
    ) -> Result<ModelResponse>;
}

struct FloorPass;

#[async_trait]
impl<const GUARD: bool> FloorLayer<GUARD> for FloorPass {
    async fn wrap(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        rest: &[Box<dyn FloorLayer<GUARD>>],
    ) -> Result<ModelResponse> {
        floor_next(ctx, state, request, rest).await
    }
}

async fn floor_next<const GUARD: bool>(
    ctx: &mut RunContext,
    state: &(),
    request: ModelRequest,
    rest: &[Box<dyn FloorLayer<GUARD>>],
) -> Result<ModelResponse> {
    let Some((layer, rest)) = rest.split_first() else {
        return Ok(response());
    };
    let inner = layer.wrap(ctx, state, request, rest);
    if GUARD {
        Guarded { fut: inner }.await
    } else {
        inner.await
    }
}

fn floor<const GUARD: bool>(depth: usize) -> Vec<Box<dyn FloorLayer<GUARD>>> {
    (0..depth)
        .map(|_| Box::new(FloorPass) as Box<dyn FloorLayer<GUARD>>)
        .collect()
}

fn floor_model<const GUARD: bool>(layers: &[Box<dyn FloorLayer<GUARD>>], ctx: &mut RunContext) {
    ready(floor_next(ctx, &(), ModelRequest::default(), layers)).unwrap();
}

/// The cheapest panic guard for a layer's boxed future: each poll runs inside
/// `catch_unwind` and writes its output in place, and the panic's path is out
/// of line (the stack's own guard, `Unpanicking`, is built the same way;
/// `FutureExt::catch_unwind`, which moves each output through its return,
/// costs a layer 5 to 10 ns more).
struct Guarded<F> {
    fut: F,
}

impl<F, T> std::future::Future for Guarded<F>
where
    F: std::future::Future<Output = Result<T>> + Unpin,
{
    type Output = Result<T>;
    #[inline]
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Result<T>> {
        let fut = std::pin::Pin::new(&mut self.get_mut().fut);
        let mut out = Poll::Pending;
        match std::panic::catch_unwind(AssertUnwindSafe(|| out = fut.poll(cx))) {
            Ok(()) => out,
            Err(p) => Poll::Ready(Err(panicked(p))),
        }
    }
}

/// A caught panic as the error the layer outside sees.
#[cold]
#[inline(never)]
fn panicked(_: Box<dyn std::any::Any + Send>) -> TinyAgentsError {
    TinyAgentsError::validation("the layer panicked")
}

// ----- the tower equivalent --------------------------------------------------

/// A pass-through tower layer: clones its inner service into a boxed future.
#[derive(Clone)]
struct TowerLayer<S>(S);

impl<Req, S> Service<Req> for TowerLayer<S>
where
    Req: Send + 'static,
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Send,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, std::result::Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<std::result::Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> Self::Future {
        let mut inner = self.0.clone();
        Box::pin(async move { inner.call(req).await })
    }
}

type ModelSvc = BoxCloneService<ModelRequest, ModelResponse, TinyAgentsError>;
type ToolSvc = BoxCloneService<ToolCall, ToolResult, TinyAgentsError>;

fn tower_model(depth: usize) -> ModelSvc {
    let mut svc: ModelSvc = BoxCloneService::new(tower::service_fn(|_req: ModelRequest| async { Ok(response()) }));
    for _ in 0..depth {
        svc = BoxCloneService::new(TowerLayer(svc));
    }
    svc
}

fn tower_tool(depth: usize) -> ToolSvc {
    let mut svc: ToolSvc = BoxCloneService::new(tower::service_fn(|call: ToolCall| async move {
        Ok(ToolResult::ok(&call, "ok"))
    }));
    for _ in 0..depth {
        svc = BoxCloneService::new(TowerLayer(svc));
    }
    svc
}

fn call() -> ToolCall {
    ToolCall::new("c1", "search", serde_json::json!({"q": "rust"}))
}

fn ours_model(stack: &MiddlewareStack<()>, ctx: &mut RunContext) {
    ready(stack.run_wrapped_model(ctx, &(), ModelRequest::default(), &Base)).unwrap();
}

fn ours_tool(stack: &MiddlewareStack<()>, ctx: &mut RunContext) {
    ready(stack.run_wrapped_tool(ctx, &(), call(), &Base)).unwrap();
}

fn tower_model_call(svc: &mut ModelSvc) {
    let fut = ready(svc.ready()).unwrap().call(ModelRequest::default());
    ready(fut).unwrap();
}

fn tower_tool_call(svc: &mut ToolSvc) {
    let fut = ready(svc.ready()).unwrap().call(call());
    ready(fut).unwrap();
}

fn bench_onions(c: &mut Criterion) {
    let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
    for depth in [1usize, 10, 50] {
        let s = stack(depth);
        let (mut tm, mut tt) = (tower_model(depth), tower_tool(depth));
        let mut g = c.benchmark_group(format!("onion depth {depth}"));
        g.bench_function("tinyagents model", |b| b.iter(|| ours_model(&s, &mut ctx)));
        g.bench_function("tower model", |b| b.iter(|| tower_model_call(&mut tm)));
        g.bench_function("tinyagents tool", |b| b.iter(|| ours_tool(&s, &mut ctx)));
        g.bench_function("tower tool", |b| b.iter(|| tower_tool_call(&mut tt)));
        g.finish();
    }
}

/// Median ns per layer of an onion: (depth `d` − depth 0) / `d`.
fn per_layer(d: usize, mut at: impl FnMut(usize) -> f64) -> f64 {
    (at(d) - at(0)) / d as f64
}

fn print_ratios() {
    let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
    let iters = 20_000;
    for depth in [50usize, 10] {
        println!("\nper wrap layer at depth {depth} (median ns; (depth {depth} - depth 0) / {depth}):");
        let ours_m = per_layer(depth, |d| {
            let s = stack(d);
            median_ns(iters, || ours_model(&s, &mut ctx))
        });
        let ours_t = per_layer(depth, |d| {
            let s = stack(d);
            median_ns(iters, || ours_tool(&s, &mut ctx))
        });
        let tower_m = per_layer(depth, |d| {
            let mut svc = tower_model(d);
            median_ns(iters, || tower_model_call(&mut svc))
        });
        let tower_t = per_layer(depth, |d| {
            let mut svc = tower_tool(d);
            median_ns(iters, || tower_tool_call(&mut svc))
        });
        let floor_m = per_layer(depth, |d| {
            let f = floor::<false>(d);
            median_ns(iters, || floor_model(&f, &mut ctx))
        });
        let guarded_m = per_layer(depth, |d| {
            let f = floor::<true>(d);
            median_ns(iters, || floor_model(&f, &mut ctx))
        });
        println!(
            "  model: tinyagents {ours_m:7.1}  tower {tower_m:7.1}  ratio {:.2} (target <= 1.0)",
            ours_m / tower_m
        );
        println!(
            "  tool:  tinyagents {ours_t:7.1}  tower {tower_t:7.1}  ratio {:.2} (target <= 1.0)",
            ours_t / tower_t
        );
        println!(
            "  floors of a model layer of a dyn onion (one boxed future a layer): passing on {floor_m:7.1}; \
             passing on and catching the inner layer's panic {guarded_m:7.1}"
        );
        println!(
            "  tinyagents is {:.2}x the guarded floor: {:.1} ns a layer over it (the event bracket, the jump check, \
             the state slot, and a bigger boxed future)",
            ours_m / guarded_m,
            ours_m - guarded_m
        );
    }
}

criterion_group!(benches, bench_onions);

fn main() {
    // `--profile-onion`: only our depth-50 model onion, for a profiler (`perf record`)
    if std::env::args().any(|a| a == "--profile-onion") {
        let mut ctx: RunContext = RunContext::new(RunConfig::new("bench"), ());
        let s = stack(50);
        for _ in 0..200_000 {
            ours_model(&s, &mut ctx);
        }
        return;
    }
    // `--ratios`: only the per-layer printout, not criterion's groups
    if std::env::args().any(|a| a == "--ratios") {
        print_ratios();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    if !quick_mode() {
        print_ratios();
    }
}

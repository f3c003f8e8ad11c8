//! `#[middleware]` on a generic type with fields: several lifecycle hooks and
//! both wraps, every argument, a config type, and helpers left alone.

use std::sync::atomic::{AtomicU64, Ordering};

use tinyagents::docs::MiddlewareMetadata;
use tinyagents::prelude::*;
use tinyagents::MiddlewareConfig;

#[derive(Debug, MiddlewareConfig)]
#[config(type = "cache")]
struct CacheConfig {
    /// Entries kept.
    #[config(default = 100)]
    capacity: usize,
}

struct Cache<T: Send + Sync + 'static> {
    hits: AtomicU64,
    label: T,
}

/// Caches replies.
#[middleware(
    builtin,
    name = "cache",
    before_if_present = ["logging"],
    after = [Audit],
    can_jump_to = [model, tools, end],
    config = CacheConfig,
    doc(
        mutation = "None.",
        events = "None.",
        failure = "Fails open.",
        streaming = "Replays whole replies.",
        cache = "Keyed by the stable prefix.",
        retries = "Outside retries."
    )
)]
impl<T: Send + Sync + 'static> Cache<T> {
    #[before_model]
    fn look(&self, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    #[after_model]
    async fn store(&self, response: &mut ModelResponse, ctx: &mut RunContext) -> Result<()> {
        let _ = (response, ctx);
        Ok(())
    }

    #[on_model_delta]
    fn watch(&self, delta: &mut ModelDelta) -> Result<()> {
        let _ = delta;
        Ok(())
    }

    #[wrap_model]
    async fn around(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<ModelResponse> {
        Ok(next.run(ctx, state, request).await?.into_response())
    }

    #[wrap_tool]
    async fn around_tool<S>(
        &self,
        ctx: &mut RunContext,
        state: &S,
        call: ToolCall,
        next: ToolHandler<'_, S>,
    ) -> Result<ToolResult> {
        Ok(next.run(ctx, state, call).await?.into_result())
    }

    fn label(&self) -> &T {
        &self.label
    }
}

#[before_tool(name = "audit")]
fn audit(call: &ToolCall) -> Result<()> {
    let _ = call;
    Ok(())
}

fn main() {
    let cache = Cache {
        hits: AtomicU64::new(0),
        label: "main",
    };
    assert_eq!(*cache.label(), "main");
    assert_eq!(<Cache<&str>>::NAME, "cache");
    assert_eq!(<Cache<&str>>::AFTER, ["audit"]);
    assert_eq!(<Cache<&str>>::BEFORE_IF_PRESENT, ["logging"]);
    let doc = <Cache<&str>>::DOC.unwrap();
    assert_eq!(doc.config_type, Some("cache"));
    let stack: MiddlewareStack<()> = MiddlewareStack::empty()
        .with(Audit)
        .and_then(|s| s.with(cache))
        .unwrap();
    assert_eq!(stack.names(), ["audit", "cache"]);
}

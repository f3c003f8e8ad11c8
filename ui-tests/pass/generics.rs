//! Generic state and context, with bounds inline and in where clauses; a
//! concrete type pins the impl.

use tinyagents::prelude::*;

trait Named {
    fn name(&self) -> &str;
}

struct App;

impl Named for App {
    fn name(&self) -> &str {
        "app"
    }
}

#[before_model]
async fn named_state<S: Named>(state: &S, request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("app", state.name().to_owned());
    Ok(())
}

#[after_model]
fn any_context<C>(ctx: &mut RunContext<C>, response: &mut ModelResponse) -> Result<()>
where
    C: Clone,
{
    let _ = (ctx.context().clone(), response);
    Ok(())
}

#[wrap_tool]
async fn generic_wrap<S, C>(
    ctx: &mut RunContext<C>,
    state: &S,
    call: ToolCall,
    next: ToolHandler<'_, S, C>,
) -> Result<MiddlewareToolOutcome> {
    next.run(ctx, state, call).await
}

#[before_tool]
fn pinned(state: &App, ctx: &mut RunContext<u64>) -> Result<()> {
    let _ = (state.name(), ctx.context());
    Ok(())
}

#[before_agent]
fn with_lifetime<'a>(state: &'a App) -> Result<()> {
    let _ = state;
    Ok(())
}

fn main() {
    let _: MiddlewareStack<App, u64> = MiddlewareStack::new()
        .with(NamedState)
        .and_then(|s| s.with(AnyContext))
        .and_then(|s| s.with(GenericWrap))
        .and_then(|s| s.with(Pinned))
        .and_then(|s| s.with(WithLifetime))
        .unwrap();
    let _: MiddlewareStack<(), String> = MiddlewareStack::new()
        .with(AnyContext)
        .and_then(|s| s.with(GenericWrap))
        .unwrap();
}

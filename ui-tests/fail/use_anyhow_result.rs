// `use anyhow::Result;` shadows tinyagents's `Result`: the bare `Result<()>`
// looks right, but its error type is not `TinyAgentsError`.
use tinyagents::prelude::*;

mod anyhow {
    pub type Result<T> = std::result::Result<T, String>;
}
use anyhow::Result;

#[before_model]
async fn add_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

#[after_model]
fn count(response: &mut ModelResponse) -> Result<()> {
    response.usage.output_tokens += 0;
    Ok(())
}

#[wrap_model]
async fn pass_through<S, C>(
    ctx: &mut RunContext<C>,
    state: &S,
    request: ModelRequest,
    next: ModelHandler<'_, S, C>,
) -> Result<ModelResponse> {
    next.run(ctx, state, request).await.map_err(|e| e.to_string())?;
    Err("unreachable".into())
}

fn main() {}

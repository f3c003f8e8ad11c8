// `&mut T` run state in hooks that run concurrently (`after_tool`) or around other hooks (a wrap).
use tinyagents::prelude::*;

#[derive(Default)]
struct Counts {
    results: u32,
}

#[derive(Default)]
struct Counter;

#[middleware(run_state = Counts)]
impl Counter {
    #[after_tool]
    fn count(&self, counts: &mut Counts, result: &mut ToolResult) -> Result<()> {
        let _ = result;
        counts.results += 1;
        Ok(())
    }

    #[wrap_model]
    async fn around(
        &self,
        ctx: &mut RunContext,
        counts: &mut Counts,
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<ModelResponse> {
        counts.results += 0;
        next.run(ctx, &(), request).await.map(|o| o.into_response())
    }
}

fn main() {}

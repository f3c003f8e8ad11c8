// Typed per-run state: `&mut T` in the hooks the loop runs one at a time,
// `&RunState<T>` in the others, on an impl block and on a free fn.
use std::collections::HashMap;
use tinyagents::prelude::*;

#[derive(Default)]
struct Seen {
    model_calls: u32,
    results: Vec<String>,
}

#[derive(Default)]
struct Watch;

#[middleware(name = "watch", run_state = Seen)]
impl Watch {
    #[before_model]
    async fn model(&self, ctx: &mut RunContext, seen: &mut Seen, request: &mut ModelRequest) -> Result<()> {
        let _ = (ctx, request);
        seen.model_calls += 1;
        Ok(())
    }

    #[after_tool]
    fn result(&self, seen: &RunState<Seen>, result: &mut ToolResult) -> Result<()> {
        seen.lock()?.results.push(result.call_id.clone());
        Ok(())
    }

    #[wrap_tool]
    async fn around(&self, ctx: &mut RunContext, seen: &RunState<Seen>, call: ToolCall, next: ToolHandler<'_, ()>) -> Result<ToolResult> {
        let before = seen.lock()?.results.len();
        let result = next.run(ctx, &(), call).await?.into_result();
        let _ = before;
        Ok(result)
    }

    #[on_model_delta]
    fn delta(&self, seen: &mut Seen, delta: &mut ModelDelta) -> Result<()> {
        let _ = (seen, delta);
        Ok(())
    }
}

/// A generic type reads whole.
#[after_model(run_state = HashMap<String, u32>)]
fn tally(counts: &mut HashMap<String, u32>, response: &mut ModelResponse) -> Result<()> {
    *counts.entry(response.message.text().into_owned()).or_default() += 1;
    Ok(())
}

fn main() {
    let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(Watch).unwrap().with(Tally).unwrap();
    assert_eq!(stack.names(), ["watch", "Tally"]);
    assert!(stack.infos().all(|i| i.run_state));
}

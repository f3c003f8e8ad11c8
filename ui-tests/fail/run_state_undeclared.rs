// A hook takes `&mut T` per-run state, and the middleware declares no `run_state`.
use tinyagents::prelude::*;

#[derive(Default)]
struct Counts {
    calls: u32,
}

#[before_model]
fn count(counts: &mut Counts, request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    counts.calls += 1;
    Ok(())
}

fn main() {}

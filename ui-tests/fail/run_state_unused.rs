// `run_state` declared, and no hook takes it.
use tinyagents::prelude::*;

#[derive(Default)]
struct Counts {
    calls: u32,
}

#[before_model(run_state = Counts)]
fn count(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}

// A hook takes run state of another type than the declared `run_state`.
use tinyagents::prelude::*;

#[derive(Default)]
struct Counts {
    calls: u32,
}

#[derive(Default)]
struct Other;

#[derive(Default)]
struct Counter;

#[middleware(run_state = Counts)]
impl Counter {
    #[before_model]
    fn count(&self, counts: &mut Counts) -> Result<()> {
        counts.calls += 1;
        Ok(())
    }

    #[after_tool]
    fn seen(&self, other: &RunState<Other>, result: &mut ToolResult) -> Result<()> {
        let _ = (other, result);
        Ok(())
    }
}

fn main() {}

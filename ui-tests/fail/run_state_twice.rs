// `run_state` given twice: a middleware has one run state type.
use tinyagents::prelude::*;

#[derive(Default)]
struct Counts {
    calls: u32,
}

#[derive(Default)]
struct Counter;

#[middleware(run_state = Counts, run_state = u32)]
impl Counter {
    #[before_model]
    fn count(&self, counts: &mut Counts) -> Result<()> {
        counts.calls += 1;
        Ok(())
    }
}

fn main() {}

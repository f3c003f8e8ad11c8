// `&dyn Trait` as the state: the state is one sized type.
use tinyagents::prelude::*;

trait Clock {
    fn now(&self) -> String;
}

#[before_model]
async fn add_date(clock: &dyn Clock, request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", clock.now());
    Ok(())
}

fn main() {}

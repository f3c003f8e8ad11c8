// A fn implements one hook: a second hook attribute is refused.
use tinyagents::prelude::*;

#[before_model]
#[before_model_stream]
async fn add_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

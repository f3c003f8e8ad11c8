// The state is lent for one call: `&'static App` cannot be.
use tinyagents::prelude::*;

struct App;

#[before_model]
async fn add_date(state: &'static App, request: &mut ModelRequest) -> Result<()> {
    let _ = state;
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

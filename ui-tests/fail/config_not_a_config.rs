// `config = X` must name a `#[derive(MiddlewareConfig)]` struct.
use tinyagents::prelude::*;

struct Settings;

#[before_model(config = Settings)]
async fn add_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

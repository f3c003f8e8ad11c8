// The state is lent: take `&App`, not `App`.
use tinyagents::prelude::*;

struct App;

#[before_model]
async fn add_date(app: App, request: &mut ModelRequest) -> Result<()> {
    let _ = app;
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

// A hook that takes `&App` makes a middleware for a `MiddlewareStack<App>` only.
use tinyagents::prelude::*;

struct App;

#[before_model]
async fn stamp_date(app: &App, request: &mut ModelRequest) -> Result<()> {
    let _ = app;
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {
    let _ = MiddlewareStack::<()>::empty().with(StampDate);
}

// `.with(stamp_date)` registers the fn; the middleware is the generated `StampDate`.
use tinyagents::prelude::*;

#[before_model]
async fn stamp_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {
    let _ = MiddlewareStack::<()>::empty().with(stamp_date);
}

// `after = [add_date]` names the fn; the middleware type is `AddDate`.
use tinyagents::prelude::*;

#[before_model]
async fn add_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

#[before_model(after = [add_date])]
async fn add_time(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("time", "noon");
    Ok(())
}

fn main() {}

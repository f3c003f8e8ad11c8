// `config = X` with `doc(...)`: one error, on `X`.
use tinyagents::prelude::*;

struct Settings;

#[before_model(config = Settings, doc(summary = "Adds the date."))]
async fn add_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

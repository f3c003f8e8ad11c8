// `Result<(), String>`: the hook's error type is `TinyAgentsError`.
use tinyagents::prelude::*;

#[before_model]
async fn add_date(request: &mut ModelRequest) -> std::result::Result<(), String> {
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

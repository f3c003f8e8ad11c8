// A `Result` of another crate is not the hook's `Result<()>`.
use tinyagents::prelude::*;

mod anyhow {
    pub type Result<T> = std::result::Result<T, String>;
}

#[before_model]
async fn add_date(request: &mut ModelRequest) -> anyhow::Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

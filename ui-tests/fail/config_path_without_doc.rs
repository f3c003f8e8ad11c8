// `config = X` is checked even without `doc(...)`: an undefined type is an error.
use tinyagents::prelude::*;

#[before_model(config = NoSuchConfig)]
async fn add_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

fn main() {}

use tinyagents::prelude::*;

/// Returns the weather.
#[tool]
async fn météo(ville: String) -> Result<String> {
    Ok(ville)
}

fn main() {}

use tinyagents::prelude::*;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    text: String,
}

/// Searches.
#[tool]
async fn search(#[args] query: Query, limit: u32) -> Result<String> {
    Ok(format!("{} {limit}", query.text))
}

fn main() {}

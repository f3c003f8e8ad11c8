use tinyagents::prelude::*;

#[before_model]
async fn describe(request: &mut ModelRequest) -> Result<String> {
    Ok(format!("{} messages", request.messages.len()))
}

fn main() {}

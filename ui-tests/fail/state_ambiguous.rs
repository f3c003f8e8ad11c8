// `&Vec<Message>` is not obviously the state: the DSL asks to declare it.
use tinyagents::prelude::*;

#[before_model]
async fn count(messages: &Vec<Message>, request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("count", messages.len().to_string());
    Ok(())
}

fn main() {}

use tinyagents::prelude::*;

#[before_model]
async fn each<S>(states: &Vec<S>, request: &mut ModelRequest) -> Result<()> {
    let _ = (states, request);
    Ok(())
}

fn main() {}

use tinyagents::prelude::*;

#[on_error]
fn report(error: &mut TinyAgentsError) -> Result<()> {
    let _ = error;
    Ok(())
}

fn main() {}

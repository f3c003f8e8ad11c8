use tinyagents::prelude::*;

#[before_model]
async fn limit<T: Default>(request: &mut ModelRequest) -> Result<()> {
    let _ = (request, T::default());
    Ok(())
}

fn main() {}

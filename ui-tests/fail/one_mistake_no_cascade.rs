use tinyagents::prelude::*;

#[before_model]
async fn tag(request: &mut ModelRequest, n: u32) -> Result<()> {
    let _ = (request, n);
    Ok(())
}

fn main() {
    // the type still exists and is still a middleware: no second error here
    let _: MiddlewareStack<()> = MiddlewareStack::new().with(Tag).unwrap();
}

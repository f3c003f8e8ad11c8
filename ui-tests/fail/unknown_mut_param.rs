use tinyagents::prelude::*;

struct Counter(u32);

#[before_model]
async fn count(counter: &mut Counter) -> Result<()> {
    counter.0 += 1;
    Ok(())
}

fn main() {}

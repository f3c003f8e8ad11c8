use tinyagents::prelude::*;

#[after_model(can_jump_to = [modle, end])]
async fn route(ctx: &mut RunContext) -> Result<()> {
    ctx.flow_mut().jump_to(JumpTarget::Model);
    Ok(())
}

fn main() {}

use tinyagents::prelude::*;

#[after_agent]
async fn done(run: &mut AgentRun) {
    let _ = run;
}

fn main() {}

use tinyagents::prelude::*;

struct Config;
struct Db;

#[before_model]
async fn lookup(config: &Config, db: &Db) -> Result<()> {
    let _ = (config, db);
    Ok(())
}

fn main() {}

use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limit")]
struct Limit(u32);

fn main() {}

use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "mode")]
enum Mode {
    Fast,
    Slow,
}

fn main() {}

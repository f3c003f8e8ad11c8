use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
struct LimitsConfig {
    max_steps: u32,
}

fn main() {}

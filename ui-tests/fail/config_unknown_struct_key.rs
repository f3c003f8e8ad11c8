use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits", bulds = Limits)]
struct LimitsConfig {
    max_steps: u32,
}

fn main() {}

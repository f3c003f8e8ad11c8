use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits")]
struct LimitsConfig {
    #[config(default = "ten")]
    max_steps: u32,
}

fn main() {}

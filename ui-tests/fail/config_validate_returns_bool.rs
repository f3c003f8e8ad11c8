// `validate = f`: `f` returns `Result<(), String>`, not `bool`.
use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "window", validate = check)]
struct WindowConfig {
    #[config(default = 1)]
    min: u32,
    #[config(default = 10)]
    max: u32,
}

fn check(config: &WindowConfig) -> bool {
    config.min <= config.max
}

fn main() {}

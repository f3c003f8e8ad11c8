use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "mode")]
struct ModeConfig {
    #[config(default = "fast", one_of = ["fast", 2])]
    mode: String,
}

fn main() {}

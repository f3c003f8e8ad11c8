use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "switch")]
struct SwitchConfig {
    enabled: bool,
}

fn main() {}

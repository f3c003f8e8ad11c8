use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits")]
struct LimitsConfig {
    #[config(default = 3, range = 10..=1)]
    retries: u32,
}

fn main() {}

// Bounds are `range = a..=b`, not `min`/`max`.
use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits")]
struct LimitsConfig {
    #[config(default = 3, min = 1, max = 10)]
    retries: u32,
}

fn main() {}

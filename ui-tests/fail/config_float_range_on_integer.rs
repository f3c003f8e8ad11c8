// A `range` of floats on an integer field (and the reverse).
use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits")]
struct LimitsConfig {
    #[config(default = 3, range = 0.5..=10.0)]
    retries: u32,
    #[config(default = 0.5, range = 0..=1)]
    ratio: f64,
    #[config(default = 1.0, one_of = [1, 2])]
    scale: f64,
}

fn main() {}

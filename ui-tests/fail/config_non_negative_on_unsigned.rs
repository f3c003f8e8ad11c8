use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits")]
struct LimitsConfig {
    #[config(default = 3, non_negative)]
    retries: u32,
}

fn main() {}

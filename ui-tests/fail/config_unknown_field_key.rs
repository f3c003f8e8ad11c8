use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits")]
struct LimitsConfig {
    #[config(defualt = 3)]
    max_steps: u32,
}

fn main() {}

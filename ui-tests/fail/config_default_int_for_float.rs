use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "sampling")]
struct SamplingConfig {
    #[config(default = 1)]
    temperature: f32,
}

fn main() {}

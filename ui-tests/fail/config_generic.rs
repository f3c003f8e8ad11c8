use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "limits")]
struct LimitsConfig<T> {
    max: T,
}

fn main() {}

use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "paths")]
struct PathsConfig {
    /// A string default on a type that is not a `ConfigEnum`.
    #[config(default = "a")]
    paths: Vec<String>,
}

fn main() {}

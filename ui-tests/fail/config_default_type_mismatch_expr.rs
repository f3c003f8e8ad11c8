use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "tags")]
struct TagsConfig {
    #[config(default = Vec::<u32>::new())]
    tags: Vec<String>,
}

fn main() {}

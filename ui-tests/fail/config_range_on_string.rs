use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "greeting")]
struct GreetingConfig {
    #[config(range = 1..=10)]
    text: String,
}

fn main() {}

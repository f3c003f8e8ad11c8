// A config field owns its value: `String`, not `&'static str`.
use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "greeter")]
struct GreeterConfig {
    #[config(default = "hello")]
    greeting: &'static str,
}

fn main() {}

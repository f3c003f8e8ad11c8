// A config with no options is `struct X {}`, not a unit struct.
use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "noop")]
struct NoopConfig;

fn main() {}

// A config field's type must be readable from a table (`Deserialize`).
use tinyagents::MiddlewareConfig;

struct Endpoint {
    _url: String,
}

#[derive(MiddlewareConfig)]
#[config(type = "fetcher")]
struct FetcherConfig {
    endpoint: Endpoint,
}

fn main() {}

// `rename` and `alias` are read; other serde attributes are refused.
use tinyagents::MiddlewareConfig;

#[derive(MiddlewareConfig)]
#[config(type = "fetcher")]
struct FetcherConfig {
    #[serde(default)]
    retries: u32,
}

fn main() {}

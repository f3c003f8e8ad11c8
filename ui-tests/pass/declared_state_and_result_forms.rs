// The forms the stricter checks of #21 still accept: a std data type as the
// state when the parameter is named `state` (or `…_state`), `()` as the
// state, and the hook `Result` written any way that is tinyagents's.
use tinyagents::prelude::*;
use tinyagents::config::MiddlewareConfig as _;
use tinyagents::MiddlewareConfig;

#[before_model]
async fn count(state: &Vec<String>, request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("count", state.len().to_string());
    Ok(())
}

#[before_model]
fn budget(app_state: &u32, request: &mut ModelRequest) -> tinyagents::Result<()> {
    request.set_volatile("budget", app_state.to_string());
    Ok(())
}

#[after_model]
fn unit(state: &(), response: &ModelResponse) -> std::result::Result<(), TinyAgentsError> {
    let _ = (state, response);
    Ok(())
}

/// A middleware with no options: `{}` is its config.
#[derive(MiddlewareConfig)]
#[config(type = "noop")]
struct NoopConfig {}

#[derive(MiddlewareConfig)]
#[config(type = "fetcher")]
struct FetcherConfig {
    #[serde(rename = "max-retries", alias = "retries")]
    #[config(default = 3, range = 1..=10)]
    max_retries: u32,
}

fn main() {
    let _: MiddlewareStack<Vec<String>> = MiddlewareStack::empty().with(Count).unwrap();
    let _: MiddlewareStack<u32> = MiddlewareStack::empty().with(Budget).unwrap();
    let _: MiddlewareStack<()> = MiddlewareStack::empty().with(Unit).unwrap();
    let _ = NoopConfig::defaults().unwrap();
    let c: FetcherConfig = tinyagents::config::from_toml_str("retries = 4").unwrap();
    assert_eq!(c.max_retries, 4);
    assert_eq!(FetcherConfig::FIELDS[0].name, "max-retries");
}

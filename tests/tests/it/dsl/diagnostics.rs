//! Issue #21 end to end: what the DSL accepts now that it diagnoses more.
//! Ordering names written in a DSL attribute are checked at registration
//! (an unknown required name is a `Config` error with a did-you-mean; the
//! `_if_present` forms are the explicit optional spelling), and config
//! fields read `#[serde(rename)]`/`#[serde(alias)]` keys, shown in the docs.

use serde_json::json;
use tinyagents::config::{from_toml_str, from_value, MiddlewareConfig};
use tinyagents::prelude::*;
use tinyagents::MiddlewareConfig;

#[before_model(name = "stamp_date")]
async fn stamp_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Monday");
    Ok(())
}

/// Misspells the middleware it must follow.
#[before_model(name = "stamp_time", after = ["stamp_dat"])]
async fn stamp_time(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("time", "noon");
    Ok(())
}

/// Orders itself after `stamp_date` only when it is registered.
#[before_model(name = "stamp_zone", after_if_present = ["stamp_date"])]
async fn stamp_zone(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("zone", "UTC");
    Ok(())
}

#[test]
fn dsl_a_misspelled_required_order_name_is_a_config_error_with_did_you_mean() {
    let Err(err) = MiddlewareStack::<()>::empty()
        .with(StampDate)
        .and_then(|s| s.with(StampTime))
    else {
        panic!("`after = [\"stamp_dat\"]` names no registered middleware: registration must fail");
    };
    let msg = err.to_string();
    assert!(matches!(err, TinyAgentsError::Config { .. }), "{err:?}");
    assert!(msg.contains("`stamp_time`") && msg.contains("`stamp_dat`"), "{msg}");
    assert!(msg.contains("did you mean `stamp_date`?"), "{msg}");
    assert!(
        msg.contains("after_if_present"),
        "the error names the optional form: {msg}"
    );
}

#[test]
fn dsl_an_if_present_order_name_is_optional_and_orders_when_present() {
    let alone = MiddlewareStack::<()>::empty()
        .with(StampZone)
        .expect("optional name absent");
    assert_eq!(alone.names(), ["stamp_zone"]);
    let both = MiddlewareStack::<()>::empty()
        .with(StampZone)
        .and_then(|s| s.with(StampDate))
        .expect("optional name present");
    assert_eq!(both.names(), ["stamp_date", "stamp_zone"]);
}

/// A config whose TOML keys have dashes.
#[allow(dead_code)] // read through its table
#[derive(Debug, MiddlewareConfig)]
#[config(type = "fetcher")]
struct FetcherConfig {
    /// How many attempts.
    #[serde(rename = "max-retries", alias = "max_retries")]
    #[config(default = 3, range = 1..=10)]
    max_retries: u32,
    /// Where to fetch from.
    #[serde(rename = "base-url")]
    base_url: String,
}

#[test]
fn dsl_config_fields_read_their_serde_rename_and_alias() {
    let c: FetcherConfig = from_toml_str("max-retries = 5\nbase-url = \"https://x\"").unwrap();
    assert_eq!((c.max_retries, c.base_url.as_str()), (5, "https://x"));
    let c: FetcherConfig = from_value(&json!({"max_retries": 7, "base-url": "u"}), "").unwrap();
    assert_eq!(c.max_retries, 7, "the alias is read");
    // The Rust name is not a key when the field is renamed.
    let err = from_value::<FetcherConfig>(&json!({"base_url": "u", "base-url": "u"}), "m").unwrap_err();
    assert!(err.to_string().contains("m.base_url"), "{err}");
    // A rule's error names the key the table wrote.
    let err = from_value::<FetcherConfig>(&json!({"max_retries": 0, "base-url": "u"}), "m").unwrap_err();
    assert!(err.to_string().contains("max_retries"), "{err}");
    // Both spellings at once is an error.
    let err =
        from_value::<FetcherConfig>(&json!({"max_retries": 2, "max-retries": 2, "base-url": "u"}), "m").unwrap_err();
    assert!(err.to_string().contains("name the same key"), "{err}");
}

#[test]
fn dsl_config_docs_show_the_renamed_key_and_its_aliases() {
    let fields = FetcherConfig::FIELDS;
    assert_eq!(fields[0].name, "max-retries");
    assert_eq!(fields[0].rules, "alias = \"max_retries\", range = 1..=10");
    assert_eq!(fields[1].name, "base-url");
}

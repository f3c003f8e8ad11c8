//! Every `#[derive(MiddlewareConfig)]` attribute.

use tinyagents::config::{from_toml_str, BuildMiddleware, ConfigViolation, MiddlewareConfig};
use tinyagents::prelude::*;
use tinyagents::MiddlewareConfig;

#[derive(Debug, MiddlewareConfig)]
#[config(type = "everything", builds = Everything, validate = check)]
struct EverythingConfig {
    /// `default` and a closed `range`.
    #[config(default = 5, range = 1..=10)]
    steps: u32,
    /// An open range, `finite` and `non_negative` on a float.
    #[config(default = 0.5, range = 0.0.., finite, non_negative)]
    ratio: f64,
    /// A negative default on a signed field.
    #[config(default = -1, range = -10..=10, non_negative)]
    offset: i32,
    /// `one_of` strings.
    #[config(default = "a", one_of = ["a", "b"])]
    mode: String,
    /// `one_of` numbers on an optional field.
    #[config(one_of = [1, 2])]
    level: Option<u8>,
    /// A default expression.
    #[config(default = vec!["x".to_owned()])]
    tags: Vec<String>,
    /// A required key.
    owner: String,
    /// A bool.
    #[config(default = true)]
    loud: bool,
    /// A raw identifier key.
    #[config(default = 1)]
    r#loop: u8,
}

fn check(c: &EverythingConfig) -> Result<(), ConfigViolation> {
    if c.steps > 8 && c.loud {
        return Err(ConfigViolation::new("steps", "at most 8 when loud"));
    }
    Ok(())
}

#[derive(Debug, MiddlewareConfig)]
#[config(type = "empty")]
struct EmptyConfig {}

struct Everything(EverythingConfig);

impl From<EverythingConfig> for Everything {
    fn from(c: EverythingConfig) -> Self {
        Self(c)
    }
}

#[middleware(config = EverythingConfig)]
impl Everything {
    #[before_model]
    fn noop(&self) -> Result<()> {
        Ok(())
    }
}

fn main() {
    let err = from_toml_str::<EverythingConfig>("owner = \"x\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "offset"); // -1 is negative
    let c: EverythingConfig = from_toml_str("owner = \"x\"\noffset = 2\nloop = 3").unwrap();
    assert_eq!((c.r#loop, c.tags.len()), (3, 1));
    let m = c.build();
    assert_eq!(m.0.mode, "a");
    assert_eq!(EverythingConfig::FIELDS.len(), 9);
    assert!(EmptyConfig::defaults().is_ok());
    let _: MiddlewareStack<()> = MiddlewareStack::new().with(m).unwrap();
}

use tinyagents::{config_enum, MiddlewareConfig};

config_enum! {
    /// How loud.
    pub enum Volume {
        /// Quiet.
        Low = "low",
        /// Loud.
        High = "high",
    }
}

#[derive(MiddlewareConfig)]
#[config(type = "speaker")]
struct SpeakerConfig {
    /// How loud it speaks: the default names no variant.
    #[config(default = "loud")]
    volume: Volume,
}

fn main() {}

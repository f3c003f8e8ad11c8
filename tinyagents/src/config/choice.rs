//! [`ConfigEnum`]: a config field that takes one of a fixed set of names,
//! read straight into an enum, and [`config_enum!`](crate::config_enum), which declares one.

use super::suggest::did_you_mean;

/// An enum a config field holds directly: each variant has the name a
/// config file writes for it (`exit_behavior = "end"`).
///
/// A `#[derive(MiddlewareConfig)]` field of such a type with a string
/// default (`#[config(default = "end")]`) is read into the enum: a name
/// that is not a variant is a located error listing the names, with a
/// did-you-mean; the default is checked against the names at compile
/// time; the docs table lists the names. Declare one with
/// [`config_enum!`](crate::config_enum).
///
/// ```
/// use tinyagents::config::{from_toml_str, ConfigEnum, MiddlewareConfig};
/// use tinyagents::{config_enum, MiddlewareConfig};
///
/// config_enum! {
///     /// How loud.
///     pub enum Volume {
///         /// Quiet.
///         Low = "low",
///         /// Loud.
///         High = "high",
///     }
/// }
///
/// #[derive(Debug, MiddlewareConfig)]
/// #[config(type = "speaker")]
/// struct SpeakerConfig {
///     /// How loud it speaks.
///     #[config(default = "low")]
///     volume: Volume,
/// }
///
/// assert_eq!(from_toml_str::<SpeakerConfig>("").unwrap().volume, Volume::Low);
/// assert_eq!(from_toml_str::<SpeakerConfig>("volume = \"high\"").unwrap().volume, Volume::High);
/// let err = from_toml_str::<SpeakerConfig>("volume = \"hihg\"").unwrap_err();
/// assert_eq!(err.to_string(), "invalid configuration: `volume` = \"hihg\": must be one of \"low\", \"high\"; did you mean `high`?");
/// assert_eq!(SpeakerConfig::FIELDS[0].choices, ["low", "high"]);
/// assert_eq!(Volume::High.name(), "high");
/// ```
pub trait ConfigEnum: Copy + PartialEq + Send + Sync + 'static {
    /// Every variant, in declaration order.
    const ALL: &'static [Self];
    /// The name of each variant in a config file, in the same order.
    const NAMES: &'static [&'static str];

    /// This variant's name in a config file.
    fn name(self) -> &'static str;

    /// The variant `name` names, if any.
    fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| Self::ALL[i])
    }

    /// The rule a name that is not a variant breaks: the names, and the
    /// closest one to `given` when there is a close one.
    fn rule(given: &str) -> String {
        let names = Self::NAMES
            .iter()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "must be one of {names}{}",
            did_you_mean(given, Self::NAMES.iter().copied())
        )
    }
}

/// The index of `name` in `names`, at compile time (a missing name stops
/// the build): the derive reads a `ConfigEnum` field's default through it.
pub const fn choice_index(names: &[&str], name: &str) -> usize {
    let mut i = 0;
    while i < names.len() {
        if str_eq(names[i], name) {
            return i;
        }
        i += 1;
    }
    panic!("the default of a `ConfigEnum` field must be one of the enum's names (see its `NAMES`)")
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Declares a [`ConfigEnum`]: a `Copy` enum whose variants each carry the
/// name a config file writes, with `Serialize`/`Deserialize` as that name
/// (an unknown name is an error listing the names, with a did-you-mean),
/// `Display`, and `FromStr`. See [`ConfigEnum`] for an example.
#[macro_export]
macro_rules! config_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $($(#[$vmeta])* $variant),+
        }

        impl $crate::config::ConfigEnum for $name {
            const ALL: &'static [Self] = &[$(Self::$variant),+];
            const NAMES: &'static [&'static str] = &[$($text),+];

            fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $text),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::config::ConfigEnum::name(*self))
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::string::String;

            /// The variant named `s`; the error is the rule it breaks.
            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                <Self as $crate::config::ConfigEnum>::from_name(s)
                    .ok_or_else(|| <Self as $crate::config::ConfigEnum>::rule(s))
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str($crate::config::ConfigEnum::name(*self))
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::std::result::Result<Self, D::Error> {
                let s = <::std::string::String as $crate::__private::serde::Deserialize>::deserialize(deserializer)?;
                s.parse().map_err(<D::Error as $crate::__private::serde::de::Error>::custom)
            }
        }
    };
}

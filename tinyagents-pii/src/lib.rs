//! PII and secret detection for text, JSON documents and streams: the engine
//! under tinyagents' `pii` built-in, with no agent runtime in it.
//!
//! * [`scan`] finds every value of every built-in type in a text;
//!   [`Engine`] is a chosen set of detectors ([`builtin`] types and
//!   [`custom`] patterns) and a [`Strategy`] to [`redact`](Engine::redact)
//!   with.
//! * Detection reads a *normalised* copy of the text (fullwidth forms folded
//!   to ASCII, every decimal digit of the Unicode database to its ASCII
//!   digit, other compatibility characters to what they stand for by NFKC:
//!   mathematical alphanumerics, dot leaders, ligatures; separators to a
//!   space, format characters and other invisible marks dropped, JSON
//!   escapes decoded), and each match is mapped back to
//!   the span of the original text it came from.
//! * In a text that is a JSON document, a value inside a number turns the
//!   number into a string when it is replaced, so the document stays valid;
//!   values of phone- and secret-named keys are read as such.
//! * [`finder`] makes a detector of a list of known values (the secrets a
//!   process holds) rather than a pattern.
//! * [`StreamBuffer`] makes redacting a text cut into pieces (a model's
//!   streamed reply) equal to redacting the whole text.
//!
//! ```
//! use tinyagents_pii::{builtin, scan, Engine, Strategy};
//!
//! let found = scan("mail ann@example.com or call +1 415 555 0100");
//! let kinds: Vec<&str> = found.iter().map(|f| f.kind.as_str()).collect();
//! assert_eq!(kinds, ["email", "phone"]);
//! assert_eq!(&"mail ann@example.com"[found[0].start..found[0].end], "ann@example.com");
//!
//! let engine = Engine::new(builtin("email").unwrap(), Strategy::Redact);
//! let (text, counts) = engine.redact("mail ann@example.com").unwrap();
//! assert_eq!(text, "mail [REDACTED_EMAIL]");
//! assert_eq!(counts["email"], 1);
//! ```

mod detect;
mod gate;
mod strategy;

pub use detect::{
    builtin, custom, finder, is_phone_key, is_secret_key, keyed_phone, Detector, Digest, Engine, FindFn, Hold,
    PiiCounts, Stop, StreamBuffer, BUILTIN_MAX_CHARS, KEYED_PHONE_DIGITS, KEYED_TEXT_BYTES, PHONE_KEY_WORDS, PII_TYPES,
};
pub use strategy::Strategy;

/// One value found in a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Its type: one of [`PII_TYPES`] or a custom detector's name.
    pub kind: String,
    /// Where it starts, in bytes of the text given.
    pub start: usize,
    /// Where it ends (exclusive).
    pub end: usize,
}

/// Every value of every built-in type ([`PII_TYPES`]) in `text`, leftmost
/// first. See [`Engine::findings`].
pub fn scan(text: &str) -> Vec<Finding> {
    static ALL: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let detectors = PII_TYPES
            .iter()
            .flat_map(|t| builtin(t).expect("every listed type is a built-in detector"))
            .collect();
        Engine::new(detectors, Strategy::Redact)
    })
    .findings(text)
}

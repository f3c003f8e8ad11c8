//! What to do with a detected value.

/// What to do with a detected value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Strategy {
    /// Refuse the text: [`Engine::redact`](crate::Engine::redact) answers
    /// `Err` with the counts only.
    Block,
    /// Replace the value with `[REDACTED_TYPE]`.
    Redact,
    /// Keep the last four letters or digits, never more than a third of them (an
    /// email keeps its first letter and domain), star the rest.
    Mask,
    /// Replace the value with `<type_hash:…>`, a stable 64-bit FNV-1a pseudonym (not a cryptographic hash).
    Hash,
}

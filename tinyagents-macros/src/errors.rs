//! [`Errors`]: accumulate every error of an item, then report them together.

use std::fmt::Display;

use proc_macro2::TokenStream;
use quote::ToTokens;

/// Collects errors while an item is validated, so that all of them are
/// reported at once (one `compile_error!` each) instead of only the first.
#[derive(Default)]
pub(crate) struct Errors {
    first: Option<syn::Error>,
    count: usize,
}

impl Errors {
    /// Records an error.
    pub(crate) fn push(&mut self, error: syn::Error) {
        self.count += 1;
        match &mut self.first {
            Some(first) => first.combine(error),
            None => self.first = Some(error),
        }
    }

    /// Records an error spanned on `tokens`.
    pub(crate) fn at(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    /// Records an error at `span`.
    pub(crate) fn at_span(&mut self, span: proc_macro2::Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    /// Records the error of a `syn` result and returns its value, if any.
    pub(crate) fn ok<T>(&mut self, result: syn::Result<T>) -> Option<T> {
        result.map_err(|e| self.push(e)).ok()
    }

    /// How many errors were recorded.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Whether nothing was recorded.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// The recorded errors as `compile_error!` invocations (empty when none).
    pub(crate) fn into_compile_errors(self) -> TokenStream {
        self.first.map(|e| e.to_compile_error()).unwrap_or_default()
    }
}

/// The closest of `candidates` to `word`, when it is close enough to be a likely typo.
pub(crate) fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1) + 1 && *d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// " — did you mean `x`?" when there is a near candidate, else "".
pub(crate) fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    nearest(word, candidates)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

/// `a, b, c` with each name in backticks.
pub(crate) fn backticked(names: &[&str]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

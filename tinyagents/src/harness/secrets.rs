//! [`Redactor`]: every secret this process knows, and the one place text
//! passes through before it leaves the provider and store layers.
//!
//! A secret is learnt where it enters: an API key or a configured header of a
//! provider's `ProviderConfig` (features `openai`, `anthropic`; its
//! `with_*` methods and its environment), a provider's base URL (its user
//! info and query values), a store URL ([`StoreUrl::parse`](crate::store::StoreUrl::parse),
//! the stores' `connect`). Every error the providers and stores return, the
//! `Debug` of their configuration, and what the `tinyagents` command prints
//! (its `--json` lines, its messages, its log) pass through
//! [`Redactor::redact`]; a server that echoes a key back (`Incorrect API key
//! provided: sk-…`) has it masked.
//!
//! What is masked: every run of [`Redactor::FRAGMENT`] bytes or more of a
//! known secret, so a whole key and any long piece of one become
//! [`Redactor::MASK`]; a secret shorter than that is masked where it appears
//! whole. A short prefix and suffix (`sk-abc***xyz`, as providers print a key
//! they refuse) pass: they do not reveal the key. A secret shorter than
//! [`Redactor::MIN_SECRET`] bytes is not learnt (masking it would mask
//! ordinary words); in a URL it is still hidden by [`mask_url`].
//!
//! ```
//! use tinyagents::harness::secrets::redactor;
//!
//! redactor().add("sk-live-0123456789abcdefghij");
//! let text = "Incorrect API key provided: sk-live-0123456789abcdefghij.";
//! assert_eq!(redactor().redact(text), "Incorrect API key provided: ***.");
//! // a long piece of it is masked too; a short prefix and suffix are not
//! assert_eq!(redactor().redact("key sk-live-0123456789ab…"), "key ***…");
//! assert_eq!(redactor().redact("key sk-liv***hij"), "key sk-liv***hij");
//! ```

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::{OnceLock, PoisonError, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};

use crate::harness::error::TinyAgentsError;

/// The secrets of this process and the matcher built from them.
///
/// There is one, [`redactor()`]; secrets are only ever added (a key a
/// configuration held once may still sit in a log line or a clone).
pub struct Redactor {
    state: RwLock<State>,
}

#[derive(Default)]
struct State {
    secrets: BTreeSet<String>,
    /// Every secret of at most [`Redactor::FRAGMENT`] bytes, and every
    /// [`Redactor::FRAGMENT`]-byte window of the longer ones; `None` while
    /// no secret is known.
    matcher: Option<AhoCorasick>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.state.read().unwrap_or_else(PoisonError::into_inner).secrets.len();
        f.debug_struct("Redactor").field("secrets", &n).finish_non_exhaustive()
    }
}

/// The process's one [`Redactor`].
pub fn redactor() -> &'static Redactor {
    static ONE: OnceLock<Redactor> = OnceLock::new();
    ONE.get_or_init(Redactor::new)
}

impl Redactor {
    /// What a masked run of secret bytes becomes.
    pub const MASK: &'static str = "***";
    /// The shortest run of a secret's bytes that is masked on its own: any
    /// 12 bytes in a row of a known secret are masked wherever they appear.
    pub const FRAGMENT: usize = 12;
    /// The shortest secret learnt, in bytes.
    pub const MIN_SECRET: usize = 4;

    fn new() -> Self {
        Self {
            state: RwLock::new(State::default()),
        }
    }

    /// Learns `secret` (an API key, a password, a token), and its
    /// percent-decoded form when it differs. Surrounding white space is not
    /// part of it; a secret shorter than [`MIN_SECRET`](Self::MIN_SECRET)
    /// bytes is not learnt.
    pub fn add(&self, secret: &str) {
        let secret = secret.trim();
        let decoded = percent_encoding::percent_decode_str(secret).decode_utf8_lossy();
        let forms: Vec<&str> = if decoded == secret {
            vec![secret]
        } else {
            vec![secret, decoded.as_ref()]
        };
        let forms: Vec<&str> = forms.into_iter().filter(|s| s.len() >= Self::MIN_SECRET).collect();
        if forms.is_empty() {
            return;
        }
        {
            let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
            if forms.iter().all(|s| state.secrets.contains(*s)) {
                return;
            }
        }
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        for s in forms {
            state.secrets.insert(s.to_owned());
        }
        state.matcher = build(&state.secrets);
    }

    /// Whether a header of this name carries a credential: `Authorization`,
    /// `Proxy-Authorization`, `Cookie`, and every name holding `key`, `token`,
    /// `secret`, `auth`, `pass`, `credential`, `session` or `signature`
    /// (`api-key`, `x-api-key`, `x-goog-api-key`, `x-auth-token`), in any
    /// case. A header named otherwise (`OpenAI-Organization`,
    /// `anthropic-beta`, a gateway's routing header) is not a secret: learning
    /// its value would mask ordinary words in every error. Send a credential
    /// under another name with `ProviderConfig::with_secret_header`.
    ///
    /// ```
    /// use tinyagents::harness::secrets::Redactor;
    ///
    /// assert!(Redactor::is_credential_header("X-API-Key"));
    /// assert!(Redactor::is_credential_header("authorization"));
    /// assert!(!Redactor::is_credential_header("anthropic-beta"));
    /// assert!(!Redactor::is_credential_header("x-conversation-id"));
    /// ```
    pub fn is_credential_header(name: &str) -> bool {
        const WORDS: [&str; 9] = [
            "key",
            "token",
            "secret",
            "auth",
            "pass",
            "credential",
            "cookie",
            "session",
            "signature",
        ];
        let name = name.to_ascii_lowercase();
        WORDS.iter().any(|w| name.contains(w))
    }

    /// Learns a header value sent as a credential: the whole value, and the
    /// credential after an auth scheme (`Bearer sk-…`, `Basic …`).
    pub fn add_header_value(&self, value: &str) {
        self.add(value);
        if let Some((scheme, credential)) = value.trim().split_once(' ')
            && !scheme.is_empty()
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            self.add(credential);
        }
    }

    /// Learns the secrets of a URL: the password of its user info (and, in
    /// an `http://` or `https://` URL, a user info without `:`: a token given
    /// as the user name), and the value of every query parameter [`mask_url`]
    /// hides. A user name is not a secret (`postgres://app@db` names a role).
    pub fn add_url(&self, url: &str) {
        let parts = UrlParts::of(url);
        if let Some(userinfo) = parts.userinfo {
            match userinfo.split_once(':') {
                Some((_, password)) => self.add(password),
                None if parts.is_http() => self.add(userinfo),
                None => {}
            }
        }
        for (name, value) in parts.params() {
            if let Some(value) = value.filter(|v| secret_param(name, v)) {
                self.add(value);
            }
        }
    }

    /// `text` with every known secret, and every run of
    /// [`FRAGMENT`](Self::FRAGMENT) bytes or more of one, replaced by
    /// [`MASK`](Self::MASK). Borrowed when nothing was masked.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut ranges = Vec::new();
        self.find(text, &mut ranges);
        if ranges.is_empty() {
            return Cow::Borrowed(text);
        }
        ranges.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut pending: Option<(usize, usize)> = None;
        for (start, end) in ranges {
            match &mut pending {
                Some((_, e)) if start <= *e => *e = (*e).max(end),
                _ => {
                    if let Some((s, e)) = pending.take() {
                        out.push_str(&text[at..s]);
                        out.push_str(Self::MASK);
                        at = e;
                    }
                    pending = Some((start, end));
                }
            }
        }
        if let Some((s, e)) = pending {
            out.push_str(&text[at..s]);
            out.push_str(Self::MASK);
            at = e;
        }
        out.push_str(&text[at..]);
        Cow::Owned(out)
    }

    /// Adds to `out` the byte span of every known secret, and of every run
    /// of [`FRAGMENT`](Self::FRAGMENT) bytes or more of one, in `text`: what
    /// [`redact`](Self::redact) masks (spans may overlap; each starts and
    /// ends at a character boundary). The `pii` middleware's `secret` type
    /// finds the same spans, so a registered secret a tool prints is
    /// replaced before the model sees it.
    ///
    /// ```
    /// use tinyagents::harness::secrets::redactor;
    ///
    /// redactor().add("4f1e9a0c7b2d4e8f9a1b3c5d7e9f0a2b");
    /// let mut spans = Vec::new();
    /// redactor().find("key=4f1e9a0c7b2d4e8f9a1b3c5d7e9f0a2b;", &mut spans);
    /// assert_eq!(spans.iter().map(|s| s.0).min(), Some(4));
    /// assert_eq!(spans.iter().map(|s| s.1).max(), Some(36));
    /// ```
    pub fn find(&self, text: &str, out: &mut Vec<(usize, usize)>) {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let Some(matcher) = &state.matcher else {
            return;
        };
        out.extend(
            matcher
                .find_overlapping_iter(text)
                .map(|m| (floor_char(text, m.start()), ceil_char(text, m.end()))),
        );
    }

    /// Every string of a JSON value [redacted](Self::redact) in place
    /// (object keys too), and every number whose text holds a secret (a
    /// numeric token or PIN) replaced by its redacted text as a string; the
    /// value stays valid JSON.
    pub fn redact_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.redact(s) {
                    *s = clean;
                }
            }
            Value::Number(n) => {
                if let Cow::Owned(clean) = self.redact(&n.to_string()) {
                    *value = Value::String(clean);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (k, mut v) in entries {
                    self.redact_json(&mut v);
                    map.insert(self.redact(&k).into_owned(), v);
                }
            }
            _ => {}
        }
    }

    /// `error` with every text it carries [redacted](Self::redact): the
    /// message and every name or path it holds. A kept cause
    /// ([`source`](std::error::Error::source)) is kept as it is: the
    /// providers keep only causes that carry no URL.
    pub fn redact_error(&self, error: TinyAgentsError) -> TinyAgentsError {
        let r = |s: String| match self.redact(&s) {
            Cow::Owned(clean) => clean,
            Cow::Borrowed(_) => s,
        };
        use TinyAgentsError as E;
        match error {
            E::Validation { message } => E::Validation { message: r(message) },
            E::Config { path, message } => E::Config {
                path: path.map(r),
                message: r(message),
            },
            E::Model {
                message,
                retryable,
                retry_after,
                status,
                source,
            } => E::Model {
                message: r(message),
                retryable,
                retry_after,
                status,
                source,
            },
            E::Tool { tool, message } => E::Tool {
                tool: r(tool),
                message: r(message),
            },
            E::Timeout { what, after } => E::Timeout { what: r(what), after },
            E::RateLimited {
                message,
                retry_after,
                status,
                source,
            } => E::RateLimited {
                message: r(message),
                retry_after,
                status,
                source,
            },
            E::LimitExceeded { limit, message } => E::LimitExceeded {
                limit: r(limit),
                message: r(message),
            },
            E::Interrupted { node, message } => E::Interrupted {
                node: node.map(r),
                message: r(message),
            },
            E::Cancelled { reason } => E::Cancelled { reason: r(reason) },
            E::Conflict { message } => E::Conflict { message: r(message) },
            E::MiddlewarePanic {
                middleware,
                hook,
                message,
            } => E::MiddlewarePanic {
                middleware: r(middleware),
                hook,
                message: r(message),
            },
            E::Middleware { middleware, message } => E::Middleware {
                middleware: r(middleware),
                message: r(message),
            },
        }
    }
}

/// The matcher of `secrets`: each secret of at most [`Redactor::FRAGMENT`]
/// bytes whole, and each [`Redactor::FRAGMENT`]-byte window of the longer ones.
fn build(secrets: &BTreeSet<String>) -> Option<AhoCorasick> {
    let mut patterns: BTreeSet<&[u8]> = BTreeSet::new();
    for s in secrets {
        let bytes = s.as_bytes();
        if bytes.len() <= Redactor::FRAGMENT {
            patterns.insert(bytes);
        } else {
            patterns.extend(bytes.windows(Redactor::FRAGMENT));
        }
    }
    if patterns.is_empty() {
        return None;
    }
    // Standard semantics: every overlapping occurrence is reported, so the
    // windows of one echoed key join into one masked run.
    AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        .build(patterns)
        .ok()
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Whether a URL query parameter carries a secret: its name says so
/// (`key`, `token`, `secret`, `pass`, `auth`, `sig`, `credential`, as in
/// `api-key`, `access_token`, `sslpassword`, `X-Amz-Signature`), or its value
/// is long enough to be one (24 bytes or more: a version or a flag is shorter).
pub(crate) fn secret_param(name: &str, value: &str) -> bool {
    const SECRET_NAMES: [&str; 7] = ["key", "token", "secret", "pass", "auth", "sig", "credential"];
    let name = name.to_ascii_lowercase();
    SECRET_NAMES.iter().any(|w| name.contains(w)) || value.len() >= 24
}

/// A URL cut where its secrets may hide.
struct UrlParts<'a> {
    /// `scheme://`, or empty.
    scheme: &'a str,
    /// Between `://` and the last `@` before the query.
    userinfo: Option<&'a str>,
    /// Host and path.
    rest: &'a str,
    /// After `?`, without the fragment.
    query: Option<&'a str>,
    /// `#…`, or empty.
    fragment: &'a str,
}

impl<'a> UrlParts<'a> {
    /// The authority is read up to the last `@` before the query, not up to
    /// the first `/` or `#`: a password holding a raw `/` or `#` (not valid
    /// URL syntax, but what a user pastes) is taken whole.
    fn of(url: &'a str) -> Self {
        let (scheme, after) = match url.find("://") {
            Some(i) => (&url[..i + 3], &url[i + 3..]),
            None => ("", url),
        };
        let (before_query, query, fragment) = match after.find('?') {
            Some(q) => {
                let tail = &after[q + 1..];
                match tail.find('#') {
                    Some(h) => (&after[..q], Some(&tail[..h]), &tail[h..]),
                    None => (&after[..q], Some(tail), ""),
                }
            }
            None => (after, None, ""),
        };
        let (userinfo, rest) = match before_query.rfind('@') {
            Some(at) if !scheme.is_empty() => (Some(&before_query[..at]), &before_query[at + 1..]),
            _ => (None, before_query),
        };
        Self {
            scheme,
            userinfo,
            rest,
            query,
            fragment,
        }
    }

    /// Whether the scheme is `http://` or `https://`.
    fn is_http(&self) -> bool {
        self.scheme.eq_ignore_ascii_case("http://") || self.scheme.eq_ignore_ascii_case("https://")
    }

    /// The query's parameters: name, and value when there is a `=`.
    fn params(&self) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + use<'a> {
        self.query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (p, None),
            })
    }
}

/// `url` as it may be shown: the password of its user info replaced by `***`
/// (`user:***@host`; in an `http(s)://` URL a user info without `:`, a
/// token, is `***@host`), and
/// the value of every query parameter that carries a secret (see
/// [`Redactor::add_url`]) replaced by `***`. Whatever the redactor knows is
/// masked too.
///
/// ```
/// use tinyagents::harness::secrets::mask_url;
///
/// assert_eq!(mask_url("redis://me:hunter2@db:6379/0"), "redis://me:***@db:6379/0");
/// assert_eq!(
///     mask_url("https://gw.example/v1?api-key=k-1&api-version=2024-10-21"),
///     "https://gw.example/v1?api-key=***&api-version=2024-10-21"
/// );
/// assert_eq!(mask_url("https://ghp_token@host/x"), "https://***@host/x");
/// ```
pub fn mask_url(url: &str) -> String {
    let parts = UrlParts::of(url);
    let mut out = String::with_capacity(url.len());
    out.push_str(parts.scheme);
    if let Some(userinfo) = parts.userinfo {
        match userinfo.split_once(':') {
            Some((user, _)) => {
                out.push_str(user);
                out.push_str(":***");
            }
            None if parts.is_http() => out.push_str("***"),
            None => out.push_str(userinfo),
        }
        out.push('@');
    }
    out.push_str(parts.rest);
    if parts.query.is_some() {
        out.push('?');
        let params: Vec<String> = parts
            .params()
            .map(|(name, value)| match value {
                Some(v) if secret_param(name, v) => format!("{name}=***"),
                Some(v) => format!("{name}={v}"),
                None => name.to_owned(),
            })
            .collect();
        out.push_str(&params.join("&"));
    }
    out.push_str(parts.fragment);
    redactor().redact(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_secrets_and_long_pieces_are_masked_short_ones_pass() {
        let r = Redactor::new();
        assert_eq!(r.redact("nothing known"), "nothing known");
        r.add("sk-abcdefghijklmnopqrstuvwxyz");
        r.add("pw1"); // too short to learn
        assert_eq!(r.redact("a sk-abcdefghijklmnopqrstuvwxyz b"), "a *** b");
        assert_eq!(r.redact("x sk-abcdefghijkl"), "x ***");
        assert_eq!(r.redact("mnopqrstuvwxyz."), "***.");
        assert_eq!(r.redact("sk-abc***xyz pw1"), "sk-abc***xyz pw1");
        // two echoes, one right after the other, and a repeated one
        let twice = "sk-abcdefghijklmnopqrstuvwxyzsk-abcdefghijklmnopqrstuvwxyz, sk-abcdefghijklmnopqrstuvwxyz";
        assert_eq!(r.redact(twice), "***, ***");
    }

    #[test]
    fn a_percent_encoded_secret_is_known_in_both_forms() {
        let r = Redactor::new();
        r.add("s%2Fk-1234567890abcd");
        assert_eq!(r.redact("a s/k-1234567890abcd b"), "a *** b");
        assert_eq!(r.redact("a s%2Fk-1234567890abcd b"), "a *** b");
    }

    #[test]
    fn masking_never_cuts_a_character() {
        let r = Redactor::new();
        r.add("ключ-секрет-очень-длинный");
        let text = "ошибка: ключ-секрет-очень-длинный!";
        assert_eq!(r.redact(text), "ошибка: ***!");
        // a window of the key's bytes starting inside a character
        let piece = &"ключ-секрет-очень-длинный"[2..];
        let out = r.redact(piece);
        assert!(!out.contains("секрет"), "{out}");
    }

    #[test]
    fn urls_teach_their_secrets() {
        let r = Redactor::new();
        r.add_url("https://user:p%40ssw0rd@h/v1?api-key=sk-query-123&api-version=2024-10-21&x");
        assert_eq!(r.redact("p%40ssw0rd p@ssw0rd"), "*** ***");
        assert_eq!(r.redact("sk-query-123 2024-10-21"), "*** 2024-10-21");
        r.add_url("https://ghp_tokenvalue@github.com/x");
        assert_eq!(r.redact("ghp_tokenvalue"), "***");
        r.add_url("postgres://approle@db/x"); // a role name, not a secret
        assert_eq!(r.redact("approle"), "approle");
        r.add_header_value("Bearer sk-header-secret");
        assert_eq!(r.redact("sk-header-secret"), "***");
    }

    #[test]
    fn json_stays_json() {
        let r = Redactor::new();
        r.add("tabbed-secret-value");
        let mut v = serde_json::json!({"a": ["\ttabbed-secret-value"], "tabbed-secret-value": 1});
        r.redact_json(&mut v);
        assert_eq!(v, serde_json::json!({"a": ["\t***"], "***": 1}));
    }

    #[test]
    fn a_secret_in_a_json_number_is_masked_as_a_string() {
        let r = Redactor::new();
        r.add("839201745512");
        let mut v = serde_json::json!({
            "token": 839201745512u64,
            "negative": -839201745512i64,
            "float": 839201745512.5,
            "nested": [[1, 839201745512u64]],
            "other": 4821,
        });
        r.redact_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({
                "token": "***",
                "negative": "-***",
                "float": "***.5",
                "nested": [[1, "***"]],
                "other": 4821,
            })
        );
    }

    #[test]
    fn urls_are_masked_for_display() {
        assert_eq!(
            mask_url("postgres://u:p/w#x@db/app?sslmode=require&password=pw"),
            "postgres://u:***@db/app?sslmode=require&password=***"
        );
        assert_eq!(mask_url("sqlite:state.db"), "sqlite:state.db");
        assert_eq!(mask_url("postgres://app@db/x"), "postgres://app@db/x");
        assert_eq!(mask_url("http://h/v1?a=b#frag"), "http://h/v1?a=b#frag");
    }
}

//! PII detection and replacement: the detectors, the four strategies, and the
//! stream buffer that makes redacting a split stream equal to redacting the
//! whole text.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv6Addr;
use std::sync::{Mutex, OnceLock};

use regex::Regex;

/// The built-in PII types, in priority order (an earlier type wins a tie).
pub const PII_TYPES: &[&str] = &[
    "secret",
    "email",
    "url",
    "credit_card",
    "ipv6",
    "mac_address",
    "ipv4",
    "phone",
];

/// The longest value any built-in detector matches, in characters.
pub(super) const BUILTIN_MAX_CHARS: usize = 250;

/// What to do with a detected value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PiiStrategy {
    /// Refuse the text: the hook fails with a `Validation` error (counts only).
    Block,
    /// Replace the value with `[REDACTED_TYPE]`.
    Redact,
    /// Keep the last four letters or digits (an email keeps its first letter and domain), star the rest.
    Mask,
    /// Replace the value with `<type_hash:…>`, a stable 64-bit FNV-1a pseudonym (not a cryptographic hash).
    Hash,
}

impl PiiStrategy {
    /// The strategy named `name` (`block`, `redact`, `mask`, `hash`).
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "block" => Self::Block,
            "redact" => Self::Redact,
            "mask" => Self::Mask,
            "hash" => Self::Hash,
            _ => return None,
        })
    }
}

type Validate = fn(&str) -> bool;

/// One detector: a type name, a bounded pattern, and an optional validity check.
#[derive(Debug, Clone)]
pub(super) struct Detector {
    pub(super) name: String,
    regex: Regex,
    valid: Option<Validate>,
}

fn luhn(value: &str) -> bool {
    let digits: Vec<u32> = value.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    sum % 10 == 0
}

fn ipv6(value: &str) -> bool {
    let groups = value.split(':').filter(|g| !g.is_empty()).count();
    value.parse::<Ipv6Addr>().is_ok() && groups >= 2 && value.chars().any(|c| c.is_ascii_digit())
}

fn phone(value: &str) -> bool {
    let digits = value.chars().filter(char::is_ascii_digit).count();
    if value.starts_with('+') {
        (7..=15).contains(&digits)
    } else {
        (10..=15).contains(&digits)
    }
}

/// The built-in detector for `name`.
pub(super) fn builtin(name: &str) -> Option<Detector> {
    let (pattern, valid): (&str, Option<Validate>) = match name {
        "secret" => (
            concat!(
                r"AKIA[0-9A-Z]{16}",
                r"|gh[pousr]_[A-Za-z0-9]{36,100}",
                r"|github_pat_[A-Za-z0-9_]{22,200}",
                r"|sk-[A-Za-z0-9_-]{20,200}",
                r"|xox[baprs]-[A-Za-z0-9-]{10,200}",
                r"|AIza[0-9A-Za-z_-]{35}",
                r"|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,200}",
                r"|eyJ[A-Za-z0-9_-]{8,80}\.eyJ[A-Za-z0-9_-]{8,80}\.[A-Za-z0-9_-]{8,80}",
                r"|-----BEGIN [A-Z ]{0,20}PRIVATE KEY-----",
                r"|[Bb]earer [A-Za-z0-9._~+/-]{20,200}={0,2}",
            ),
            None,
        ),
        "email" => (r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,160}\.[A-Za-z]{2,24}", None),
        "url" => (r#"\b(?:https?|ftp)://[^\s<>"'`]{1,240}|\bwww\.[^\s<>"'`]{1,240}"#, None),
        "credit_card" => (r"\b\d(?:[ -]?\d){12,18}\b", Some(luhn)),
        "ipv6" => (
            r"(?:[0-9A-Fa-f]{1,4}:|::?)(?:[0-9A-Fa-f]{0,4}:){1,7}[0-9A-Fa-f]{0,4}",
            Some(ipv6),
        ),
        "mac_address" => (r"\b[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}\b", None),
        "ipv4" => (
            r"\b(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\b",
            None,
        ),
        "phone" => (
            r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\b\d{2,4}(?:[ .-]\d{2,4}){2,4}\b",
            Some(phone),
        ),
        _ => return None,
    };
    static COMPILED: OnceLock<Mutex<HashMap<&'static str, Regex>>> = OnceLock::new();
    let mut cache = COMPILED.get_or_init(Default::default).lock().expect("pii regex cache");
    let regex = cache
        .entry(pattern)
        .or_insert_with(|| Regex::new(pattern).expect("the built-in PII patterns compile"))
        .clone();
    Some(Detector {
        name: name.to_owned(),
        regex,
        valid,
    })
}

/// A detector from a user pattern.
pub(super) fn custom(name: &str, pattern: &str) -> Result<Detector, String> {
    let regex = Regex::new(pattern).map_err(|e| e.to_string())?;
    Ok(Detector {
        name: name.to_owned(),
        regex,
        valid: None,
    })
}

/// One candidate match in a haystack (byte offsets).
struct Candidate {
    start: usize,
    end: usize,
    detector: usize,
    valid: bool,
}

/// Counts of detected values by type.
pub type PiiCounts = BTreeMap<String, usize>;

/// The detectors and the strategy.
#[derive(Debug, Clone)]
pub(super) struct Engine {
    pub(super) detectors: Vec<Detector>,
    pub(super) strategy: PiiStrategy,
}

fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn mask(kind: &str, value: &str) -> String {
    if kind == "email" {
        if let Some((local, domain)) = value.split_once('@') {
            let first: String = local.chars().take(1).collect();
            return format!("{first}***@{domain}");
        }
    }
    let total = value.chars().filter(char::is_ascii_alphanumeric).count();
    let keep = total.saturating_sub(4);
    let mut seen = 0;
    value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                seen += 1;
                if seen <= keep {
                    return '*';
                }
            }
            c
        })
        .collect()
}

impl Engine {
    /// Every candidate starting at or after `from` in `hay`, by detector.
    fn candidates(&self, hay: &str, from: usize) -> Vec<Candidate> {
        let mut out = Vec::new();
        for (i, d) in self.detectors.iter().enumerate() {
            let mut at = from;
            while at <= hay.len() {
                let Some(m) = d.regex.find_at(hay, at) else { break };
                if m.start() == m.end() {
                    // an empty match finds nothing; step past it
                    at = m.end() + hay[m.end()..].chars().next().map_or(1, char::len_utf8);
                    continue;
                }
                out.push(Candidate {
                    start: m.start(),
                    end: m.end(),
                    detector: i,
                    valid: d.valid.is_none_or(|f| f(m.as_str())),
                });
                at = m.end();
            }
        }
        out
    }

    /// The valid, non-overlapping matches: leftmost first, then longest, then by detector priority.
    fn select(mut cands: Vec<Candidate>) -> Vec<Candidate> {
        cands.retain(|c| c.valid);
        cands.sort_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.end.cmp(&a.end))
                .then(a.detector.cmp(&b.detector))
        });
        let mut chosen: Vec<Candidate> = Vec::new();
        for c in cands {
            if chosen.last().is_none_or(|l| c.start >= l.end) {
                chosen.push(c);
            }
        }
        chosen
    }

    /// Replaces the matches in `hay[from..to]` (the text before `from` is
    /// context for `\b` only), counting them by type. `Err(counts)` for `Block`.
    fn apply(&self, hay: &str, from: usize, to: usize, counts: &mut PiiCounts) -> Result<String, ()> {
        let matches = Self::select(self.candidates(&hay[..to.max(from)], from));
        self.replace(hay, from, to, &matches, counts)
    }

    fn replace(
        &self,
        hay: &str,
        from: usize,
        to: usize,
        matches: &[Candidate],
        counts: &mut PiiCounts,
    ) -> Result<String, ()> {
        let mut out = String::with_capacity(to - from);
        let mut last = from;
        for m in matches.iter().filter(|m| m.start >= from && m.end <= to) {
            let kind = &self.detectors[m.detector].name;
            *counts.entry(kind.clone()).or_default() += 1;
            out.push_str(&hay[last..m.start]);
            let value = &hay[m.start..m.end];
            match self.strategy {
                PiiStrategy::Block => {}
                PiiStrategy::Redact => {
                    out.push_str("[REDACTED_");
                    out.push_str(&kind.to_ascii_uppercase());
                    out.push(']');
                }
                PiiStrategy::Mask => out.push_str(&mask(kind, value)),
                PiiStrategy::Hash => out.push_str(&format!("<{kind}_hash:{:016x}>", fnv1a(value))),
            }
            last = m.end;
        }
        out.push_str(&hay[last..to]);
        if self.strategy == PiiStrategy::Block && !matches.iter().all(|m| m.start < from || m.end > to) {
            return Err(());
        }
        Ok(out)
    }

    /// The whole text with every match replaced. `Err(counts)` for `Block`.
    pub(super) fn redact(&self, text: &str) -> Result<(String, PiiCounts), PiiCounts> {
        let mut counts = PiiCounts::new();
        match self.apply(text, 0, text.len(), &mut counts) {
            Ok(out) => Ok((out, counts)),
            Err(()) => Err(counts),
        }
    }
}

/// The held-back tail of one streamed channel (answer text or reasoning).
#[derive(Debug, Default)]
pub(super) struct StreamBuffer {
    /// Already-emitted original text kept as context (its last few characters).
    context: String,
    /// Received text not yet emitted.
    pending: String,
}

/// Emit in batches of at least this many characters beyond the held-back
/// tail, so the detectors scan the buffer once per batch, not once per delta.
const BATCH_CHARS: usize = 64;

/// Context characters kept before the pending text (for `\b`).
const CONTEXT_CHARS: usize = 8;

impl StreamBuffer {
    /// Adds `piece` and returns the replaced text that is safe to emit now;
    /// `flush` emits everything. `Err(counts)` for `Block`.
    ///
    /// Safe means: no candidate match of the pending text straddles the cut,
    /// and at least `hold` characters stay behind it, so no later text can
    /// complete a match that starts before the cut (every detector matches at
    /// most `hold` characters). So the emitted pieces, concatenated, equal
    /// redacting the whole stream at once.
    pub(super) fn push(
        &mut self,
        engine: &Engine,
        piece: &str,
        hold: usize,
        flush: bool,
        counts: &mut PiiCounts,
    ) -> Result<String, ()> {
        self.pending.push_str(piece);
        if !flush && self.pending.len() <= hold + 1 + BATCH_CHARS {
            // Nothing can be emitted yet (fewer bytes than characters to hold back, plus a batch).
            return Ok(String::new());
        }
        let from = self.context.len();
        let mut hay = std::mem::take(&mut self.context);
        hay.push_str(&self.pending);
        let cands = engine.candidates(&hay, from);
        let mut cut = if flush {
            hay.len()
        } else {
            let n = self.pending.chars().count();
            if n <= hold + 1 {
                from
            } else {
                from + self.pending.char_indices().nth(n - hold - 1).map_or(0, |(i, _)| i)
            }
        };
        if !flush {
            // Move the cut before any candidate straddling it (repeat: moving can land inside another).
            loop {
                let straddling = cands
                    .iter()
                    .filter(|c| c.start < cut && c.end > cut)
                    .map(|c| c.start)
                    .min();
                match straddling {
                    Some(s) if s >= from => cut = s,
                    Some(_) => {
                        cut = from;
                        break;
                    }
                    None => break,
                }
            }
        }
        let matches = Engine::select(cands.into_iter().filter(|c| c.end <= cut).collect());
        let out = engine.replace(&hay, from, cut, &matches, counts);
        // Keep the tail pending and a little emitted context.
        self.pending = hay[cut..].to_owned();
        let emitted = &hay[..cut];
        let keep_from = emitted
            .char_indices()
            .rev()
            .nth(CONTEXT_CHARS.saturating_sub(1))
            .map_or(0, |(i, _)| i);
        self.context = emitted[keep_from..].to_owned();
        out
    }
}

//! The gates of the PII scan: for each built-in detector, something a text
//! must hold for the detector's pattern to match anywhere in it, read with a
//! few cheap passes over the bytes (digit runs and the bytes around them,
//! `memchr` for the rare ones, a skipping search for long runs). A detector
//! whose gate is shut is not run on that text.
//!
//! A gate is a *necessary condition* taken from its pattern's shape, never a
//! guess: if the pattern matches the text, the gate is open. So skipping a
//! detector behind a shut gate changes no detection, and no stream hold (a
//! rejected raw match is still a match, and opens the gate). The tests check
//! each gate against its pattern on random and adversarial text.
//!
//! A detector may also have a narrower gate for whole texts, a necessary
//! condition of a *valid* value (one its check accepts): a whole text's scan
//! keeps only valid values, so a text with none needs no run. A stream's scan
//! uses the wide gate, since a rejected raw match at the end of its buffer
//! may still grow into a value and holds the cut.
//!
//! Gates read the *normalised* text, as the detectors do. Every class a gate
//! reads is ASCII, as in the patterns it stands for; the one case-insensitive
//! gate (the secret key words) is itself a regex, with the patterns' own
//! Unicode case folding.

use std::cell::{Cell, OnceCell};
use std::sync::OnceLock;

use memchr::memmem;
use regex::Regex;

/// What a text must hold for one detector to match in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Nothing: the detector always runs (user patterns).
    Open,
    /// An `@` (emails).
    At,
    /// `://`, or `www.` in any case (URLs).
    Url,
    /// Thirteen digits, each next one at most three of ` \t\r\n./-`, VT or FF away (cards).
    Card,
    /// Two ASCII letters (either case), then two digits (IBANs).
    Iban,
    /// Two colons with at most four hex digits between them (IPv6).
    Colons,
    /// `:` or `-` at five places three bytes apart, or `.` at two places five
    /// bytes apart (MAC addresses).
    Mac,
    /// Four digit runs joined by single dots (IPv4).
    Dotted,
    /// A run of three digits or more, one of ` -`, a run of exactly two, one of
    /// ` -`, a run of four or more (US SSNs).
    Ssn,
    /// Two digits, one of ` .-`, two digits; or `+` then a digit (phone numbers).
    Numbers,
    /// Digit runs joined by one to three of ` .-()`, ten digits in all, or seven
    /// from a run after a `+` (a phone number its check accepts).
    PhoneDigits,
    /// `::`, or six colons each one to four hex digits after the one before
    /// (an IPv6 address `Ipv6Addr` parses).
    Ipv6Groups,
    /// A run of at least this many of `[A-Za-z0-9_.+/~-]` (tokens, keys, JWTs, credentials).
    Run(usize),
    /// Five dashes in a row (a PEM header).
    Dashes,
    /// A `:` or `=`, and one of a secret name's key words in any case (`pass`,
    /// `pwd`, `secret`, `key`, `token`, `credential`, `authorization`, `pin`,
    /// `cookie`, `sess`): every secret name the key-context patterns know
    /// holds one, and a `:` or `=` follows it.
    KeyWord,
}

/// The bytes of a long token or key: the union of every class a `Run` gate stands for.
const RUN_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'+' | b'/' | b'~' | b'-');
        i += 1;
    }
    t
};

fn run_byte(b: u8) -> bool {
    RUN_BYTES[usize::from(b)]
}

/// The high bit of each byte of `word` that is an ASCII digit (exact: no
/// carry crosses a byte, and a byte with its high bit set is never one).
fn digit_bits(word: u64) -> u64 {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES * 0x80;
    let low = word & (ONES * 0x7f);
    let at_least_0 = (low + ONES * (0x80 - u64::from(b'0'))) & HIGH;
    let at_most_9 = (ONES * (0x80 + u64::from(b'9')) - low) & HIGH;
    at_least_0 & at_most_9 & !word & HIGH
}

/// The first index at or after `from` whose byte is (`digit`) or is not (`!digit`)
/// an ASCII digit; `b.len()` if none. Eight bytes at a time.
fn find_digit(b: &[u8], mut from: usize, digit: bool) -> usize {
    while from + 8 <= b.len() {
        let word = u64::from_le_bytes(b[from..from + 8].try_into().expect("eight bytes"));
        let mut hits = digit_bits(word);
        if !digit {
            hits ^= u64::MAX / 255 * 0x80;
        }
        if hits != 0 {
            return from + (hits.trailing_zeros() / 8) as usize;
        }
        from += 8;
    }
    from + b[from..]
        .iter()
        .position(|x| x.is_ascii_digit() == digit)
        .unwrap_or(b.len() - from)
}

fn card_sep(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0B | 0x0C | b'.' | b'/' | b'-')
}

/// What one pass over the digit runs found.
#[derive(Debug, Default, Clone, Copy)]
struct Digits {
    card: bool,
    iban: bool,
    dotted: bool,
    ssn: bool,
    numbers: bool,
    phone_digits: bool,
}

impl Digits {
    fn of(b: &[u8]) -> Self {
        let mut f = Self::default();
        // the digits of the chain of runs a card could span
        let mut chain = 0usize;
        // runs joined by single dots, so far
        let mut dots = 0usize;
        // the digits of the chain of runs a phone number could span, and of
        // its part from the last run after a `+`
        let (mut phone, mut plus) = (0usize, None::<usize>);
        // the previous run (start, end) and the one before it
        let (mut prev, mut prev2) = (None::<(usize, usize)>, None::<(usize, usize)>);
        let ssn_sep = |k: usize| matches!(b[k], b' ' | b'-');
        let mut i = 0;
        loop {
            let s = find_digit(b, i, true);
            if s == b.len() {
                break;
            }
            let e = find_digit(b, s, false);
            let len = e - s;
            // joined to the previous run by exactly one byte `k` (where it ended)?
            let joined = |run: Option<(usize, usize)>| run.is_some_and(|(_, end)| end + 1 == s);
            chain = match prev {
                Some((_, end)) if s - end <= 3 && b[end..s].iter().all(|&x| card_sep(x)) => chain + len,
                _ => len,
            };
            dots = if joined(prev) && b[s - 1] == b'.' { dots + 1 } else { 0 };
            let phone_joined = prev.is_some_and(|(_, end)| {
                s - end <= 3 && b[end..s].iter().all(|x| matches!(x, b' ' | b'.' | b'-' | b'(' | b')'))
            });
            (phone, plus) = if phone_joined {
                (phone + len, plus.map(|p| p + len))
            } else {
                (len, None)
            };
            if s >= 1 && b[s - 1] == b'+' {
                plus = Some(len);
            }
            f.phone_digits |= phone >= 10 || plus.is_some_and(|p| p >= 7);
            f.card |= chain >= 13;
            f.dotted |= dots >= 3;
            f.iban |= len >= 2 && s >= 2 && b[s - 1].is_ascii_alphabetic() && b[s - 2].is_ascii_alphabetic();
            if let (Some((s2, e2)), Some((s1, e1))) = (prev, prev2) {
                f.ssn |= len >= 4
                    && joined(prev)
                    && ssn_sep(s - 1)
                    && e2 - s2 == 2
                    && e1 + 1 == s2
                    && ssn_sep(e1)
                    && e1 - s1 >= 3;
            }
            let digit_at = |k: usize| b.get(k).is_some_and(u8::is_ascii_digit);
            f.numbers |= (s >= 1 && b[s - 1] == b'+')
                || (len >= 2 && matches!(b.get(e), Some(b' ' | b'.' | b'-')) && digit_at(e + 1) && digit_at(e + 2));
            prev2 = prev;
            prev = Some((s, e));
            i = e;
        }
        f
    }
}

/// Whether `b` holds a run of at least `n` bytes of [`run_byte`]: a skipping
/// search that reads about one byte in three of prose (it looks at the last
/// byte of each window first, and a miss there moves the window past it).
fn has_run(b: &[u8], n: usize) -> bool {
    if n == 0 {
        return true;
    }
    let mut i = 0;
    'windows: while i + n <= b.len() {
        // the window b[i..i + n]: find its last byte that is not in the run
        for j in (i..i + n).rev() {
            if !run_byte(b[j]) {
                i = j + 1;
                continue 'windows;
            }
        }
        return true;
    }
    false
}

fn colons(b: &[u8]) -> bool {
    memchr::memchr_iter(b':', b).any(|p| {
        let rest = &b[p + 1..];
        let hex = rest.iter().take(4).take_while(|x| x.is_ascii_hexdigit()).count();
        rest.get(hex) == Some(&b':')
    })
}

fn ipv6_groups(b: &[u8]) -> bool {
    static PAIR: OnceLock<memmem::Finder<'static>> = OnceLock::new();
    if PAIR.get_or_init(|| memmem::Finder::new("::")).find(b).is_some() {
        return true;
    }
    // colons so far, each one to four hex digits after the one before
    let (mut chain, mut last) = (0usize, None::<usize>);
    for p in memchr::memchr_iter(b':', b) {
        let group = |l: usize| (2..=5).contains(&(p - l)) && b[l + 1..p].iter().all(u8::is_ascii_hexdigit);
        chain = if last.is_some_and(group) { chain + 1 } else { 1 };
        if chain >= 6 {
            return true;
        }
        last = Some(p);
    }
    false
}

fn mac(b: &[u8]) -> bool {
    let sep = |k: usize| matches!(b.get(k), Some(b':' | b'-'));
    memchr::memchr2_iter(b':', b'-', b).any(|p| (1..5).all(|k| sep(p + 3 * k)))
        || memchr::memchr_iter(b'.', b).any(|p| b.get(p + 5) == Some(&b'.'))
}

fn url(b: &[u8]) -> bool {
    static SCHEME: OnceLock<memmem::Finder<'static>> = OnceLock::new();
    let scheme = SCHEME.get_or_init(|| memmem::Finder::new("://"));
    scheme.find(b).is_some()
        || memchr::memchr_iter(b'.', b).any(|p| p >= 3 && b[p - 3..p].iter().all(|x| x.eq_ignore_ascii_case(&b'w')))
}

fn dashes(b: &[u8]) -> bool {
    static DASHES: OnceLock<memmem::Finder<'static>> = OnceLock::new();
    DASHES.get_or_init(|| memmem::Finder::new("-----")).find(b).is_some()
}

fn key_word(text: &str) -> bool {
    if memchr::memchr2(b':', b'=', text.as_bytes()).is_none() {
        return false;
    }
    // Two searches, not one: with all ten words in one pattern their case
    // variants are more than the regex crate's literal prefilter takes, and
    // the one search was 3x slower than these two together (prose with a
    // `:` in it, `cargo bench -p tinyagents --bench pii`).
    static WORDS: OnceLock<[Regex; 2]> = OnceLock::new();
    WORDS
        .get_or_init(|| {
            [
                r"(?i:pass|secret|key|token|credential|authorization)",
                r"(?i:pwd|pin|cookie|sess)",
            ]
            .map(|words| Regex::new(words).expect("the key-word gate compiles"))
        })
        .iter()
        .any(|words| words.is_match(text))
}

/// One text as the gates see it: each pass runs at most once, on first need.
pub(crate) struct Gates<'a> {
    text: &'a str,
    digits: OnceCell<Digits>,
    key_word: OnceCell<bool>,
    /// The longest run length known to exist, and the shortest known not to.
    runs: Cell<(usize, usize)>,
}

impl<'a> Gates<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        Self {
            text,
            digits: OnceCell::new(),
            key_word: OnceCell::new(),
            runs: Cell::new((0, usize::MAX)),
        }
    }

    /// Whether `gate` is open on this text.
    pub(crate) fn open(&self, gate: Gate) -> bool {
        let b = self.text.as_bytes();
        let digits = || *self.digits.get_or_init(|| Digits::of(b));
        match gate {
            Gate::Open => true,
            Gate::At => memchr::memchr(b'@', b).is_some(),
            Gate::Url => url(b),
            Gate::Card => digits().card,
            Gate::Iban => digits().iban,
            Gate::Colons => colons(b),
            Gate::Mac => mac(b),
            Gate::Dotted => digits().dotted,
            Gate::Ssn => digits().ssn,
            Gate::Numbers => digits().numbers,
            Gate::PhoneDigits => digits().phone_digits,
            Gate::Ipv6Groups => ipv6_groups(b),
            Gate::Run(n) => {
                let (yes, no) = self.runs.get();
                if n <= yes {
                    return true;
                }
                if n >= no {
                    return false;
                }
                let found = has_run(b, n);
                self.runs.set(if found { (n, no) } else { (yes, n) });
                found
            }
            Gate::Dashes => dashes(b),
            Gate::KeyWord => *self.key_word.get_or_init(|| key_word(self.text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_found_eight_bytes_at_a_time_exactly() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        for from in 0..bytes.len() {
            let digit = from
                + bytes[from..]
                    .iter()
                    .position(u8::is_ascii_digit)
                    .unwrap_or(bytes.len() - from);
            assert_eq!(find_digit(&bytes, from, true), digit, "from {from}");
            let other = from
                + bytes[from..]
                    .iter()
                    .position(|x| !x.is_ascii_digit())
                    .unwrap_or(bytes.len() - from);
            assert_eq!(find_digit(&bytes, from, false), other, "from {from}");
        }
        for word in [*b"/0123456", *b"789:\xff\x80\xb0\xb9", *b"\xaf\xba0\x00\x7f/:9"] {
            let want: u64 = (0..8)
                .filter(|&k| word[k].is_ascii_digit())
                .map(|k| 0x80u64 << (8 * k))
                .sum();
            assert_eq!(digit_bits(u64::from_le_bytes(word)), want, "{word:?}");
        }
    }

    #[test]
    fn a_run_is_found_wherever_it_sits() {
        assert!(has_run(b"abc", 3));
        assert!(!has_run(b"abc", 4));
        assert!(has_run(b"x y 0123456789abcdef z", 16));
        assert!(!has_run(b"x y 0123456789abcde z", 16));
        assert!(has_run(b"0123456789abcdef", 16));
        assert!(!has_run(b"ab cd ef gh", 3));
    }

    #[test]
    fn digit_runs_open_their_gates() {
        let f = Digits::of(b"card 4111 1111 1111 1111, AB12, 1.2.3.4, 415-555, +1, 1078-05-11203");
        assert!(f.card && f.iban && f.dotted && f.numbers && f.ssn);
        assert!(!Digits::of(b"4111 1111 111, 4111 x 1111 1111 1111").card);
        assert!(Digits::of(b"Ab12").iban);
        assert!(!Digits::of(b"A12 AB1 A-12 \xc3\xa912").iban);
        assert!(!Digits::of(b"1.2.3 4, 1.2..3.4").dotted);
        assert!(!Digits::of(b"1 x, 41 -55, 4 12, 41, 55").numbers);
        assert!(!Digits::of(b"078-5-1120, 078-05-112, 78-05-1120, 078-05x1120").ssn);
        assert!(Digits::of(b"+4").numbers);
        assert!(!Digits::of(b"4+").numbers);
        assert!(Digits::of(b"(415) 555-2671").phone_digits);
        assert!(Digits::of(b"+1 555 2671").phone_digits);
        assert!(!Digits::of(b"2024-03-15, 10-20-30, +1 555 26, 415 555 267").phone_digits);
    }

    #[test]
    fn ipv6_groups_need_a_pair_or_six_colons() {
        assert!(ipv6_groups(b"fe80::1"));
        assert!(ipv6_groups(b"1:2:3:4:5:6:7:8"));
        assert!(ipv6_groups(b"0:0:0:0:0:ffff:1.2.3.4"));
        assert!(!ipv6_groups(b"10:05:07 and 1:2:3:4:5 x:6"));
        assert!(!ipv6_groups(b"1:2:3:4:5:12345:7:8"));
    }
}

//! PII detection and replacement: the detectors, the four strategies, and the
//! stream buffer that makes redacting a split stream equal to redacting the
//! whole text.
//!
//! Detection runs on a *normalised* copy of the text (fullwidth forms folded
//! to ASCII, every decimal digit of the Unicode database (General_Category
//! Nd) to its ASCII digit, every other compatibility character to what its
//! NFKC form stands for (`𝐃` to `D`, `․` to `.`, `‥` to `..`, `ﬁ` to `fi`,
//! `①` to `1`), every space, line and paragraph separator (Zs, Zl,
//! Zp) to a space and NEL to a line break, format characters (Cf) and other
//! invisible marks dropped, JSON escapes such as `\u0040` decoded), and each
//! match is mapped back to the span of the original text it came from, which
//! is what gets replaced. A detector runs on a text only when its gate is
//! open (`pii_gate`: a condition every match of its pattern meets). In a
//! text that is a JSON document, a value inside a number turns the number
//! into a string, so the document stays valid ([`JsonLex`]).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::net::Ipv6Addr;
use std::sync::{Mutex, OnceLock};

use regex::Regex;

use crate::gate::{Gate, Gates};
use crate::{Finding, Strategy};

/// The built-in PII types, in priority order (an earlier type wins a tie).
pub const PII_TYPES: &[&str] = &[
    "secret",
    "email",
    "url",
    "credit_card",
    "iban",
    "ipv6",
    "mac_address",
    "ipv4",
    "ssn",
    "phone",
];

/// The longest value a bounded built-in detector matches, in characters.
/// (Unbounded ones — URLs, emails, tokens, private-key blocks, digit runs — are held
/// back in a stream for as long as they reach its end.)
pub const BUILTIN_MAX_CHARS: usize = 250;

/// How a raw regex match becomes zero or more values.
#[derive(Debug, Clone, Copy)]
enum Check {
    /// Every match is a value.
    Any,
    /// A match is a value when this holds.
    Valid(fn(&str) -> bool),
    /// The values inside a match (spans relative to it): a greedy digit run
    /// may hold a card followed by its CVV or expiry.
    Windows(fn(&str, &mut Vec<(usize, usize)>)),
    /// A key-context match is a value when this holds of its key (the capture group `k`).
    Key(fn(&str) -> bool),
}

/// Which neighbours a value may not have (checked on the normalised text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    /// Anything may touch it.
    Free,
    /// No ASCII letter or digit right before it (`_` and punctuation are fine).
    Left,
    /// No ASCII letter or digit on either side.
    Both,
    /// As `Both`, and no `.digit` / `digit.` either (so `1.2.3.4.5` is not an address).
    Dotted,
    /// As `Both`, and not the end or start of a longer run of digit groups
    /// (`4111 1111 1111 1112` holds no phone number).
    Run,
}

/// A cheap look at the text that lets a detector skip it entirely: the
/// reference scanner's test (the fast scan asks the detector's [`Gate`]).
#[derive(Debug, Clone, Copy, Default)]
struct Census {
    digits: usize,
    at: bool,
    colon: bool,
    dot: bool,
    dash: bool,
}

impl Census {
    fn of(text: &str) -> Self {
        let mut c = Self::default();
        for b in text.bytes() {
            match b {
                b'0'..=b'9' => c.digits += 1,
                b'@' => c.at = true,
                b':' => c.colon = true,
                b'.' => c.dot = true,
                b'-' => c.dash = true,
                _ => {}
            }
        }
        c
    }
}

type Needs = fn(&Census) -> bool;

/// One detector: a type name, a pattern, how matches become values, and when it can apply.
#[derive(Debug, Clone)]
pub struct Detector {
    /// The type it finds (`email`, or a custom detector's name).
    pub name: String,
    regex: Regex,
    check: Check,
    edge: Edge,
    needs: Option<Needs>,
    /// The value is the capture group `v` (the rest is context, e.g. `password=`).
    group: bool,
    /// A rejected match may hide a value starting inside it (bounded patterns only).
    retry_inside: bool,
    /// The pattern and check as the scanner before the gates wrote
    /// them, where a faster equivalent replaced them: the reference scans
    /// with these, so the equivalence tests check the rewrite.
    before: Option<(Regex, Check)>,
    /// What a text must hold for the pattern to match in it (the fast scan skips the rest).
    gate: Gate,
    /// What a whole text must hold for a value the check accepts.
    whole_gate: Gate,
    /// Finds the values itself instead of the pattern (see [`finder`]).
    find: Option<Find>,
}

/// A function that finds values in a text: it adds the byte span of each to
/// the list (spans may overlap; they are merged).
pub type FindFn = dyn Fn(&str, &mut Vec<(usize, usize)>) + Send + Sync;

/// A [`finder`] detector's function.
#[derive(Clone)]
struct Find(std::sync::Arc<FindFn>);

impl std::fmt::Debug for Find {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Find(..)")
    }
}

fn luhn(digits: &[u8]) -> bool {
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            let d = u32::from(d - b'0');
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
    sum.is_multiple_of(10)
}

/// A card number: 13 to 19 digits, Luhn-valid, an issuer's first digit (2 to 6), not one digit repeated.
fn card_digits(digits: &[u8]) -> bool {
    (13..=19).contains(&digits.len())
        && (b'2'..=b'6').contains(&digits[0])
        && digits.iter().any(|&d| d != digits[0])
        && luhn(digits)
}

/// The cards inside a run of digit groups: windows of whole groups (of two
/// digits or more) joined by one and the same separator, the longest valid
/// one from the leftmost group.
fn card_windows(run: &str, out: &mut Vec<(usize, usize)>) {
    let bytes = run.as_bytes();
    // (start, end) of each digit group, and the separator before each group.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i].is_ascii_digit() {
            let s = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            groups.push((s, i));
        } else {
            i += 1;
        }
    }
    // a separator of white space only (space, tab, line breaks, VT, FF,
    // mixed) is one and the same separator: a card wrapped over lines is one card
    let sep = |g: usize| {
        let s = &run[groups[g - 1].1..groups[g].0];
        if s.bytes()
            .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n' | 0x0B | 0x0C))
        {
            " "
        } else {
            s
        }
    };
    let mut digits: Vec<u8> = Vec::with_capacity(19);
    let mut g = 0;
    while g < groups.len() {
        digits.clear();
        let mut best = None;
        for j in g..groups.len() {
            // one separator throughout, and no one-digit group (`1 2 3 4 …` is counting, not a card)
            if (j > g + 1 && sep(j) != sep(g + 1)) || groups[j].1 - groups[j].0 < 2 {
                break;
            }
            digits.extend_from_slice(&bytes[groups[j].0..groups[j].1]);
            if digits.len() > 19 {
                break;
            }
            if card_digits(&digits) {
                best = Some(j);
            }
        }
        match best {
            Some(j) => {
                out.push((groups[g].0, groups[j].1));
                g = j + 1;
            }
            None => g += 1,
        }
    }
}

/// An IBAN: country letters, check digits, mod-97 remainder 1, in either
/// case; the longest such prefix ending at a group (groups split by any of
/// the pattern's separators).
fn iban_windows(run: &str, out: &mut Vec<(usize, usize)>) {
    let b = run.as_bytes();
    let ends: Vec<usize> = (0..b.len())
        .filter(|&i| b[i].is_ascii_alphanumeric() && (i + 1 == b.len() || !b[i + 1].is_ascii_alphanumeric()))
        .map(|i| i + 1)
        .collect();
    for &end in ends.iter().rev() {
        let compact: Vec<u8> = run[..end]
            .bytes()
            .filter(u8::is_ascii_alphanumeric)
            .map(|b| b.to_ascii_uppercase())
            .collect();
        if !(15..=34).contains(&compact.len()) {
            continue;
        }
        let rotated = compact[4..].iter().chain(&compact[..4]);
        let mut rem: u32 = 0;
        let mut ok = true;
        for &b in rotated {
            let v = match b {
                b'0'..=b'9' => u32::from(b - b'0'),
                b'A'..=b'Z' => u32::from(b - b'A') + 10,
                _ => {
                    ok = false;
                    break;
                }
            };
            rem = if v >= 10 {
                (rem * 100 + v) % 97
            } else {
                (rem * 10 + v) % 97
            };
        }
        if ok && rem == 1 {
            out.push((0, end));
            return;
        }
    }
}

/// The last 64 characters of the local part and the domain: an address's
/// local part is at most 64 characters, and a longer run before the `@` is
/// text the address follows.
fn email_local_64(run: &str, out: &mut Vec<(usize, usize)>) {
    let at = run.find('@').expect("the email pattern holds an `@`");
    let start = run[..at].char_indices().rev().nth(63).map_or(0, |(i, _)| i);
    out.push((start, run.len()));
}

fn ipv4(value: &str) -> bool {
    value.split('.').all(|p| p.parse::<u16>().is_ok_and(|n| n <= 255))
}

fn ipv6(value: &str) -> bool {
    let groups = value.split(':').filter(|g| !g.is_empty()).count();
    value.parse::<Ipv6Addr>().is_ok() && groups >= 2 && value.chars().any(|c| c.is_ascii_digit())
}

fn mac(value: &str) -> bool {
    // one separator throughout
    let seps: Vec<char> = value.chars().filter(|c| !c.is_ascii_hexdigit()).collect();
    seps.windows(2).all(|w| w[0] == w[1])
}

fn ssn(value: &str) -> bool {
    let parts: Vec<&str> = value.split([' ', '-']).collect();
    let sep_ok = value.as_bytes()[3] == value.as_bytes()[6];
    sep_ok
        && parts.len() == 3
        && !matches!(parts[0], "000" | "666")
        && !parts[0].starts_with('9')
        && parts[1] != "00"
        && parts[2] != "0000"
}

fn phone(value: &str) -> bool {
    let digits = value.chars().filter(char::is_ascii_digit).count();
    let b = value.as_bytes();
    // `2024-01-15 10.30.45`: a date and time, not a number to call
    let date = b.len() >= 10
        && (value.starts_with("19") || value.starts_with("20"))
        && b[..4].iter().all(u8::is_ascii_digit)
        && matches!(b[4], b'-' | b'.' | b'/')
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b[4];
    if date {
        return false;
    }
    if value.starts_with('+') {
        (7..=15).contains(&digits)
    } else {
        (10..=15).contains(&digits)
    }
}

/// A token in the shape of an AWS secret access key: mixed case, several digit runs.
fn aws_secret_like(value: &str) -> bool {
    let upper = value.bytes().any(|b| b.is_ascii_uppercase());
    let lower = value.bytes().any(|b| b.is_ascii_lowercase());
    let mut runs = 0;
    let mut prev_digit = false;
    for b in value.bytes() {
        let d = b.is_ascii_digit();
        if d && !prev_digit {
            runs += 1;
        }
        prev_digit = d;
    }
    upper && lower && (runs >= 3 || (runs >= 1 && value.contains(['/', '+'])))
}

fn has_digit(value: &str) -> bool {
    value.bytes().any(|b| b.is_ascii_digit())
}

/// Key names whose string value is a secret whatever it looks like (the
/// key's words, lower-case, joined, a trailing number dropped, compared as a
/// suffix: `api_key`, `clientSecret`, `AWS_SECRET_ACCESS_KEY`, `token2`).
const SECRET_KEY_SUFFIXES: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "passcode",
    "secret",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "token",
    "credential",
    "credentials",
    "authorization",
    "secrets",
    "passwords",
    "apikeys",
    "cookie",
    "cookies",
    "sessionid",
    "sessionkey",
    "sessid",
    "pincode",
    "pinnumber",
];

/// Words that make a key secret-named wherever they stand in it
/// (`password_confirmation`, `passwordRepeat`, `new_pwd_again`).
const SECRET_KEY_WORDS: &[&str] = &["password", "passwords", "passwd", "passphrase", "pwd"];

/// Short words that make a key secret-named only as its last word (a
/// trailing number aside): `pass`, `db_pass`, `pin`, `card_pin`, but not
/// `pass_rate`, `pin_count`, and never inside a word (`bypass`, `compass`,
/// `passenger`, `spin`).
const SECRET_KEY_LAST_WORDS: &[&str] = &["pass", "pin", "pins"];

/// Whether an object key names a secret (`api_key`, `clientSecret`,
/// `AWS_SECRET_ACCESS_KEY`, `password_confirmation`, `pwd`, `db_pass`, `pin`, …).
///
/// The key is normalised first, as text is for detection (fullwidth letters
/// folded, soft hyphens and other invisible characters dropped, escapes
/// decoded), then must be a name (letters, digits, `_`, `-`, `.`, spaces; at
/// most 64 bytes: a key holding a sentence or a replacement names nothing).
/// It is split into words as [`is_phone_key`] splits (`_-. `, camelCase,
/// letters against digits); it names a secret when a word is one of
/// `password`, `passwd`, `passphrase`, `pwd` wherever it stands, when its
/// last word (a trailing number dropped) is `pass` or `pin`, or when its
/// words joined end in a secret's name (`secret`, `token`, `apikey`,
/// `accesskey`, `privatekey`, `credential(s)`, `authorization`, `cookie`,
/// `sessionid`, `passcode`, `pincode`, …).
pub fn is_secret_key(key: &str) -> bool {
    if key.len() > KEYED_TEXT_BYTES {
        return false;
    }
    let norm = normalise(key);
    let key: &str = &norm.text;
    let name = key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b' '));
    if !name {
        return false;
    }
    let words = key_words(key);
    if words.iter().any(|w| SECRET_KEY_WORDS.contains(&w.as_str())) {
        return true;
    }
    // a number at the end (`password2`, `api_key_2`) names no other thing
    let n = words
        .iter()
        .rposition(|w| !w.bytes().all(|b| b.is_ascii_digit()))
        .map_or(0, |i| i + 1);
    let words = &words[..n];
    if words
        .last()
        .is_some_and(|w| SECRET_KEY_LAST_WORDS.contains(&w.as_str()))
    {
        return true;
    }
    let joined = words.concat();
    SECRET_KEY_SUFFIXES.iter().any(|s| joined.ends_with(s))
}

/// The words of a key, lower-case: split on every character not a letter or
/// digit, at camelCase boundaries (`phoneNumber`, `SMSCode`) and between
/// letters and digits (`password2`).
fn key_words(key: &str) -> Vec<String> {
    let chars: Vec<char> = key.chars().collect();
    let mut words = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            if !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            continue;
        }
        if let Some(&p) = i.checked_sub(1).and_then(|j| chars.get(j)) {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_uppercase() && c.is_uppercase() && next_lower)
                || (p.is_alphabetic() != c.is_alphabetic());
            if boundary && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
        }
        word.extend(c.to_lowercase());
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The words that make an object key name a phone (compared case-insensitively,
/// whole words): a number, or a string of bare digits, under such a key is a
/// phone number although it has no `+` or separators (the key split into words, each compared whole).
/// Plurals are words of their own: `phones`, not `cells` (a table's cells).
pub const PHONE_KEY_WORDS: &[&str] = &[
    "phone",
    "phones",
    "telephone",
    "telephones",
    "tel",
    "mobile",
    "mobiles",
    "cell",
    "cellphone",
    "cellphones",
    "fax",
    "faxes",
    "msisdn",
    "msisdns",
    "whatsapp",
    "sms",
];

/// The fewest and most digits of a phone number under a phone key (E.164 allows 15).
pub const KEYED_PHONE_DIGITS: std::ops::RangeInclusive<usize> = 7..=15;

/// The longest key the JSON text scan reads (bytes as written, escapes
/// included) and [`is_phone_key`] accepts: a longer key names no phone.
pub const KEYED_TEXT_BYTES: usize = 256;

/// Whether an object key names a phone: normalised as text is for
/// detection (fullwidth letters folded, invisible characters dropped), split
/// into words on `_`, `-`, `.`, spaces (any character not a letter or digit)
/// and camelCase boundaries
/// (`phoneNumber`, `SMSCode`, `home_phone`, `mobile-no`, `tel`), one word is
/// in [`PHONE_KEY_WORDS`] (so `hotel`, `cancel`, `cells_count` and
/// `telemetry_id` name none). A key longer than [`KEYED_TEXT_BYTES`] names none.
pub fn is_phone_key(key: &str) -> bool {
    if key.len() > KEYED_TEXT_BYTES {
        return false;
    }
    key_words(&normalise(key).text)
        .iter()
        .any(|w| PHONE_KEY_WORDS.contains(&w.as_str()))
}

/// Whether a value under a phone key is a phone number. `number`: the value
/// is a JSON number, as written (`14155552671`, `1.4155552671e10`,
/// `14155552671.0`): its mantissa, without leading zeros, a sign or trailing
/// zeros after the point, holds [`KEYED_PHONE_DIGITS`] digits. Otherwise a
/// string, folded (digits of any script, escapes read): `+` at most once in
/// front, then only that many digits.
pub fn keyed_phone(value: &str, number: bool) -> bool {
    if number {
        let mantissa = value.split(['e', 'E']).next().unwrap_or_default();
        let mantissa = mantissa.strip_prefix('-').unwrap_or(mantissa);
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return false;
        }
        let digits = int.trim_start_matches('0').len() + frac.trim_end_matches('0').len();
        return KEYED_PHONE_DIGITS.contains(&digits);
    }
    let norm = normalise(value);
    let text: &str = &norm.text;
    let digits = text.strip_prefix('+').unwrap_or(text);
    digits.bytes().all(|b| b.is_ascii_digit()) && KEYED_PHONE_DIGITS.contains(&digits.len())
}

struct Spec {
    pattern: &'static str,
    check: Check,
    edge: Edge,
    needs: Option<Needs>,
    retry_inside: bool,
    gate: Gate,
    whole_gate: Gate,
}

const fn spec(pattern: &'static str, check: Check, edge: Edge, needs: Option<Needs>, retry_inside: bool) -> Spec {
    Spec {
        pattern,
        check,
        edge,
        needs,
        retry_inside,
        gate: Gate::Open,
        whole_gate: Gate::Open,
    }
}

impl Spec {
    /// The same spec behind `gate` (a necessary condition of its pattern: see [`Gate`]).
    const fn gated(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self.whole_gate = gate;
        self
    }

    /// The same spec with a narrower gate for whole texts (a necessary
    /// condition of a value its check accepts: see [`Gate`]).
    const fn valid_gated(mut self, gate: Gate) -> Self {
        self.whole_gate = gate;
        self
    }
}

/// The detectors of type `secret` (with the two key-context ones below).
const SECRET_SPECS: &[Spec] = &[
    // AWS access key ids
    spec(
        r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[0-9A-Z]{16}",
        Check::Any,
        Edge::Free,
        None,
        false,
    ).gated(Gate::Run(20)),
    // GitHub, OpenAI/Anthropic-style, Slack, Google, Stripe, GitLab, npm, Hugging Face, SendGrid, PyPI
    spec(
        concat!(
            r"gh[pousr]_[A-Za-z0-9]{36,}",
            r"|github_pat_[A-Za-z0-9_]{22,}",
            r"|sk-[A-Za-z0-9_-]{20,}",
            r"|xox[abposr]-[A-Za-z0-9-]{10,}",
            r"|xapp-[0-9]-[A-Za-z0-9-]{10,}",
            r"|AIza[0-9A-Za-z_-]{35}",
            r"|(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,}",
            r"|whsec_[A-Za-z0-9]{20,}",
            r"|glpat-[A-Za-z0-9_-]{20,}",
            r"|npm_[A-Za-z0-9]{36,}",
            r"|hf_[A-Za-z0-9]{30,}",
            r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
            r"|pypi-[A-Za-z0-9_-]{50,}",
        ),
        Check::Any,
        Edge::Left,
        None,
        false,
    ).gated(Gate::Run(15)),
    // JWTs (and JWEs, and any base64url JSON object): `eyJ` is base64 of `{"`
    spec(
        r"eyJ[A-Za-z0-9_-]{16,}(?:\.[A-Za-z0-9_-]*){0,4}",
        Check::Any,
        Edge::Free,
        None,
        false,
    ).gated(Gate::Run(19)),
    // PEM / OpenSSH / PGP private keys: the whole block; with no end line, up to the
    // end of the text (or of the JSON string it sits in)
    spec(
        r#"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[^"]*?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|[^"]*)"#,
        Check::Any,
        Edge::Free,
        None,
        false,
    ).gated(Gate::Dashes),
    // HTTP credentials
    spec(
        r"(?i:bearer|basic)[ \t]+[A-Za-z0-9._~+/-]{16,}=*",
        Check::Valid(|v| has_digit(v.split_whitespace().nth(1).unwrap_or(""))),
        Edge::Left,
        None,
        false,
    ).gated(Gate::Run(16)),
    // A 40-character base64 token: an AWS secret access key (a maximal run, so a
    // long base64 blob is one match, rejected by its length, not 40-character windows)
    spec(
        r"[A-Za-z0-9/+]{40,}",
        Check::Valid(|v| v.len() == 40 && aws_secret_like(v)),
        Edge::Both,
        None,
        false,
    ).gated(Gate::Run(40)),
];

/// `password = …`, `"api_key": "…"`, `AWS_SECRET_ACCESS_KEY=…`, `Pwd=…`: the
/// value after a secret's name. A quoted value is taken up to its closing
/// quote (a passphrase holds spaces), at most 200 characters, never past a
/// `"` (the text is normalised, so an escaped quote is a quote: a value in a
/// JSON string never runs past the string's end), and never starting with
/// what follows a JSON string's closing quote (white space, `,`, `:`, `}`,
/// `]`: that quote closed the string `password=` stood in); a bare one up to
/// white space or punctuation, six characters or more.
const SECRET_CONTEXT: &str = concat!(
    r#"(?i:password|passwd|passphrase|(?-u:\b)pwd|secret|api[_-]?key|access[_-]?key|secret[_-]?key|private[_-]?key|token|credentials?|session[_-]?(?:id|key)|sessid)"#,
    r#"["']?[ \t]*[:=][ \t]*"#,
    r#"(?:"(?P<vd>[^"\s,:}\]][^"\r\n]{0,199})|'(?P<vs>[^'"\r\n]{1,200})|(?P<v>[^\s"',;<>{}\[\]()]{6,}))"#,
);

/// `Authorization: Bearer …`, `Proxy-Authorization: Token …`: the credential
/// after the header name and a leading auth scheme word (`Bearer`, `Basic`,
/// `Token`, `Negotiate`, …; any one word followed by blanks), however it is
/// spelt; without a scheme, the value itself.
const AUTH_CONTEXT: &str = r#"(?i:authorization)["']?[ \t]*[:=][ \t]*["']?(?:[A-Za-z][A-Za-z0-9_-]{0,30}[ \t]+)?(?P<v>[^\s"',;<>{}\[\]()]{6,})"#;

/// `Cookie: …` and `Set-Cookie: …` headers: every cookie on the line is a
/// session's credential, so the whole value, to the end of the line (or a
/// quote: the header written inside a JSON string).
const COOKIE_CONTEXT: &str = r#"(?i:cookie)[ \t]*:[ \t]*(?P<v>[^\s"][^\r\n"]*)"#;

/// The password in the user info of a URL of any scheme
/// (`postgres://app:PASS@db`, `redis://:PASS@cache`, `amqp://u:PASS@mq`).
/// The password runs to the last `@` before the host (one written without
/// percent-encoding may hold an `@`).
const URL_PASSWORD: &str = r#"[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s/?#@:"'<>]{0,256}:(?P<v>[^\s/?#"'<>]+)@"#;

/// `"client_secret": "…"`, `"pin": 4821` in JSON text: the whole string value,
/// however short, or the number, under a key [`is_secret_key`] accepts (the
/// key group `k` is checked by it).
const SECRET_JSON_CONTEXT: &str = concat!(
    r#""(?P<k>[A-Za-z0-9_.\- ]{0,40}(?i:pass|pwd|secret|key|token|credential|authorization|pin|cookie|sess)[A-Za-z0-9_.\- ]{0,40})""#,
    r#"[ \t]*:[ \t]*(?:"(?P<v>(?:[^"\\]|\\.)+)|(?P<vn>-?[0-9][0-9.eE+\-]*))"#,
);

fn spec_for(name: &str) -> Option<Spec> {
    let needs_digits = |n: usize| -> Needs {
        match n {
            13 => |c| c.digits >= 13,
            9 => |c| c.digits >= 9,
            _ => |c| c.digits >= 2,
        }
    };
    Some(match name {
        // The local part is at most 64 characters: the pattern takes the whole run
        // before the `@` and the check keeps its last 64 (what `{1,64}` would
        // match, without a counted Unicode class: that one is 300x slower).
        "email" => spec(
            r"[\p{L}\p{N}._%+\-]+@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+){0,8}\.\p{L}{2,24}",
            Check::Windows(email_local_64),
            Edge::Free,
            Some(|c| c.at),
            false,
        )
        .gated(Gate::At),
        "url" => spec(
            r#"(?i:(?:https?|ftp|wss?)://|www\.)[^\s<>"'`]+"#,
            Check::Any,
            Edge::Left,
            Some(|c| c.colon || c.dot),
            false,
        )
        .gated(Gate::Url),
        // a greedy run of digit groups; separators: space, tab, line breaks, VT,
        // FF, dot, slash, dash (up to three); the cards are the windows inside it
        "credit_card" => spec(
            r"[0-9](?:(?:[ \t\r\n\x0B\x0C./\-]{1,3})?[0-9]){12,}",
            Check::Windows(card_windows),
            Edge::Both,
            Some(needs_digits(13)),
            false,
        )
        .gated(Gate::Card),
        // either case, grouped by a space, tab, dot or dash (or not at all)
        "iban" => spec(
            r"[A-Za-z]{2}[0-9]{2}(?:[ \t.\-]?[A-Za-z0-9]{1,4}){3,8}",
            Check::Windows(iban_windows),
            Edge::Both,
            // two check digits: the rest may be letters
            Some(needs_digits(2)),
            true,
        )
        .gated(Gate::Iban),
        "ipv6" => spec(
            r"(?:[0-9A-Fa-f]{1,4}:|::?)(?:[0-9A-Fa-f]{0,4}:){1,7}(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f]{0,4})",
            Check::Valid(ipv6),
            Edge::Both,
            Some(|c| c.colon),
            true,
        )
        .gated(Gate::Colons)
        .valid_gated(Gate::Ipv6Groups),
        "mac_address" => spec(
            r"[0-9A-Fa-f]{2}(?:[:-][0-9A-Fa-f]{2}){5}|[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}",
            Check::Valid(mac),
            Edge::Both,
            Some(|c| c.colon || c.dash || c.dot),
            true,
        )
        .gated(Gate::Mac),
        "ipv4" => spec(
            r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}",
            Check::Valid(ipv4),
            Edge::Dotted,
            Some(|c| c.dot && c.digits >= 4),
            true,
        )
        .gated(Gate::Dotted),
        "ssn" => spec(
            r"[0-9]{3}[ -][0-9]{2}[ -][0-9]{4}",
            Check::Valid(ssn),
            Edge::Run,
            Some(needs_digits(9)),
            true,
        )
        .gated(Gate::Ssn),
        "phone" => spec(
            concat!(
                // international: `+49 30 901820`, `+1 (415) 555-2671`, `+14155552671`
                r"\+[0-9]{1,3}(?:[ .\-]?(?:\([0-9]{1,4}\)|[0-9]{1,8})){1,6}",
                // national: `(415) 555-2671`, `415.555.2671`
                r"|(?:\([0-9]{1,4}\)[ .\-]?)?[0-9]{2,4}(?:[ .\-][0-9]{2,4}){1,4}",
            ),
            Check::Valid(phone),
            Edge::Run,
            // a raw match (which holds a stream's cut) needs two: `+1 2`
            Some(needs_digits(2)),
            true,
        )
        .gated(Gate::Numbers)
        .valid_gated(Gate::PhoneDigits),
        _ => return None,
    })
}

fn compiled(pattern: &'static str) -> Regex {
    static COMPILED: OnceLock<Mutex<HashMap<&'static str, Regex>>> = OnceLock::new();
    let mut cache = COMPILED.get_or_init(Default::default).lock().expect("pii regex cache");
    cache
        .entry(pattern)
        .or_insert_with(|| Regex::new(pattern).expect("the built-in PII patterns compile"))
        .clone()
}

/// Built-in patterns rewritten for speed, with the pattern and check they replaced.
const BEFORE: &[(&str, &str, Check)] = &[(
    "email",
    r"[\p{L}\p{N}._%+\-]{1,64}@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+){0,8}\.\p{L}{2,24}",
    Check::Any,
)];

fn detector(name: &str, s: &Spec, group: bool) -> Detector {
    Detector {
        name: name.to_owned(),
        regex: compiled(s.pattern),
        check: s.check,
        edge: s.edge,
        needs: s.needs,
        group,
        retry_inside: s.retry_inside,
        gate: s.gate,
        whole_gate: s.whole_gate,
        before: BEFORE
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|&(_, pattern, check)| (compiled(pattern), check)),
        find: None,
    }
}

/// The built-in detectors of type `name` (one type may have several patterns).
pub fn builtin(name: &str) -> Option<Vec<Detector>> {
    if name == "secret" {
        let mut out: Vec<Detector> = SECRET_SPECS.iter().map(|s| detector(name, s, false)).collect();
        for (pattern, check, gate) in [
            (SECRET_CONTEXT, Check::Any, Gate::KeyWord),
            (SECRET_JSON_CONTEXT, Check::Key(is_secret_key), Gate::KeyWord),
            (AUTH_CONTEXT, Check::Any, Gate::KeyWord),
            (COOKIE_CONTEXT, Check::Any, Gate::KeyWord),
            (URL_PASSWORD, Check::Any, Gate::Url),
        ] {
            out.push(detector(
                name,
                &spec(pattern, check, Edge::Free, None, false).gated(gate),
                true,
            ));
        }
        return Some(out);
    }
    let s = spec_for(name)?;
    Some(vec![detector(name, &s, false)])
}

/// A detector from a user pattern.
pub fn custom(name: &str, pattern: &str) -> Result<Detector, String> {
    let regex = Regex::new(pattern).map_err(|e| e.to_string())?;
    Ok(plain(name, regex, None))
}

/// A detector whose every match (of `regex`, or what `find` finds) is a
/// value, with nothing around it checked and no gate.
fn plain(name: &str, regex: Regex, find: Option<Find>) -> Detector {
    Detector {
        name: name.to_owned(),
        regex,
        check: Check::Any,
        edge: Edge::Free,
        needs: None,
        group: false,
        retry_inside: false,
        before: None,
        gate: Gate::Open,
        whole_gate: Gate::Open,
        find,
    }
}

/// A detector of type `name` whose values a function finds: a list of known
/// values (the secrets a process holds, matched as its redactor matches
/// them) rather than a pattern. It reads the normalised text, as every
/// detector does, and the text as given too (a value that is not ASCII may
/// fold to something else); every span it adds is a value. In a stream, a
/// value must fit in the held-back characters to be seen whole, or be
/// found by any long enough piece of it.
///
/// ```
/// use std::sync::Arc;
/// use tinyagents_pii::{finder, Engine, Strategy};
///
/// let known = finder("secret", Arc::new(|text: &str, out: &mut Vec<(usize, usize)>| {
///     out.extend(text.match_indices("opensesame").map(|(at, m)| (at, at + m.len())));
/// }));
/// let engine = Engine::new(vec![known], Strategy::Redact);
/// // found as written, and written in fullwidth letters
/// let (text, _) = engine.redact("say opensesame or ｏｐｅｎｓｅｓａｍｅ").unwrap();
/// assert_eq!(text, "say [REDACTED_SECRET] or [REDACTED_SECRET]");
/// ```
pub fn finder(name: &str, find: std::sync::Arc<FindFn>) -> Detector {
    // the pattern is never run: one that matches nothing
    plain(name, compiled(r"[^\s\S]"), Some(Find(find)))
}

/// The text detectors look at, and where each of its bytes came from.
struct Normalised<'a> {
    text: Cow<'a, str>,
    /// Where each normalised byte came from. `None`: the identity.
    map: Option<OffsetMap>,
}

/// The buffers of the last normalised copy a thread dropped, taken by
/// its next one: a text with a `…` or a dash in it is copied with no
/// allocation once a thread has copied one (a buffer past
/// [`SPARE_BYTES`] is not kept).
struct Spare {
    text: String,
    runs: Vec<MapRun>,
}

/// The largest buffer (a normalised copy's text, its map's runs) a thread
/// keeps for the next copy.
const SPARE_BYTES: usize = 64 * 1024;

thread_local! {
    static SPARE: std::cell::Cell<Option<Spare>> = const { std::cell::Cell::new(None) };
}

impl Spare {
    /// The thread's spare buffers, emptied, or new ones for `len` bytes.
    fn take(len: usize) -> Self {
        match SPARE.try_with(std::cell::Cell::take).ok().flatten() {
            Some(mut spare) => {
                spare.text.clear();
                spare.runs.clear();
                spare.text.reserve(len);
                spare
            }
            None => Self {
                text: String::with_capacity(len),
                runs: Vec::new(),
            },
        }
    }
}

impl Drop for Normalised<'_> {
    fn drop(&mut self) {
        let Cow::Owned(text) = std::mem::replace(&mut self.text, Cow::Borrowed("")) else {
            return;
        };
        if text.capacity() > SPARE_BYTES {
            return;
        }
        let runs = self
            .map
            .take()
            .map(|m| m.runs)
            .filter(|r| r.capacity() * std::mem::size_of::<MapRun>() <= SPARE_BYTES)
            .unwrap_or_default();
        // (a thread tearing down its locals keeps nothing)
        let _ = SPARE.try_with(|spare| spare.set(Some(Spare { text, runs })));
    }
}

impl Normalised<'_> {
    fn orig(&self, at: usize) -> usize {
        self.map.as_ref().map_or(at, |m| m.orig(at))
    }

    /// The normalised offset of original offset `at` (the first character starting at or after it).
    fn norm(&self, at: usize) -> usize {
        self.map.as_ref().map_or(at, |m| m.norm(at))
    }
}

/// Where each byte of a normalised text came from, run by run (one entry a
/// run of plain ASCII copied as it was and one a folded character, not one
/// a byte: a text that is all ASCII but for a `…` has three runs).
struct OffsetMap {
    /// Sorted by `norm` (and by `orig`): each run starts at normalised byte
    /// `norm`, which came from original byte `orig`.
    runs: Vec<MapRun>,
    /// The normalised text's length.
    norm_len: usize,
    /// The original text's length.
    orig_len: usize,
}

/// One run of an [`OffsetMap`]; it ends where the next one starts.
#[derive(Debug, Clone, Copy)]
struct MapRun {
    norm: usize,
    orig: usize,
    /// Bytes copied as they were (byte `norm + k` came from `orig + k`);
    /// otherwise every byte of the run came from the character at `orig`.
    copied: bool,
}

impl OffsetMap {
    /// An empty map of a text of `orig_len` bytes, its runs kept in `runs` (emptied).
    fn new(orig_len: usize, mut runs: Vec<MapRun>) -> Self {
        runs.clear();
        Self {
            runs,
            norm_len: 0,
            orig_len,
        }
    }

    /// `len` normalised bytes from original offset `orig` on: copied, or
    /// all of one character's.
    fn push(&mut self, orig: usize, len: usize, copied: bool) {
        if len == 0 {
            return;
        }
        let joins = self
            .runs
            .last()
            .is_some_and(|r| r.copied && copied && r.orig + (self.norm_len - r.norm) == orig);
        if !joins {
            self.runs.push(MapRun {
                norm: self.norm_len,
                orig,
                copied,
            });
        }
        self.norm_len += len;
    }

    /// The original offset of the character at normalised byte `at`; the
    /// original length at the end.
    fn orig(&self, at: usize) -> usize {
        if at >= self.norm_len {
            return self.orig_len;
        }
        let r = self.runs[self.runs.partition_point(|r| r.norm <= at) - 1];
        if r.copied {
            r.orig + (at - r.norm)
        } else {
            r.orig
        }
    }

    /// The first normalised offset whose original offset is `at` or more.
    fn norm(&self, at: usize) -> usize {
        let j = self.runs.partition_point(|r| r.orig < at);
        if let Some(r) = j.checked_sub(1).map(|i| self.runs[i]) {
            let end = self.runs.get(j).map_or(self.norm_len, |n| n.norm);
            if r.copied && at < r.orig + (end - r.norm) {
                return r.norm + (at - r.orig);
            }
        }
        match self.runs.get(j) {
            Some(r) => r.norm,
            None if at <= self.orig_len => self.norm_len,
            None => self.norm_len + 1,
        }
    }

    /// The map of a text normalised twice: `self` from the first
    /// normalised text to the original, `inner` from the second to the first.
    fn then(&self, inner: &OffsetMap) -> OffsetMap {
        let mut out = OffsetMap::new(self.orig_len, Vec::new());
        for (k, r) in inner.runs.iter().enumerate() {
            let end = inner.runs.get(k + 1).map_or(inner.norm_len, |n| n.norm);
            if r.copied {
                // byte by byte, each where the first map puts it (a byte
                // joins the run before it only when it follows it there)
                for b in r.orig..r.orig + (end - r.norm) {
                    out.push(self.orig(b), 1, true);
                }
            } else {
                out.push(self.orig(r.orig), end - r.norm, false);
            }
        }
        out
    }
}

/// How the Unicode database makes detection read one non-ASCII character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnicodeClass {
    /// General_Category Nd, a decimal digit: the range is a contiguous run
    /// of them, whose characters are the digits 0 to 9 over and over (a
    /// stability policy of Unicode: decimal digits are encoded in contiguous
    /// runs of ten, in ascending order).
    Digit,
    /// Zs, Zl, Zp: a space, a line or a paragraph separator.
    Space,
    /// Cf, a format character: renders as nothing.
    Format,
}

/// The non-ASCII characters of each [`UnicodeClass`], as sorted, disjoint
/// `(first, last, class)` ranges: built once from the General_Category data
/// of ICU4X (`icu_properties`, the Unicode Consortium's own library), read
/// range by range, so the fold follows the Unicode version of that data,
/// never a hand list.
fn unicode_classes() -> &'static [(u32, u32, UnicodeClass)] {
    use icu_properties::props::GeneralCategory as G;
    use icu_properties::CodePointMapData;
    static CLASSES: OnceLock<Vec<(u32, u32, UnicodeClass)>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let categories = CodePointMapData::<G>::new();
        let mut out: Vec<(u32, u32, UnicodeClass)> = [
            (G::DecimalNumber, UnicodeClass::Digit),
            (G::SpaceSeparator, UnicodeClass::Space),
            (G::LineSeparator, UnicodeClass::Space),
            (G::ParagraphSeparator, UnicodeClass::Space),
            (G::Format, UnicodeClass::Format),
        ]
        .into_iter()
        .flat_map(|(category, class)| {
            categories
                .iter_ranges_for_value(category)
                .map(move |r| ((*r.start()).max(0x80), *r.end(), class))
        })
        .filter(|r| r.0 <= r.1)
        .collect();
        out.sort_unstable_by_key(|r| r.0);
        out
    })
}

/// Whether `c`'s General_Category is one a [`UnicodeClass`] is made of (a
/// lookup in ICU4X's category trie, the data [`unicode_classes`] is read from).
fn in_a_class(c: char) -> bool {
    use icu_properties::props::GeneralCategory as G;
    const CATEGORIES: icu_properties::CodePointMapDataBorrowed<'static, G> =
        icu_properties::CodePointMapData::<G>::new();
    matches!(
        CATEGORIES.get(c),
        G::DecimalNumber | G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator | G::Format
    )
}

/// The [`UnicodeClass`] of a non-ASCII character, and the first character of its range.
fn unicode_class(u: u32) -> Option<(UnicodeClass, u32)> {
    let classes = unicode_classes();
    let i = classes.partition_point(|r| r.1 < u);
    classes
        .get(i)
        .filter(|r| r.0 <= u)
        .map(|&(first, _, class)| (class, first))
}

/// Folds one character for detection; `None` drops it (it renders as nothing).
///
/// Every decimal digit (General_Category Nd, any script) becomes its ASCII
/// digit, every space, line and paragraph separator (Zs, Zl, Zp) a space,
/// NEL (U+0085) a line break; every format character (Cf) is dropped.
fn fold(c: char) -> Option<char> {
    let u = c as u32;
    Some(match u {
        0x00..=0x7F => c,
        // NEL, the line break of EBCDIC text
        0x0085 => '\n',
        0xFF01..=0xFF5E => char::from_u32(u - 0xFEE0).unwrap_or(c),
        // Invisible but not format characters (Cf, dropped below): the
        // variation selectors, the combining grapheme joiner, the Hangul
        // fillers, and the combining diacritical marks: each renders as
        // nothing (or on the character before it), so a value written with
        // one inside reads whole.
        0x0300..=0x036F
        | 0x115F..=0x1160
        | 0x180B..=0x180F
        | 0x1AB0..=0x1AFF
        | 0x1DC0..=0x1DFF
        | 0x20D0..=0x20FF
        | 0x3164
        | 0xFE00..=0xFE0F
        | 0xFE20..=0xFE2F
        | 0xFFA0
        | 0xE0100..=0xE01EF => return None,
        0x2010..=0x2015 | 0x2212 | 0xFE63 => '-',
        // `﹫` and the ideographic / halfwidth full stops (`ann＠example。com`)
        0xFE6B => '@',
        0x3002 | 0xFF61 => '.',
        // Most characters are none of the classes: one lookup in the
        // category trie says so before the ranges are searched.
        _ if !in_a_class(c) => c,
        _ => match unicode_class(u) {
            // a run of ten: the digit is the distance from the run's start, mod 10
            Some((UnicodeClass::Digit, first)) => char::from(b'0' + ((u - first) % 10) as u8),
            Some((UnicodeClass::Space, _)) => ' ',
            Some((UnicodeClass::Format, _)) => return None,
            None => c,
        },
    })
}

/// What one character becomes for detection.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Folded {
    /// Nothing: it renders as nothing.
    Drop,
    /// One character (itself, when nothing folds it).
    One(char),
    /// Several: a compatibility character standing for more than one
    /// (`‥` for `..`, `ﬁ` for `fi`, `⑴` for `(1)`).
    Many(String),
}

/// The compatibility (NFKC) normaliser, ICU4X's, on its compiled data.
static NFKC: icu_normalizer::ComposingNormalizerBorrowed<'static> =
    icu_normalizer::ComposingNormalizerBorrowed::new_nfkc();

/// Whether `c` is surely its own NFKC form, by one lookup: it does not
/// change when NFKC-casefolded (Unicode's Changes_When_NFKC_Casefolded,
/// from ICU4X's data). NFKC is applied last in that fold, so a character
/// it leaves alone is its own NFKC form; one it changes (a capital letter,
/// a compatibility character) is asked of the normaliser.
///
/// The set is read from its ranges once into a bit per character of the
/// Basic Multilingual Plane (8 KiB): the set's own search over its ranges
/// was most of the fold's time on text in other scripts.
fn nfkc_inert(c: char) -> bool {
    use icu_properties::props::ChangesWhenNfkcCasefolded as Changes;
    const CHANGES: icu_properties::CodePointSetDataBorrowed<'static> =
        icu_properties::CodePointSetData::new::<Changes>();
    static BMP: OnceLock<Box<[u64; 1024]>> = OnceLock::new();
    let u = c as u32;
    if u > 0xFFFF {
        return !CHANGES.contains(c);
    }
    let bits = BMP.get_or_init(|| {
        let mut bits = Box::new([0u64; 1024]);
        for range in CHANGES.iter_ranges() {
            for v in *range.start()..=(*range.end()).min(0xFFFF) {
                bits[(v / 64) as usize] |= 1 << (v % 64);
            }
        }
        bits
    });
    bits[(u / 64) as usize] & (1 << (u % 64)) == 0
}

/// [`fold`], then the compatibility fold: a character the rules of `fold`
/// leave as it is becomes what its compatibility form (NFKC, Unicode's
/// normalisation form for "the same text, another look") stands for, each
/// character of that folded again. So the mathematical alphanumerics
/// (`𝐃𝐄89…`, `ghp_𝐚bc…`), the dot leaders (`4111․1111`, `example․com`),
/// ligatures, circled, parenthesised and superscript digits read as the
/// ASCII they look like. `then` is handed what `c` becomes, not a copy
/// (and must not fold a character itself).
fn with_folded<R>(c: char, then: impl FnOnce(&Folded) -> R) -> R {
    let Some(f) = fold(c) else { return then(&Folded::Drop) };
    if f != c || c.is_ascii() || nfkc_inert(c) {
        return then(&Folded::One(f));
    }
    // The normaliser is slow for one character (a few hundred ns): its
    // answers for the characters a thread met last are kept, direct-mapped
    // by code point (a `…` at the end of every message is asked once).
    const SLOTS: usize = 64;
    thread_local! {
        static SEEN: std::cell::RefCell<[Option<(char, Folded)>; SLOTS]> =
            const { std::cell::RefCell::new([const { None }; SLOTS]) };
    }
    let mut then = Some(then);
    let kept = SEEN.try_with(|seen| {
        // `then` never folds (it copies what it is handed), so the cell is free
        let mut seen = seen.borrow_mut();
        let slot = &mut seen[c as usize % SLOTS];
        let then = then.take().expect("called once");
        match slot {
            Some((k, folded)) if *k == c => then(folded),
            _ => then(&slot.insert((c, nfkc_fold(c))).1),
        }
    });
    // a thread tearing down its locals asks the normaliser itself
    kept.unwrap_or_else(|_| then.take().expect("not called")(&nfkc_fold(c)))
}

/// What NFKC makes of `c`, each character of it folded by [`fold`].
fn nfkc_fold(c: char) -> Folded {
    let mut buf = [0u8; 4];
    let one: &str = c.encode_utf8(&mut buf);
    let nfkc = NFKC.normalize(one);
    if nfkc == one {
        return Folded::One(c);
    }
    let folded: String = nfkc.chars().filter_map(fold).collect();
    let mut chars = folded.chars();
    match (chars.next(), chars.next()) {
        (None, _) => Folded::Drop,
        (Some(x), None) => Folded::One(x),
        _ => Folded::Many(folded),
    }
}

/// Decodes the JSON escape at the start of `s` (which starts with `\`): the character and its length.
fn unescape(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    let hex4 = |at: usize| -> Option<u32> {
        let h = s.get(at..at + 4)?;
        if !h.bytes().all(|x| x.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(h, 16).ok()
    };
    Some(match *b.get(1)? {
        b'n' => ('\n', 2),
        b't' => ('\t', 2),
        b'r' => ('\r', 2),
        b'b' | b'f' => (' ', 2),
        b'/' => ('/', 2),
        b'\\' => ('\\', 2),
        b'"' => ('"', 2),
        b'u' => {
            let hi = hex4(2)?;
            if (0xD800..0xDC00).contains(&hi) {
                if s.get(6..8) != Some("\\u") {
                    return None;
                }
                let lo = hex4(8)?;
                if !(0xDC00..0xE000).contains(&lo) {
                    return None;
                }
                (char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?, 12)
            } else {
                (char::from_u32(hi)?, 6)
            }
        }
        _ => return None,
    })
}

/// Where folding and unescaping would first change `text`: the first
/// backslash or character that does not fold to itself; `None` when there
/// is none (plain prose in any script, `é`, CJK), and detection reads the
/// text itself, with no copy and no offset map.
fn first_change(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = 0;
    loop {
        i += plain_ascii_run(&b[i..]);
        if b.get(i) == Some(&b'\\') {
            return Some(i);
        }
        let c = text[i..].chars().next()?;
        if !with_folded(c, |f| *f == Folded::One(c)) {
            return Some(i);
        }
        i += c.len_utf8();
    }
}

fn normalise(text: &str) -> Normalised<'_> {
    normalise_with(text, true)
}

/// [`normalise`]; `fast: false` is the reference path (only ASCII text without
/// a backslash is read in place), kept to check the fast one against.
fn normalise_with(text: &str, fast: bool) -> Normalised<'_> {
    let change = if fast {
        first_change(text)
    } else {
        (!text.is_ascii() || text.contains('\\')).then_some(0)
    };
    let Some(from) = change else {
        return Normalised {
            text: Cow::Borrowed(text),
            map: None,
        };
    };
    let (mut out, mut map, mut pairs) = fold_pass(text, from);
    // An escape written inside a JSON string (`ann\\u0040example.com` in raw
    // arguments) decodes to an escape: decode again (a few levels deep).
    for _ in 0..3 {
        if !pairs || !out.contains('\\') {
            break;
        }
        let (again, inner, more) = fold_pass(&out, 0);
        map = map.then(&inner);
        out = again;
        pairs = more;
    }
    Normalised {
        text: Cow::Owned(out),
        map: Some(map),
    }
}

/// How many bytes at the start of `b` are ASCII other than `\`: eight at a
/// time (the lowest flagged byte of a word is exact: a borrow only flags
/// bytes above a true zero).
fn plain_ascii_run(b: &[u8]) -> usize {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES * 0x80;
    let mut at = 0;
    while at + 8 <= b.len() {
        let word = u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"));
        let slash = word ^ (ONES * u64::from(b'\\'));
        let stop = (word & HIGH) | (slash.wrapping_sub(ONES) & !slash & HIGH);
        if stop != 0 {
            return at + (stop.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    at + b[at..]
        .iter()
        .position(|&x| !x.is_ascii() || x == b'\\')
        .unwrap_or(b.len() - at)
}

/// One pass of folding and unescaping (`text[..from]` is known to fold to
/// itself): the text, where each of its bytes came from, and whether it
/// decoded an escaped backslash (which may start a new escape).
fn fold_pass(text: &str, from: usize) -> (String, OffsetMap, bool) {
    let mut pairs = false;
    let Spare { text: mut out, runs } = Spare::take(text.len());
    let mut map = OffsetMap::new(text.len(), runs);
    // what lies before `from` folds to itself: copied whole, mapped as
    // below (ASCII runs as runs, each other character to its start)
    out.push_str(&text[..from]);
    let mut i = 0;
    while i < from {
        let run = plain_ascii_run(&text.as_bytes()[i..from]);
        map.push(i, run, true);
        i += run;
        if let Some(c) = text[i..from].chars().next() {
            map.push(i, c.len_utf8(), false);
            i += c.len_utf8();
        }
    }
    while i < text.len() {
        // A run of ASCII other than `\` folds to itself: copied whole.
        let run = plain_ascii_run(&text.as_bytes()[i..]);
        if run > 0 {
            out.push_str(&text[i..i + run]);
            map.push(i, run, true);
            i += run;
            continue;
        }
        let (c, len) = next_char(&text[i..]);
        pairs |= len == 2 && c == '\\';
        with_folded(c, |folded| match folded {
            Folded::Drop => {}
            Folded::One(f) => {
                // a lone `\` left as it is counts as copied, like ASCII
                map.push(i, f.len_utf8(), f.len_utf8() == 1 && len == 1);
                out.push(*f);
            }
            Folded::Many(f) => {
                map.push(i, f.len(), false);
                out.push_str(f);
            }
        });
        i += len;
    }
    (out, map, pairs)
}

/// The character at the start of `rest` (not empty) and how many bytes it
/// takes: a JSON escape decoded (a `\\` that starts none stands for itself).
fn next_char(rest: &str) -> (char, usize) {
    if rest.starts_with('\\') {
        unescape(rest).unwrap_or(('\\', 1))
    } else {
        let c = rest.chars().next().expect("not at the end");
        (c, c.len_utf8())
    }
}

/// Whether a value at `start..end` of the normalised `text` has neighbours
/// its `edge` allows. `number`: it sits in a JSON number, where `e` and `E`
/// mark the exponent, not a word (`4111111111111111e0` holds a card).
fn edge_ok(edge: Edge, text: &str, start: usize, end: usize, number: bool) -> bool {
    let b = text.as_bytes();
    let before = start.checked_sub(1).map(|i| b[i]);
    let after = b.get(end).copied();
    let word = |x: Option<u8>| x.is_some_and(|x| x.is_ascii_alphanumeric() && !(number && matches!(x, b'e' | b'E')));
    match edge {
        Edge::Free => true,
        Edge::Left => !word(before),
        Edge::Both => !word(before) && !word(after),
        Edge::Dotted => {
            let dot_digit_after = after == Some(b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit);
            let digit_dot_before = before == Some(b'.') && start >= 2 && b[start - 2].is_ascii_digit();
            !word(before) && !word(after) && !dot_digit_after && !digit_dot_before
        }
        Edge::Run => {
            let sep = |x: Option<u8>| matches!(x, Some(b' ' | b'.' | b'-' | b'/'));
            let run_after = sep(after) && b.get(end + 1).is_some_and(u8::is_ascii_digit);
            let run_before = sep(before) && start >= 2 && b[start - 2].is_ascii_digit();
            !word(before) && !word(after) && !run_after && !run_before
        }
    }
}

/// Spans sorted and merged where they overlap or touch (non-empty ones only).
fn merge_spans(mut spans: Vec<(usize, usize)>) -> Vec<(usize, usize)> {
    spans.retain(|&(s, e)| s < e);
    spans.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (s, e) in spans {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The capture groups that hold a key-context detector's value (a pattern
/// has one per way the value may be written: bare, double- or single-quoted, a number).
const VALUE_GROUPS: [&str; 4] = ["v", "vd", "vs", "vn"];

/// One candidate match in a haystack (original byte offsets).
#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    /// The value to replace.
    start: usize,
    end: usize,
    /// The whole raw match (a stream may not cut inside it).
    hold_start: usize,
    hold_end: usize,
    detector: usize,
    valid: bool,
}

/// What a scan reads: a whole text, where only valid values count, or a
/// stream's buffer, where a rejected raw match at its end may still grow into
/// a value and so holds the cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Whole,
    Stream,
}

/// Counts of detected values by type.
pub type PiiCounts = BTreeMap<String, usize>;

/// The detectors and the strategy.
#[derive(Debug, Clone)]
pub struct Engine {
    detectors: Vec<Detector>,
    /// What to do with what it finds.
    pub strategy: Strategy,
    /// The fast scan: each detector behind its gate, text that folds to itself
    /// read in place. `false`: the reference (the scanner before #19).
    fast: bool,
}

fn fnv1a(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A running FNV-1a digest of streamed text (to tell later whether a reply is what was streamed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(u64);

impl Default for Digest {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    /// The digest's value.
    pub fn value(self) -> u64 {
        self.0
    }

    /// Adds `text` to the digest.
    pub fn push(&mut self, text: &str) {
        for b in text.bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The digest of `text` alone.
    pub fn of(text: &str) -> Self {
        let mut d = Self::default();
        d.push(text);
        d
    }
}

fn mask(kind: &str, value: &str) -> String {
    if kind == "email"
        && let Some((local, domain)) = value.split_once('@')
    {
        let first: String = local.chars().take(1).collect();
        return format!("{first}***@{domain}");
    }
    let total = value.chars().filter(|c| c.is_alphanumeric()).count();
    // keep at most the last four, and never more than a third (`8.8.8.8` shows one digit)
    let hidden = total - (total / 3).min(4);
    let mut seen = 0;
    value
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                seen += 1;
                if seen <= hidden {
                    return '*';
                }
            }
            match c {
                // stay valid inside a JSON string
                '"' | '\\' => '*',
                c if c.is_control() => ' ',
                c => c,
            }
        })
        .collect()
}

impl Engine {
    /// An engine with these detectors, scanning the fast way.
    pub fn new(detectors: Vec<Detector>, strategy: Strategy) -> Self {
        Self {
            detectors,
            strategy,
            fast: true,
        }
    }

    /// The detectors, in priority order.
    pub fn detectors(&self) -> &[Detector] {
        &self.detectors
    }

    /// Replaces the detectors.
    pub fn set_detectors(&mut self, detectors: Vec<Detector>) {
        self.detectors = detectors;
        if !self.fast {
            self.scan_as_before();
        }
    }

    /// Every detector with the pattern and check it had before the gates.
    fn scan_as_before(&mut self) {
        for d in &mut self.detectors {
            if let Some((regex, check)) = d.before.take() {
                d.regex = regex;
                d.check = check;
            }
        }
    }

    /// The same engine scanning the reference way, as the scanner before #19
    /// did: every detector the census lets through over the text (no gates),
    /// every non-ASCII text folded into a copy, and the patterns as they were
    /// before a rewrite (kept to check the fast path against).
    pub fn reference(mut self) -> Self {
        self.fast = false;
        self.scan_as_before();
        self
    }

    /// Every candidate starting at or after `from` in `hay`, by detector. For a
    /// [`Scope::Whole`] text only the valid ones count, so the narrower gates apply.
    ///
    /// `bare`: the bare tokens of a JSON document from `from` on (see
    /// [`JsonLex`]); a value inside one may touch its exponent's `e`.
    fn candidates(&self, hay: &str, from: usize, scope: Scope, bare: Option<&[(usize, usize)]>) -> Vec<Candidate> {
        let norm = normalise_with(hay, self.fast);
        let text: &str = &norm.text;
        let from_n = norm.norm(from);
        let rest = &text[from_n..];
        let mut out = Vec::new();
        let mut spans = Vec::new();
        // The fast scan asks each detector's gate (each pass it needs runs once);
        // the reference asks the census the scanner had before.
        let gates = Gates::new(rest);
        let census = (!self.fast).then(|| Census::of(rest));
        let can_match = |d: &Detector| match &census {
            None => gates.open(match scope {
                Scope::Whole => d.whole_gate,
                Scope::Stream => d.gate,
            }),
            Some(c) => d.needs.is_none_or(|f| f(c)),
        };
        for (i, d) in self.detectors.iter().enumerate() {
            if let Some(Find(find)) = &d.find {
                spans.clear();
                find(rest, &mut spans);
                let mut found: Vec<(usize, usize)> = spans
                    .iter()
                    .map(|&(s, e)| (norm.orig(from_n + s), norm.orig(from_n + e)))
                    .collect();
                if norm.map.is_some() {
                    spans.clear();
                    find(&hay[from..], &mut spans);
                    found.extend(spans.iter().map(|&(s, e)| (from + s, from + e)));
                }
                out.extend(merge_spans(found).into_iter().map(|(s, e)| Candidate {
                    start: s,
                    end: e,
                    hold_start: s,
                    hold_end: e,
                    detector: i,
                    valid: true,
                }));
                continue;
            }
            if !can_match(d) {
                continue;
            }
            let mut at = from_n;
            while at <= text.len() {
                let (ms, me, vs, ve, key) = if d.group {
                    let Some(caps) = d.regex.captures_at(text, at) else {
                        break;
                    };
                    let m = caps.get(0).expect("group 0 always matches");
                    // the value is the first of the value groups that took part
                    let v = VALUE_GROUPS.iter().find_map(|g| caps.name(g)).unwrap_or(m);
                    let key = caps.name("k").map(|k| (k.start(), k.end()));
                    (m.start(), m.end(), v.start(), v.end(), key)
                } else {
                    let Some(m) = d.regex.find_at(text, at) else { break };
                    (m.start(), m.end(), m.start(), m.end(), None)
                };
                let step = |x: usize| x + text[x..].chars().next().map_or(1, char::len_utf8);
                if ms == me {
                    at = step(me);
                    continue;
                }
                spans.clear();
                match d.check {
                    Check::Any => spans.push((vs, ve)),
                    Check::Valid(f) => {
                        if f(&text[vs..ve]) {
                            spans.push((vs, ve));
                        }
                    }
                    Check::Windows(f) => {
                        f(&text[ms..me], &mut spans);
                        for s in &mut spans {
                            *s = (s.0 + ms, s.1 + ms);
                        }
                    }
                    Check::Key(f) => {
                        if key.is_none_or(|(ks, ke)| f(&text[ks..ke])) {
                            spans.push((vs, ve));
                        }
                    }
                }
                let in_token = |s: usize, e: usize| {
                    let (s, e) = (norm.orig(s), norm.orig(e));
                    bare.is_some_and(|tokens| {
                        let k = tokens.partition_point(|t| t.1 <= s);
                        tokens.get(k).is_some_and(|&(a, b)| a <= s && e <= b)
                    })
                };
                spans.retain(|&(s, e)| {
                    edge_ok(d.edge, text, s, e, false) || (in_token(s, e) && edge_ok(d.edge, text, s, e, true))
                });
                let (hs, he) = (norm.orig(ms), norm.orig(me));
                out.push(Candidate {
                    start: hs,
                    end: he,
                    hold_start: hs,
                    hold_end: he,
                    detector: i,
                    valid: false,
                });
                for &(s, e) in &spans {
                    out.push(Candidate {
                        start: norm.orig(s),
                        end: norm.orig(e),
                        hold_start: hs,
                        hold_end: he,
                        detector: i,
                        valid: true,
                    });
                }
                at = if spans.is_empty() && d.retry_inside {
                    step(ms)
                } else {
                    me
                };
            }
        }
        out
    }

    /// The phones under phone keys of a JSON text (see [`JsonLex`]) as
    /// candidates of the `phone` detector, when it is on.
    fn keyed(json: Option<&JsonSpans>, detectors: &[Detector]) -> Vec<Candidate> {
        let phone = detectors.iter().position(|d| d.name == "phone");
        let (Some(json), Some(detector)) = (json, phone) else {
            return Vec::new();
        };
        json.phones
            .iter()
            .map(|&(start, end)| Candidate {
                start,
                end,
                hold_start: start,
                hold_end: end,
                detector,
                valid: true,
            })
            .collect()
    }

    /// The valid, non-overlapping matches: leftmost first, then longest, then by detector priority.
    pub fn select(mut cands: Vec<Candidate>) -> Vec<Candidate> {
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

    /// Replaces the matches in `text`, counting them by type. `Err(())` for
    /// `Block` when any was found.
    fn apply(&self, text: &str, counts: &mut PiiCounts) -> Result<String, ()> {
        let json = JsonLex::default().scan(text, 0);
        let bare = json.as_ref().map(|j| j.tokens.as_slice());
        let mut cands = self.candidates(text, 0, Scope::Whole, bare);
        cands.extend(Self::keyed(json.as_ref(), &self.detectors));
        let matches = Self::select(cands);
        self.replace(text, 0, text.len(), &matches, bare, counts)
    }

    /// The replacement of one detected `value` of type `kind`.
    pub fn replacement(&self, kind: &str, value: &str) -> String {
        match self.strategy {
            Strategy::Block => String::new(),
            Strategy::Redact => format!("[REDACTED_{}]", kind.to_ascii_uppercase()),
            Strategy::Mask => mask(kind, &normalise(value).text),
            Strategy::Hash => format!("<{kind}_hash:{:016x}>", fnv1a(&normalise(value).text)),
        }
    }

    /// Replaces the matches of `hay[from..to]`. `bare`: the text is JSON
    /// (see [`JsonLex`]), and these are its bare tokens from `from` on: a
    /// value inside one (a number) turns the whole token into a JSON string
    /// of it with its values replaced, and every replacement is escaped for
    /// a JSON string, so a JSON document stays one.
    fn replace(
        &self,
        hay: &str,
        from: usize,
        to: usize,
        matches: &[Candidate],
        bare: Option<&[(usize, usize)]>,
        counts: &mut PiiCounts,
    ) -> Result<String, ()> {
        let mut out = String::with_capacity(to - from);
        let mut last = from;
        let mut found = false;
        let matches: Vec<&Candidate> = matches.iter().filter(|m| m.start >= from && m.end <= to).collect();
        let mut i = 0;
        while i < matches.len() {
            let m = matches[i];
            found = true;
            // the bare token the value starts in, when the value ends in it too
            let token = bare.and_then(|tokens| {
                let k = tokens.partition_point(|t| t.1 <= m.start);
                tokens
                    .get(k)
                    .copied()
                    .filter(|&(a, b)| a <= m.start && m.end <= b && a >= last)
            });
            let Some((a, b)) = token else {
                let kind = &self.detectors[m.detector].name;
                *counts.entry(kind.clone()).or_default() += 1;
                out.push_str(&hay[last..m.start]);
                let rep = self.replacement(kind, &hay[m.start..m.end]);
                if bare.is_some() {
                    push_json_escaped(&mut out, &rep);
                } else {
                    out.push_str(&rep);
                }
                last = m.end;
                i += 1;
                continue;
            };
            // every value inside the token: the token becomes a JSON string
            out.push_str(&hay[last..a]);
            let mut inner = String::new();
            let mut at = a;
            while let Some(&m) = matches.get(i).filter(|m| m.start >= at && m.end <= b) {
                let kind = &self.detectors[m.detector].name;
                *counts.entry(kind.clone()).or_default() += 1;
                inner.push_str(&hay[at..m.start]);
                inner.push_str(&self.replacement(kind, &hay[m.start..m.end]));
                at = m.end;
                i += 1;
            }
            inner.push_str(&hay[at..b]);
            out.push('"');
            push_json_escaped(&mut out, &inner);
            out.push('"');
            last = b;
        }
        out.push_str(&hay[last..to]);
        if self.strategy == Strategy::Block && found {
            return Err(());
        }
        Ok(out)
    }

    /// Replaces every match in `text` in place (no copy when there is none),
    /// adding to `counts`. `Err(found)` for `Block` when any was found.
    pub fn redact_in_place(&self, text: &mut String, counts: &mut PiiCounts) -> Result<(), PiiCounts> {
        let json = JsonLex::default().scan(text, 0);
        let bare = json.as_ref().map(|j| j.tokens.as_slice());
        let mut cands = self.candidates(text, 0, Scope::Whole, bare);
        cands.extend(Self::keyed(json.as_ref(), &self.detectors));
        let matches = Self::select(cands);
        if matches.is_empty() {
            return Ok(());
        }
        let mut found = PiiCounts::new();
        match self.replace(text, 0, text.len(), &matches, bare, &mut found) {
            Ok(out) => {
                *text = out;
                for (k, v) in found {
                    *counts.entry(k).or_default() += v;
                }
                Ok(())
            }
            Err(()) => Err(found),
        }
    }

    /// The whole text with every match replaced. `Err(counts)` for `Block`.
    pub fn redact(&self, text: &str) -> Result<(String, PiiCounts), PiiCounts> {
        let mut counts = PiiCounts::new();
        match self.apply(text, &mut counts) {
            Ok(out) => Ok((out, counts)),
            Err(()) => Err(counts),
        }
    }

    /// Every value found in `text`, leftmost first (then longest, then by
    /// detector priority), never overlapping: its type and its byte span in
    /// `text` as given (detection reads a normalised copy; spans are mapped
    /// back to the original).
    pub fn findings(&self, text: &str) -> Vec<Finding> {
        let json = JsonLex::default().scan(text, 0);
        let bare = json.as_ref().map(|j| j.tokens.as_slice());
        let mut cands = self.candidates(text, 0, Scope::Whole, bare);
        cands.extend(Self::keyed(json.as_ref(), &self.detectors));
        Self::select(cands)
            .into_iter()
            .map(|c| Finding {
                kind: self.detectors[c.detector].name.clone(),
                start: c.start,
                end: c.end,
            })
            .collect()
    }

    /// Whether the `secret` type is on (then values of secret-named keys are secrets).
    pub fn detects_secrets(&self) -> bool {
        self.detects("secret")
    }

    /// Whether a detector of type `kind` is on.
    pub fn detects(&self, kind: &str) -> bool {
        self.detectors.iter().any(|d| d.name == kind)
    }
}

/// Where a text stands as JSON, as far as replacing values goes: whether it
/// is a JSON document (its first character other than JSON white space is
/// `{` or `[`), whether the lexer is inside a string, and the key the value
/// it reads sits under.
///
/// In a JSON document a value that sits in a *bare token* (a number: a run
/// of characters outside strings other than white space and `{}[],:"`)
/// cannot be replaced by bare text, which would make the document invalid:
/// the whole token becomes a JSON string instead (`4111111111111111` →
/// `"[REDACTED_CREDIT_CARD]"`). The token is read as the text holds it, so
/// a 19-digit card or a number past `u64` is checked digit for digit.
///
/// A number, or a string, that is an object's value under a key naming a
/// phone ([`is_phone_key`]), or an element of an array that is, is a
/// phone when [`keyed_phone`] says so (`{"phone":14155552671}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonLex {
    /// `None` until the first character other than JSON white space.
    json: Option<bool>,
    in_string: bool,
    escaped: bool,
    /// Containers open.
    depth: usize,
    /// The string being read, as written (`None` past [`KEYED_TEXT_BYTES`]).
    string: Option<Vec<u8>>,
    /// The last string closed (a key when a `:` follows).
    last_string: Option<Vec<u8>>,
    /// A value is due after a `:` whose key names a phone.
    phone_value: bool,
    /// The depth of an array that is a phone key's value.
    phone_array: Option<usize>,
    /// The string being read is a value under a phone key.
    phone_string: bool,
}

/// What [`JsonLex::scan`] finds in a JSON document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonSpans {
    /// The bare tokens (a token reaching the end of the text included).
    pub tokens: Vec<(usize, usize)>,
    /// Phones under a phone key: a whole number token, or a string's
    /// content. A stream needs no more to hold an open string whole: it holds
    /// back at least `max_match_chars` (256 or more) characters as the
    /// detectors see them, more than a phone has, so no cut falls inside one.
    pub phones: Vec<(usize, usize)>,
}

/// JSON's white space.
fn json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// A key as written between its quotes, its escapes read (as written when
/// they are broken).
fn key_text(raw: &[u8]) -> String {
    let raw = String::from_utf8_lossy(raw);
    serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap_or_else(|_| raw.into_owned())
}

impl JsonLex {
    /// Whether a value read now sits under a phone key.
    fn under_phone(&self) -> bool {
        self.phone_value || self.phone_array == Some(self.depth)
    }

    /// Reads `text` on from where the lexer stands. `None` when the text is
    /// not JSON (or not known to be yet); otherwise its bare tokens and its
    /// phones under phone keys, as spans offset by `base`.
    pub fn scan(&mut self, text: &str, base: usize) -> Option<JsonSpans> {
        let b = text.as_bytes();
        let mut i = 0;
        if self.json.is_none() {
            while i < b.len() && json_space(b[i]) {
                i += 1;
            }
            if i < b.len() {
                self.json = Some(matches!(b[i], b'{' | b'['));
            }
        }
        if self.json != Some(true) {
            return None;
        }
        let mut out = JsonSpans::default();
        let mut start = None;
        // where the open string's content began in `text` (unknown when it began before)
        let mut content = (self.in_string && self.string.as_ref().is_some_and(Vec::is_empty)).then_some(0);
        let end_token = |lex: &Self, s: usize, e: usize, out: &mut JsonSpans| {
            out.tokens.push((base + s, base + e));
            if lex.under_phone() && keyed_phone(&text[s..e], true) {
                out.phones.push((base + s, base + e));
            }
        };
        while i < b.len() {
            let x = b[i];
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if x == b'\\' {
                    self.escaped = true;
                } else if x == b'"' {
                    self.in_string = false;
                    if self.phone_string {
                        if let Some(c) = content
                            && keyed_phone(&text[c..i], false)
                        {
                            out.phones.push((base + c, base + i));
                        }
                        self.phone_string = false;
                    }
                    self.last_string = self.string.take();
                    self.phone_value = false;
                }
                if self.in_string
                    && let Some(s) = &mut self.string
                {
                    if s.len() < KEYED_TEXT_BYTES {
                        s.push(x);
                    } else {
                        self.string = None;
                    }
                }
            } else if json_space(x) || matches!(x, b'{' | b'}' | b'[' | b']' | b',' | b':' | b'"') {
                if let Some(s) = start.take() {
                    end_token(self, s, i, &mut out);
                }
                match x {
                    b'{' => {
                        self.depth += 1;
                        self.phone_value = false;
                    }
                    b'[' => {
                        self.depth += 1;
                        if self.phone_value {
                            self.phone_array = Some(self.depth);
                        }
                        self.phone_value = false;
                    }
                    b'}' | b']' => {
                        if self.phone_array == Some(self.depth) {
                            self.phone_array = None;
                        }
                        self.depth = self.depth.saturating_sub(1);
                        self.phone_value = false;
                    }
                    b',' => self.phone_value = false,
                    b':' => {
                        self.phone_value = self.last_string.take().is_some_and(|k| is_phone_key(&key_text(&k)));
                    }
                    b'"' => {
                        self.in_string = true;
                        self.phone_string = self.under_phone();
                        self.string = Some(Vec::new());
                        content = Some(i + 1);
                    }
                    _ => {}
                }
                if x != b':' && x != b'"' && !json_space(x) {
                    self.last_string = None;
                }
            } else {
                if start.is_none() {
                    start = Some(i);
                }
                self.last_string = None;
            }
            i += 1;
        }
        if let Some(s) = start {
            end_token(self, s, b.len(), &mut out);
        }
        Some(out)
    }
}

/// `text` escaped for the inside of a JSON string.
fn push_json_escaped(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
}

/// How much a [`StreamBuffer`] holds back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// Characters (as the detectors see them) always held back, so no later
    /// text can complete a match that starts before the cut.
    pub chars: usize,
    /// Bytes a buffer may hold at most after a scan; past it the stream fails.
    pub max_bytes: usize,
}

/// Why [`StreamBuffer::push`] emitted nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A value was found and the strategy is `Block`.
    Blocked,
    /// More than the cap was held back waiting for a value to end (an
    /// endless digit run, a flood of invisible characters): the held text is
    /// dropped, never emitted, and the stream must fail.
    Overflow {
        /// The bytes held when the cap was passed.
        held: usize,
    },
}

/// The held-back tail of one streamed channel (answer text, reasoning, one
/// tool call's argument text, one tool's progress).
#[derive(Debug, Default)]
pub struct StreamBuffer {
    /// Already-emitted original text kept as context (its last few characters).
    context: String,
    /// Received text not yet emitted.
    pending: String,
    /// Do not scan again before `pending` is this long (a held value keeps growing).
    next_scan: usize,
    /// The digest of everything emitted.
    pub emitted: Digest,
    /// Where the emitted text stands as JSON (a bare token is never cut in two).
    lex: JsonLex,
}

/// Emit in batches of at least this many characters beyond the held-back
/// tail, so the detectors scan the buffer once per batch, not once per delta.
const BATCH_CHARS: usize = 64;

/// Context characters kept before the pending text (edges, and a JSON escape cut in two).
const CONTEXT_CHARS: usize = 16;

/// The longest escape a stream may end in the middle of (`\uD83D\uDE00`),
/// with room for one more level of escaping: held back beyond the hold, since
/// its characters count one each until it is whole.
const ESCAPE_CHARS: usize = 16;

/// Where the last `keep` characters of `text` begin, counted as the detectors
/// see them (normalised: a zero-width character counts for nothing, an escape
/// for one); 0 when it has no more.
fn tail_start(text: &str, keep: usize) -> usize {
    let norm = normalise(text);
    let n = norm.text.chars().count();
    if n <= keep {
        return 0;
    }
    let (at, _) = norm.text.char_indices().nth(n - keep).expect("n > keep");
    norm.orig(at)
}

impl StreamBuffer {
    /// Adds `piece` and returns the replaced text that is safe to emit now;
    /// `flush` emits everything. [`Stop::Blocked`] for `Block` when a value
    /// was found; [`Stop::Overflow`] when more than `hold.max_bytes` bytes would stay
    /// held back after the scan (what was held is dropped, never emitted).
    ///
    /// Safe means: no raw candidate match of the pending text straddles the
    /// cut (a match reaching the end of the buffer may still grow, so it is
    /// held whole, however long), and at least `hold` characters stay behind
    /// it, so no later text can complete a match that starts before the cut
    /// (every bounded detector matches at most `hold` characters). So the
    /// emitted pieces, concatenated, equal redacting the whole stream at once.
    pub fn push(
        &mut self,
        engine: &Engine,
        piece: &str,
        hold: Hold,
        flush: bool,
        counts: &mut PiiCounts,
    ) -> Result<String, Stop> {
        self.pending.push_str(piece);
        let (max_held, hold) = (hold.max_bytes, hold.chars);
        let over = self.pending.len() > max_held;
        if !flush && !over && (self.pending.len() <= hold + 1 + BATCH_CHARS || self.pending.len() < self.next_scan) {
            // Nothing can be emitted yet (fewer bytes than characters to hold back, plus a batch).
            return Ok(String::new());
        }
        let from = self.context.len();
        let mut hay = std::mem::take(&mut self.context);
        hay.push_str(&self.pending);
        // In a JSON stream a bare token is never cut in two: a value in it
        // turns the whole token into a string (see `JsonLex`).
        let json = self.lex.clone().scan(&hay[from..], from);
        let bare = json.as_ref().map(|j| j.tokens.as_slice());
        let mut cands = engine.candidates(&hay, from, Scope::Stream, bare);
        cands.extend(Engine::keyed(json.as_ref(), &engine.detectors));
        // Hold back `hold` characters *as the detectors see them*: zero-width
        // characters and escapes take no or one place there, however long
        // they are here (plus room for an escape cut off at the end).
        let mut cut = if flush {
            hay.len()
        } else {
            from + tail_start(&self.pending, hold + 1 + ESCAPE_CHARS)
        };
        if !flush {
            // Move the cut before any candidate straddling it (repeat: moving can land inside another).
            loop {
                let straddling = cands
                    .iter()
                    .map(|c| (c.hold_start, c.hold_end))
                    .chain(bare.into_iter().flatten().copied())
                    .filter(|&(s, e)| s < cut && e > cut)
                    .map(|(s, _)| s)
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
        let matches = Engine::select(cands.into_iter().filter(|c| c.hold_end <= cut).collect());
        let out = engine
            .replace(&hay, from, cut, &matches, bare, counts)
            .map_err(|()| Stop::Blocked);
        self.lex.scan(&hay[from..cut], from);
        if hay.len() - cut > max_held {
            // Fail closed: the held text is never emitted, and not kept either.
            let held = hay.len() - cut;
            *self = Self::default();
            return out.and(Err(Stop::Overflow { held }));
        }
        // Keep the tail pending and a little emitted context.
        self.pending = hay[cut..].to_owned();
        let emitted = &hay[..cut];
        self.context = emitted[tail_start(emitted, CONTEXT_CHARS)..].to_owned();
        // A long held value: scan again only once it has grown by a quarter (or a batch).
        self.next_scan = self.pending.len() + BATCH_CHARS.max(self.pending.len() / 4);
        if let Ok(text) = &out {
            self.emitted.push(text);
        }
        out
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// Each gate against its own pattern: a gate never shuts on a text its
/// pattern matches (the wide gate), or on one holding a value its check
/// accepts (the whole-text gate), on text built to open and just miss them.
#[cfg(test)]
mod gate_tests {
    use proptest::prelude::*;

    use super::*;

    /// Pieces that make, break and nearly make the shapes the gates read.
    const PIECES: &[&str] = &[
        "0",
        "1",
        "4",
        "9",
        "12",
        "123",
        "4111",
        "55",
        "2024",
        "a",
        "F",
        "e8",
        "ffff",
        "x",
        "AB",
        "GB",
        "Z",
        " ",
        "  ",
        "\t",
        "\n",
        "\x0b",
        "\x0c",
        "\u{85}",
        " \n",
        ".",
        "..",
        "-",
        "--",
        "-----",
        "/",
        ":",
        "::",
        "+",
        "(",
        ")",
        "@",
        "://",
        "www",
        "WwW",
        ".com",
        "_",
        "~",
        "=",
        "\"",
        "'",
        "key",
        "Token",
        "PASS",
        "ſecret",
        "eyJ",
        "AKIA",
        "sk-",
        "xoxb-",
        "bearer ",
        "-----BEGIN RSA PRIVATE KEY-----",
        "é",
        "—",
        "。",
        "日本",
    ];

    fn all_detectors() -> Vec<Detector> {
        PII_TYPES
            .iter()
            .flat_map(|t| builtin(t).expect("a built-in type"))
            .collect()
    }

    fn check(text: &str) -> std::result::Result<(), TestCaseError> {
        let detectors = all_detectors();
        let reference = Engine::new(detectors.clone(), crate::Strategy::Redact).reference();
        let norm = normalise(text);
        let gates = Gates::new(&norm.text);
        let valid = reference.candidates(text, 0, Scope::Whole, None);
        for (i, d) in detectors.iter().enumerate() {
            if d.regex.is_match(&norm.text) {
                prop_assert!(
                    gates.open(d.gate),
                    "{} matches {:?} but {:?} is shut",
                    d.name,
                    norm.text,
                    d.gate
                );
            }
            if valid.iter().any(|c| c.valid && c.detector == i) {
                prop_assert!(
                    gates.open(d.whole_gate),
                    "{} finds a value in {:?} but {:?} is shut",
                    d.name,
                    norm.text,
                    d.whole_gate
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn no_gate_shuts_on_a_text_its_pattern_matches(picks in proptest::collection::vec(0usize..PIECES.len(), 0..40)) {
            let text: String = picks.iter().map(|&i| PIECES[i]).collect();
            check(&text)?;
        }

        #[test]
        fn no_gate_shuts_on_number_like_text(text in "[0-9A-Fa-f:.+() \\-]{0,48}") {
            check(&text)?;
        }

        /// Phone numbers and IPv6 addresses at the edges of what their checks accept.
        #[test]
        fn no_gate_shuts_on_a_value_at_its_edge(
            text in concat!(
                r"x\+?\(?[0-9]{1,4}\)?([ .\-]?\(?[0-9]{1,4}\)?){1,5} x",
                r"|x([0-9a-f]{1,4}:){5,7}([0-9a-f]{1,4}|[0-9]{1,3}(\.[0-9]{1,3}){3}) x",
            ),
        ) {
            check(&text)?;
        }
    }

    #[test]
    fn a_plain_ascii_run_stops_at_the_first_backslash_or_non_ascii_byte() {
        let bytes: Vec<u8> = (0..=255u8).chain(0..=255u8).rev().collect();
        for from in 0..bytes.len() {
            let want = bytes[from..]
                .iter()
                .position(|&x| !x.is_ascii() || x == b'\\')
                .unwrap_or(bytes.len() - from);
            assert_eq!(plain_ascii_run(&bytes[from..]), want, "from {from}");
        }
        assert_eq!(plain_ascii_run(b"abcdefgh\\ijk"), 8);
        assert_eq!(plain_ascii_run(b"abc\x01\x00defghijk"), 13);
    }

    #[test]
    fn every_gate_opens_on_a_value_of_its_type() {
        let values = [
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc",
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "Bearer abcdef0123456789xyz",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "password=hunter2hunter2",
            "{\"client_secret\": \"x\"}",
            "ann.lee@example.com",
            "https://example.com/a",
            "4111 1111 1111 1111",
            "GB82 WEST 1234 5698 7654 32",
            "2001:db8::8a2e:370:7334",
            "00:1A:2b:3C:4d:5E",
            "192.168.1.1",
            "078-05-1120",
            "+1 (415) 555-2671",
            "(415) 555-2671",
            "415.555.2671",
            "+49 30 90182",
            "0:0:0:0:0:ffff:1.2.3.4",
            "1:2:3:4:5:6:7:8",
        ];
        for text in values {
            check(text).unwrap();
            let gates = Gates::new(text);
            let opened = all_detectors().iter().filter(|d| gates.open(d.whole_gate)).count();
            assert!(opened > 0, "no gate opens on {text:?}");
        }
    }
}

/// The fold against the Unicode database itself: every character of
/// General_Category Nd, Zs, Zl, Zp and Cf, walked one by one.
#[cfg(test)]
mod fold_tests {
    use icu_properties::props::GeneralCategory as G;
    use icu_properties::CodePointMapData;

    use super::*;

    /// What [`with_folded`] makes of `c`.
    fn fold_full(c: char) -> Folded {
        with_folded(c, Folded::clone)
    }

    /// The General_Category of `c`, from the Unicode database.
    fn category(c: char) -> G {
        CodePointMapData::<G>::new().get(c)
    }

    #[test]
    fn every_decimal_digit_folds_to_its_value_in_its_run_of_ten() {
        let (mut digits, mut runs) = (0, 0);
        let mut c = '\u{80}';
        while c < char::MAX {
            if category(c) != G::DecimalNumber {
                c = char::from_u32(c as u32 + 1).unwrap_or('\u{E000}');
                continue;
            }
            // a run of ten Nd characters, folding to 0..=9 in order
            runs += 1;
            let zero = c as u32;
            for value in 0..10u8 {
                let d = char::from_u32(zero + u32::from(value)).expect("a digit run holds no surrogate");
                assert_eq!(category(d), G::DecimalNumber, "U+{:04X} ends its run early", d as u32);
                assert!(d.is_numeric(), "U+{:04X}", d as u32);
                assert_eq!(fold(d), Some(char::from(b'0' + value)), "U+{:04X}", d as u32);
                digits += 1;
            }
            c = char::from_u32(zero + 10).expect("past a digit run");
        }
        // as of Unicode 18: 76 runs besides ASCII (the hand list had 23 blocks and the fullwidth forms)
        assert_eq!(
            digits,
            (0x80..=0x10FFFFu32)
                .filter_map(char::from_u32)
                .filter(|&c| category(c) == G::DecimalNumber)
                .count()
        );
        assert!(runs >= 76, "{runs} runs of decimal digits");
        // and nothing else folds to a digit by `fold` (the compatibility fold
        // after it spells circled and superscript digits as digits: see below)
        for c in ('\u{80}'..=char::MAX).filter(|&c| category(c) != G::DecimalNumber) {
            assert!(
                !fold(c).is_some_and(|f| f.is_ascii_digit()),
                "U+{:04X} folds to a digit",
                c as u32
            );
        }
    }

    #[test]
    fn every_separator_is_a_space_and_every_format_character_is_dropped() {
        let (mut spaces, mut formats) = (0, 0);
        for c in '\u{80}'..=char::MAX {
            match category(c) {
                G::SpaceSeparator | G::LineSeparator | G::ParagraphSeparator => {
                    assert_eq!(fold(c), Some(' '), "U+{:04X}", c as u32);
                    spaces += 1;
                }
                G::Format => {
                    assert_eq!(fold(c), None, "U+{:04X}", c as u32);
                    formats += 1;
                }
                _ => {}
            }
        }
        assert_eq!(fold('\u{85}'), Some('\n'), "NEL is a line break");
        assert!(
            spaces >= 18 && formats >= 160,
            "{spaces} separators, {formats} format characters"
        );
    }

    /// The compatibility fold is a fixed point: what it gives folds to
    /// itself, so one pass reads a text whole.
    #[test]
    fn the_full_fold_of_every_character_folds_to_itself() {
        let mut changed = 0;
        for c in '\u{80}'..=char::MAX {
            let out = match fold_full(c) {
                Folded::Drop => continue,
                Folded::One(f) => f.to_string(),
                Folded::Many(f) => f,
            };
            if out != c.to_string() {
                changed += 1;
            }
            for d in out.chars() {
                assert_eq!(fold_full(d), Folded::One(d), "U+{:04X} gives {out:?}", c as u32);
            }
        }
        assert!(changed > 3000, "{changed} characters fold");
    }

    /// The one-lookup shortcut ([`nfkc_inert`]) never passes a character
    /// the normaliser would change, and the per-thread memory of its
    /// answers gives what it gives (each character asked twice).
    #[test]
    fn the_nfkc_shortcut_passes_no_character_nfkc_changes() {
        let mut inert = 0;
        for c in '\u{80}'..=char::MAX {
            let mut buf = [0u8; 4];
            let one: &str = c.encode_utf8(&mut buf);
            if nfkc_inert(c) {
                assert_eq!(NFKC.normalize(one), one, "U+{:04X}", c as u32);
                inert += 1;
            }
            if fold(c) == Some(c) {
                let first = fold_full(c);
                assert_eq!(first, nfkc_fold(c), "U+{:04X}", c as u32);
                assert_eq!(fold_full(c), first, "U+{:04X} asked again", c as u32);
            }
        }
        assert!(inert > 1_000_000, "{inert} characters pass by the shortcut");
    }

    /// The old map: one original offset a normalised byte, folded character
    /// by character and escape by escape, decoded again as `normalise` does.
    fn byte_map(text: &str) -> (String, Vec<usize>) {
        let pass = |text: &str| -> (String, Vec<usize>, bool) {
            let (mut out, mut map, mut pairs, mut i) = (String::new(), Vec::new(), false, 0);
            while i < text.len() {
                let (c, len) = next_char(&text[i..]);
                pairs |= len == 2 && c == '\\';
                let f = match fold_full(c) {
                    Folded::Drop => String::new(),
                    Folded::One(f) => f.to_string(),
                    Folded::Many(f) => f,
                };
                map.extend(std::iter::repeat_n(i, f.len()));
                out.push_str(&f);
                i += len;
            }
            map.push(text.len());
            (out, map, pairs)
        };
        let (mut out, mut map, mut pairs) = pass(text);
        for _ in 0..3 {
            if !pairs || !out.contains('\\') {
                break;
            }
            let (again, inner, more) = pass(&out);
            map = inner.iter().map(|&i| map[i]).collect();
            out = again;
            pairs = more;
        }
        (out, map)
    }

    const MAP_PIECES: &[&str] = &[
        "a",
        "4111",
        " ",
        "…",
        "‥",
        "․",
        "é",
        "日本",
        "𝐃",
        "ﬁ",
        "①",
        "\u{200B}",
        "\u{301}",
        "—",
        "。",
        "＠",
        "\\",
        "\\n",
        "\\u0041",
        "\\\\u0040",
        "\\\\",
        "\\ud83d\\ude00",
        "x\\",
    ];

    proptest::proptest! {
        /// The run map answers as the byte map did, at every offset.
        #[test]
        fn the_run_map_agrees_with_a_byte_by_byte_map(picks in proptest::collection::vec(0usize..MAP_PIECES.len(), 0..24)) {
            let text: String = picks.iter().map(|&i| MAP_PIECES[i]).collect();
            let norm = normalise(&text);
            let (want, map) = byte_map(&text);
            proptest::prop_assert_eq!(norm.text.as_ref(), want.as_str());
            // a text read in place has no map (its offsets are its own)
            if norm.map.is_some() {
                for (k, &o) in map.iter().enumerate() {
                    proptest::prop_assert_eq!(norm.orig(k), o, "orig({}) of {:?}", k, text);
                }
                for at in 0..=text.len() {
                    let want = map.partition_point(|&o| o < at);
                    proptest::prop_assert_eq!(norm.norm(at), want, "norm({}) of {:?}", at, text);
                }
            }
        }
    }

    #[test]
    fn compatibility_letters_digits_and_leaders_fold_to_ascii() {
        // every Latin letter and digit of the mathematical alphanumerics
        let mut letters = 0;
        for u in (0x1D400..=0x1D6A3).chain(0x1D7CE..=0x1D7FF) {
            let Some(c) = char::from_u32(u) else { continue };
            if !(category(c) == G::UppercaseLetter
                || category(c) == G::LowercaseLetter
                || category(c) == G::DecimalNumber)
            {
                continue;
            }
            match fold_full(c) {
                Folded::One(f) if f.is_ascii_alphanumeric() => letters += 1,
                other => panic!("U+{u:04X} folds to {other:?}"),
            }
        }
        assert!(letters >= 700, "{letters}");
        for (c, want) in [
            ('\u{2024}', "."),
            ('\u{2025}', ".."),
            ('\u{2026}', "..."),
            ('\u{FE52}', "."),
            ('\u{2460}', "1"),
            ('\u{00B2}', "2"),
            ('\u{FB01}', "fi"),
            ('\u{1D400}', "A"),
            ('\u{017F}', "s"),
        ] {
            let got = match fold_full(c) {
                Folded::One(f) => f.to_string(),
                Folded::Many(f) => f,
                Folded::Drop => String::new(),
            };
            assert_eq!(got, want, "U+{:04X}", c as u32);
        }
        // a text that folds keeps each value's span in the original
        let text = "a 4111\u{2025}1111\u{2025}1111\u{2025}1111 b";
        let found = crate::scan(text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            &text[found[0].start..found[0].end],
            "4111\u{2025}1111\u{2025}1111\u{2025}1111"
        );
    }

    #[test]
    fn card_groups_split_by_any_white_space_mixed_are_one_card() {
        let engine = Engine::new(builtin("credit_card").expect("a built-in type"), Strategy::Redact);
        for sep in [
            "\u{85}", "\x0b", "\x0c", "\r", "\t", "\u{2028}", "\u{2029}", "\u{1680}", " \n", "\r\n", "\n ",
        ] {
            let text = format!("card 4111{sep}1111{sep}1111{sep}1111 ok");
            let (out, _) = engine.redact(&text).expect("redact");
            assert_eq!(out, "card [REDACTED_CREDIT_CARD] ok", "{sep:?}");
        }
        // a different white space between each group: a card wrapped over lines
        for text in [
            "4111 1111\n1111 1111",
            "4111\t1111 \n1111\u{85}1111",
            "4111\x0c1111\x0b1111 1111",
        ] {
            let (out, _) = engine.redact(text).expect("redact");
            assert_eq!(out, "[REDACTED_CREDIT_CARD]", "{text:?}");
        }
        // punctuation separators still have to agree
        let (out, _) = engine.redact("4111-1111.1111 1111").expect("redact");
        assert_eq!(out, "4111-1111.1111 1111");
    }
}

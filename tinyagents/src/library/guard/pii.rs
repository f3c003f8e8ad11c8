//! [`PiiMiddleware`]: detects PII (secrets and API keys, private keys, emails,
//! URLs, Luhn-checked card numbers, IBANs, IP and MAC addresses, US SSNs,
//! phone numbers, user patterns) and blocks, redacts, masks or hashes it in
//! requests, responses, streamed deltas (text, reasoning, tool-call
//! arguments, tool progress), tool arguments, tool results and the transcript.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};
use tinyagents_macros::{middleware, MiddlewareConfig};

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::{AddrHasher, AddrMap, ContentPart, Message, Role};
use crate::harness::middleware::{MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, RunState, ToolHandler};
use crate::harness::model::{
    DeltaContent, FinishReason, ListMark, ModelDelta, ModelRequest, ModelResponse, SharedList,
};
use crate::harness::run::AgentRun;
use crate::harness::secrets::redactor;
use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};
use tinyagents_pii::{
    builtin, custom, finder, is_phone_key, is_secret_key, keyed_phone, Digest, Engine, Hold, PiiCounts, Stop, Strategy,
    StreamBuffer, BUILTIN_MAX_CHARS, PII_TYPES,
};

crate::config_enum! {
    /// What to do with a detected value (the engine's
    /// [`Strategy`](tinyagents_pii::Strategy), named as agent files name it).
    pub enum PiiStrategy {
        /// Refuse the text: the hook fails with a `Validation` error (counts only).
        Block = "block",
        /// Replace the value with `[REDACTED_TYPE]`.
        Redact = "redact",
        /// Keep the last four letters or digits, never more than a third of them (an
        /// email keeps its first letter and domain), star the rest.
        Mask = "mask",
        /// Replace the value with `<type_hash:…>`, a stable 64-bit FNV-1a pseudonym (not a cryptographic hash).
        Hash = "hash",
    }
}

impl From<PiiStrategy> for Strategy {
    fn from(strategy: PiiStrategy) -> Self {
        match strategy {
            PiiStrategy::Block => Strategy::Block,
            PiiStrategy::Redact => Strategy::Redact,
            PiiStrategy::Mask => Strategy::Mask,
            PiiStrategy::Hash => Strategy::Hash,
        }
    }
}

/// Options of [`PiiMiddleware`] (`type = "pii"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::{PiiConfig, PiiStrategy};
///
/// let c: PiiConfig = from_toml_str("strategy = \"mask\"\ntypes = [\"email\", \"credit_card\"]").unwrap();
/// assert_eq!(c.strategy, PiiStrategy::Mask);
/// let err = from_toml_str::<PiiConfig>("custom = { employee_id = \"EMP-(\" }").unwrap_err();
/// assert!(err.to_string().contains("custom.employee_id"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "pii", builds = PiiMiddleware, validate = check_pii_config)]
pub struct PiiConfig {
    /// What to do with a detected value.
    #[config(default = "redact")]
    pub strategy: PiiStrategy,
    /// The built-in types to detect: `secret`, `email`, `url`, `credit_card`, `iban`, `ipv6`, `mac_address`, `ipv4`, `ssn`, `phone`.
    #[config(default = PII_TYPES.iter().map(|s| (*s).to_owned()).collect())]
    pub types: Vec<String>,
    /// User patterns by type name (regular expressions, run on the normalised text; in a stream, a value that matches only once complete must fit in `max_match_chars` characters).
    #[config(default = BTreeMap::new())]
    pub custom: BTreeMap<String, String>,
    /// Check the request's messages before each model call.
    #[config(default = true)]
    pub apply_to_input: bool,
    /// Check the model's reply and its streamed text.
    #[config(default = true)]
    pub apply_to_output: bool,
    /// Check tool-call arguments.
    #[config(default = true)]
    pub apply_to_tool_args: bool,
    /// Check tool results.
    #[config(default = true)]
    pub apply_to_tool_results: bool,
    /// How many characters each stream holds back (at least the longest bounded built-in value, 250); a match that reaches the end of the stream is held however long.
    #[config(default = 256, range = 256..=65536)]
    pub max_match_chars: usize,
    /// How many bytes one stream may hold back waiting for a value to end (an endless digit run or URL, a flood of invisible characters); past it the stream fails closed with a `LimitExceeded` error and the held text is dropped. At least 16 bytes per `max_match_chars` character.
    #[config(default = 1048576, range = 65536..=134217728)]
    pub max_held_bytes: usize,
}

fn check_pii_config(c: &PiiConfig) -> std::result::Result<(), ConfigViolation> {
    for t in &c.types {
        if !PII_TYPES.contains(&t.as_str()) {
            return Err(
                ConfigViolation::new("types", format!("each entry must be one of {}", PII_TYPES.join(", ")))
                    .with_value(t),
            );
        }
    }
    for (name, pattern) in &c.custom {
        if PII_TYPES.contains(&name.as_str()) || name.is_empty() {
            return Err(ConfigViolation::new(
                format!("custom.{name}"),
                "a custom type needs its own non-empty name, not a built-in one",
            ));
        }
        if let Err(e) = custom(name, pattern) {
            let first = e.lines().last().unwrap_or("").trim().to_owned();
            return Err(ConfigViolation::new(
                format!("custom.{name}"),
                format!("must be a valid regular expression ({first})"),
            )
            .with_value(pattern));
        }
    }
    if c.max_held_bytes < HELD_BYTES_PER_CHAR * c.max_match_chars {
        return Err(ConfigViolation::new(
            "max_held_bytes",
            format!(
                "must be at least {HELD_BYTES_PER_CHAR} bytes per `max_match_chars` character ({} for {}): raise it or lower `max_match_chars`",
                HELD_BYTES_PER_CHAR * c.max_match_chars,
                c.max_match_chars
            ),
        )
        .with_value(c.max_held_bytes));
    }
    Ok(())
}

/// The bytes one held character may take in the original text: an escaped
/// surrogate pair (`\uD83D\uDE00`) is 12, with room to spare.
const HELD_BYTES_PER_CHAR: usize = 16;

/// The detectors of built-in type `name`: the engine's, and for `secret`
/// also the secrets registered with the process's
/// [`redactor`](crate::harness::secrets::redactor) (a provider's API key, a
/// store's password, `redactor().add(…)`), found as the redactor finds them.
fn builtin_detectors(name: &str) -> Option<Vec<tinyagents_pii::Detector>> {
    let mut detectors = builtin(name)?;
    if name == "secret" {
        detectors.push(finder(
            "secret",
            std::sync::Arc::new(|text: &str, out: &mut Vec<(usize, usize)>| redactor().find(text, out)),
        ));
    }
    Some(detectors)
}

impl From<PiiConfig> for PiiMiddleware {
    fn from(c: PiiConfig) -> Self {
        let strategy = c.strategy;
        let mut detectors: Vec<_> = c.types.iter().filter_map(|t| builtin_detectors(t)).flatten().collect();
        for (name, pattern) in &c.custom {
            // `validate` compiled it already; a pattern that does not compile detects nothing
            // rather than panicking, and is reported there.
            if let Ok(d) = custom(name, pattern) {
                detectors.push(d);
            }
        }
        Self {
            engine: Engine::new(detectors, strategy.into()),
            apply_to_input: c.apply_to_input,
            apply_to_output: c.apply_to_output,
            apply_to_tool_args: c.apply_to_tool_args,
            apply_to_tool_results: c.apply_to_tool_results,
            hold: Hold {
                chars: c.max_match_chars.max(BUILTIN_MAX_CHARS),
                max_bytes: c.max_held_bytes,
            },
            remember: true,
        }
    }
}

/// What one registration keeps in a run (its run state).
#[derive(Default)]
struct PiiRun {
    /// The model stream's buffers.
    stream: Option<StreamState>,
    /// Tool progress buffers, by call id.
    tool_streams: HashMap<String, StreamBuffer>,
    /// Digests of the results scrubbed in `wrap_tool`, by call id, so
    /// `after_tool` does not scan them again.
    scrubbed: HashMap<String, Digest>,
    /// What passed this middleware on its way into the transcript (the
    /// model's replies, by a hash of the message; tool results, by call id),
    /// so the transcript scrub leaves them as they were sent and scrubs only
    /// what never passed it (a caller's earlier turns, injections).
    passed: std::collections::HashSet<u64>,
    /// What `before_model` found in each request message ([`InstanceVerdicts`]).
    verdicts: InstanceVerdicts,
}

#[derive(Default)]
struct StreamState {
    attempt: u32,
    /// The finish delta came: every tail was released as final.
    finished: bool,
    /// The reply was cut by the output limit: the text tails stay held for a
    /// continuation (`output_limit_recovery`), which streams on where they
    /// stopped; `after_model` releases what no continuation took.
    cut: bool,
    text: StreamBuffer,
    reasoning: StreamBuffer,
    /// The argument text of each streamed tool call, by index.
    args: BTreeMap<u32, StreamBuffer>,
}

/// The key of a message in [`PiiRun::passed`]: a tool message's call id (it
/// passed with its call), else its role, text and tool calls.
fn passed_key(m: &Message) -> u64 {
    use std::hash::{Hash, Hasher};
    if m.role == Role::Tool {
        return tool_result_key(m.tool_call_id.as_deref().unwrap_or_default());
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    m.role.as_str().hash(&mut h);
    m.text().hash(&mut h);
    for c in &m.tool_calls {
        c.id.hash(&mut h);
        c.name.hash(&mut h);
        c.arguments.to_string().hash(&mut h);
    }
    h.finish()
}

/// [`passed_key`] of the tool message answering call `call_id`.
fn tool_result_key(call_id: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    call_id.hash(&mut h);
    h.finish()
}

/// What `before_model` found in each request message, by message (part of
/// the run state), so a history is not scanned again every turn.
///
/// A verdict is kept for the message's shared fields ([`Message::addr`]) and
/// holds a clone of the message as it was scanned, so the address stays that
/// message's: fields are shared only while unchanged (a change copies them
/// first), so a message at a known address is exactly the one scanned. An
/// edited, replaced, new or reloaded message has other fields, and is scanned
/// (fail closed). When something was replaced, the verdict holds the scrubbed
/// message and the counts. Verdicts of messages no longer in the request are
/// dropped (once they are as many as the request's messages).
///
/// The leading messages that sit where they sat in the previous request are
/// known by place (one address comparison each), and what this middleware
/// handed on for them is kept: the request it gets is the run's history
/// (one shared list), and the one it hands on is its own last output
/// extended by what is new, so a turn costs what the history added, not its
/// length.
#[derive(Default)]
struct InstanceVerdicts {
    by_message: AddrMap<Verdict>,
    /// The addresses of the last request's messages, in order (each one kept
    /// alive by its verdict).
    last: Vec<usize>,
    /// The last request's list: when this one is that list appended to,
    /// `last` is its start without comparing a message.
    mark: ListMark,
    /// What was handed on for `last` when any message of it was replaced
    /// (the same length; `None`: the request went on as it came).
    out: Option<SharedList<Message>>,
    /// The places in `last` whose message was replaced, in order, with what
    /// was found there.
    replaced: Vec<(usize, PiiCounts)>,
    /// The sum of `replaced`'s counts (what each request reports).
    found: PiiCounts,
}

/// What one message held when it was scanned.
struct Verdict {
    /// The message as scanned (kept, so its address is not reused).
    _scanned: Message,
    /// `None`: nothing detected. Otherwise the scrubbed message and what was
    /// found (boxed: most messages hold nothing, and a long run keeps a
    /// verdict per message, so the common entry stays 16 bytes).
    scrubbed: Option<Box<(Message, PiiCounts)>>,
}

fn result_digest(result: &ToolResult) -> Digest {
    let mut d = Digest::default();
    d.push(&result.content);
    d.push("\0");
    d.push(result.error.as_deref().unwrap_or(""));
    d.push("\0");
    if let Some(data) = &result.data {
        d.push(&data.to_string());
    }
    d
}

/// Detects PII and blocks, redacts, masks or hashes it.
///
/// Applies to the request's messages (`before_model`), the streamed answer
/// and reasoning text and the streamed tool-call argument text
/// (`on_model_delta`), the reply (`wrap_model`), tool-call arguments
/// (`before_tool`, and the reply's tool calls), a tool's progress deltas
/// (`on_tool_delta`), tool results (`after_tool`) and the transcript handed
/// back (`after_agent`). JSON is scrubbed in values *and* object keys; every
/// string and number under a key that names a secret (`password`, `api_key`,
/// `clientSecret`, `…_token`, `credentials`, `password_confirmation`, `pwd`,
/// `pin`: see [`is_secret_key`]) is a secret whatever it looks like. The
/// secrets registered with the process's
/// [`redactor`](crate::harness::secrets::redactor) (a provider's API key, a
/// store's password) are `secret` values too, wherever they appear.
///
/// A value split across deltas is still caught: each stream holds back its
/// last `max_match_chars` characters, and any match that reaches its end
/// however long (a private-key block, a JWT, a long URL), and releases the
/// tail at the finish delta (a tool's progress: when the call ends), so the
/// redacted stream, concatenated, equals redacting the whole text. What a
/// stream holds back is bounded: past `max_held_bytes` (1 MiB by default) the
/// stream fails with [`TinyAgentsError::LimitExceeded`] and the held text is
/// dropped, never sent. Events report counts by type, never values.
///
/// A JSON value's numbers are checked like its strings, at any depth; a
/// number holding a value becomes a string placeholder, and a text that is a
/// JSON document (streamed argument text, a JSON answer, a tool result's
/// content) stays valid JSON.
///
/// Detection runs on a normalised copy of the text (fullwidth forms and
/// every Unicode decimal digit, General_Category Nd, folded to ASCII; other
/// compatibility characters to what they stand for by NFKC, such as the
/// mathematical alphanumerics and the dot leaders; every
/// Unicode space, line and paragraph separator to a space; invisible
/// characters dropped; JSON escapes such as `\u0040` or `\n` decoded) and
/// replaces the span of the original each value came from.
///
/// ```
/// use tinyagents::middleware::{PiiMiddleware, PiiStrategy};
///
/// let pii = PiiMiddleware::new(PiiStrategy::Redact);
/// let (text, counts) = pii.redact_text("mail ann@example.com, card 4111 1111 1111 1111").unwrap();
/// assert_eq!(text, "mail [REDACTED_EMAIL], card [REDACTED_CREDIT_CARD]");
/// assert_eq!(counts["email"], 1);
/// // a card followed by its CVV, fullwidth digits, a card glued to `_`
/// let (text, _) = pii
///     .redact_text("4111 1111 1111 1111 123 | ４１１１１１１１１１１１１１１１ | cc_5500000000000004")
///     .unwrap();
/// assert_eq!(text, "[REDACTED_CREDIT_CARD] 123 | [REDACTED_CREDIT_CARD] | cc_[REDACTED_CREDIT_CARD]");
/// ```
#[derive(Debug, Clone)]
pub struct PiiMiddleware {
    engine: Engine,
    apply_to_input: bool,
    apply_to_output: bool,
    apply_to_tool_args: bool,
    apply_to_tool_results: bool,
    hold: Hold,
    /// Keep per-message verdicts between model calls (off only for the reference scanner).
    remember: bool,
}

impl PiiMiddleware {
    /// Every built-in type, applied everywhere, with `strategy`.
    pub fn new(strategy: PiiStrategy) -> Self {
        let mut c = <PiiConfig as crate::config::MiddlewareConfig>::defaults().expect("every PII option has a default");
        c.strategy = strategy;
        c.into()
    }

    /// The same middleware detecting only these built-in types (unknown names are a `Config` error).
    pub fn only<I: IntoIterator<Item = S>, S: AsRef<str>>(mut self, types: I) -> Result<Self> {
        let mut detectors = Vec::new();
        for t in types {
            let t = t.as_ref();
            detectors.extend(builtin_detectors(t).ok_or_else(|| {
                TinyAgentsError::config(format!(
                    "`{t}` is not a built-in PII type; the types are {}",
                    PII_TYPES.join(", ")
                ))
            })?);
        }
        let custom = self
            .engine
            .detectors()
            .iter()
            .filter(|d| !PII_TYPES.contains(&d.name.as_str()))
            .cloned();
        detectors.extend(custom);
        self.engine.set_detectors(detectors);
        Ok(self)
    }

    /// The same middleware with a user pattern of type `name` (an invalid pattern is a `Config` error).
    pub fn with_pattern(mut self, name: &str, pattern: &str) -> Result<Self> {
        let d = custom(name, pattern).map_err(|e| {
            TinyAgentsError::config_at(format!("custom.{name}"), format!("invalid regular expression: {e}"))
        })?;
        let mut detectors = self.engine.detectors().to_vec();
        detectors.push(d);
        self.engine.set_detectors(detectors);
        Ok(self)
    }

    /// Which parts it checks: request messages, output, tool arguments, tool results.
    pub fn apply_to(mut self, input: bool, output: bool, tool_args: bool, tool_results: bool) -> Self {
        self.apply_to_input = input;
        self.apply_to_output = output;
        self.apply_to_tool_args = tool_args;
        self.apply_to_tool_results = tool_results;
        self
    }

    /// `text` with every detected value replaced, and the counts by type;
    /// `Err(counts)` with the `Block` strategy when anything was found.
    ///
    /// A text that is a JSON document (its first character other than white
    /// space is `{` or `[`) stays one: a value inside a number becomes a
    /// string placeholder, and replacements are escaped for a string.
    ///
    /// ```
    /// use tinyagents::middleware::{PiiMiddleware, PiiStrategy};
    ///
    /// let pii = PiiMiddleware::new(PiiStrategy::Redact);
    /// let (text, _) = pii.redact_text(r#"{"card": 4111111111111111, "n": 3}"#).unwrap();
    /// assert_eq!(text, r#"{"card": "[REDACTED_CREDIT_CARD]", "n": 3}"#);
    /// ```
    pub fn redact_text(&self, text: &str) -> std::result::Result<(String, PiiCounts), PiiCounts> {
        self.engine.redact(text)
    }

    /// `value` scrubbed as the middleware scrubs tool arguments and results:
    /// every string and number at any depth (a number holding a value becomes
    /// a string placeholder), object keys too, and whatever sits under a
    /// secret-named key; with the counts by type. `Err(counts)` with the
    /// `Block` strategy when anything was found.
    ///
    /// ```
    /// use serde_json::json;
    /// use tinyagents::middleware::{PiiMiddleware, PiiStrategy};
    ///
    /// let pii = PiiMiddleware::new(PiiStrategy::Redact);
    /// let (value, counts) = pii.redact_value(&json!({ "card": 4111111111111111u64, "n": [3] })).unwrap();
    /// assert_eq!(value, json!({ "card": "[REDACTED_CREDIT_CARD]", "n": [3] }));
    /// assert_eq!(counts["credit_card"], 1);
    /// ```
    pub fn redact_value(&self, value: &Value) -> std::result::Result<(Value, PiiCounts), PiiCounts> {
        let mut this = self.clone();
        if this.engine.strategy == Strategy::Block {
            this.engine.strategy = Strategy::Redact;
        }
        let mut out = value.clone();
        let mut counts = PiiCounts::new();
        // only `block` fails, and `this` redacts: an error is refused all the same
        let scrubbed = this.scrub_json(&mut out, "a value", &mut counts);
        if scrubbed.is_err() || (self.engine.strategy == Strategy::Block && !counts.is_empty()) {
            return Err(counts);
        }
        Ok((out, counts))
    }

    /// The same middleware with the reference scanner: every detector the
    /// census lets through scans each text (no gates, no in-place read of
    /// non-ASCII text, the patterns as they were before a rewrite for speed),
    /// and no per-message verdicts are kept between model calls. It
    /// detects exactly what the default scanner does, slower: it is the oracle
    /// of the equivalence tests and the "before" side of the PII bench, not a setting.
    #[doc(hidden)]
    pub fn reference_scanner(mut self) -> Self {
        self.engine = self.engine.reference();
        self.remember = false;
        self
    }

    /// Replaces PII in `text` in place, adding to `counts`; a `Validation` error for `Block`.
    fn scrub(&self, text: &mut String, place: &str, counts: &mut PiiCounts) -> Result<()> {
        self.engine
            .redact_in_place(text, counts)
            .map_err(|found| blocked(place, &found))
    }

    /// Scrubs every string of `value`, object keys included. Whatever sits
    /// under a key that names a secret (`password`, `api_key`, `clientSecret`,
    /// `…_token`) is a secret whatever it looks like. Two keys that become
    /// the same are kept apart with a `#2`, `#3`… suffix: nothing is lost.
    fn scrub_json(&self, value: &mut Value, place: &str, counts: &mut PiiCounts) -> Result<()> {
        match value {
            Value::String(s) => self.scrub(s, place, counts),
            Value::Number(_) => self.scrub_number(value, place, counts),
            Value::Array(items) => items.iter_mut().try_for_each(|v| self.scrub_json(v, place, counts)),
            Value::Object(map) => {
                let secrets = self.engine.detects_secrets();
                let phones = self.engine.detects("phone");
                let mut renamed = Vec::new();
                for (key, v) in map.iter_mut() {
                    if secrets && is_secret_key(key) {
                        self.secret_value(v, place, counts)?;
                    } else if phones && is_phone_key(key) {
                        self.phone_value(v, place, counts)?;
                    } else {
                        self.scrub_json(v, place, counts)?;
                    }
                    let mut k = key.clone();
                    self.scrub(&mut k, place, counts)?;
                    if k != *key {
                        renamed.push((key.clone(), k));
                    }
                }
                for (old, mut k) in renamed {
                    let v = map.remove(&old).expect("a key just seen");
                    if map.contains_key(&k) {
                        let base = k.clone();
                        let mut n = 2;
                        while map.contains_key(&k) {
                            k = format!("{base}#{n}");
                            n += 1;
                        }
                    }
                    map.insert(k, v);
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A number, checked by the same detectors as a string, as the text it
    /// is written as when the value is sent on (`serde_json`'s rendering:
    /// every integer up to `u64`/`i64` digit for digit, so every card of up
    /// to 19 digits; a longer or fractional one is an `f64`, whose rendering
    /// is what leaves). A number holding a value becomes a string with the
    /// value replaced (`4111111111111111` → `"[REDACTED_CREDIT_CARD]"`), so
    /// the document stays valid JSON.
    fn scrub_number(&self, value: &mut Value, place: &str, counts: &mut PiiCounts) -> Result<()> {
        let Value::Number(n) = value else { return Ok(()) };
        let mut text = n.to_string();
        let mut found = PiiCounts::new();
        self.scrub(&mut text, place, &mut found)?;
        if !found.is_empty() {
            merge(counts, found);
            *value = Value::String(text);
        }
        Ok(())
    }

    /// The value of a phone-named key ([`is_phone_key`]): a number, or a
    /// string, that [`keyed_phone`] calls a phone (itself, or an element of
    /// an array that is the value) becomes the phone replacement, a string;
    /// anything else is scrubbed as usual.
    fn phone_value(&self, value: &mut Value, place: &str, counts: &mut PiiCounts) -> Result<()> {
        let mut one = |v: &mut Value| -> Result<()> {
            let text = match v {
                Value::Number(n) if keyed_phone(&n.to_string(), true) => n.to_string(),
                Value::String(s) if keyed_phone(s, false) => s.clone(),
                _ => return self.scrub_json(v, place, counts),
            };
            *counts.entry("phone".to_owned()).or_default() += 1;
            if self.engine.strategy == Strategy::Block {
                return Err(blocked(place, &PiiCounts::from([("phone".to_owned(), 1)])));
            }
            *v = Value::String(self.engine.replacement("phone", &text));
            Ok(())
        };
        match value {
            Value::Array(items) => items.iter_mut().try_for_each(one),
            v => one(v),
        }
    }

    /// The value of a secret-named key: every string and number in it is a
    /// secret, whatever it looks like (a number becomes the replacement text).
    fn secret_value(&self, value: &mut Value, place: &str, counts: &mut PiiCounts) -> Result<()> {
        let text = match value {
            Value::String(s) if !s.is_empty() && !is_marker(s) => std::mem::take(s),
            Value::Number(n) => n.to_string(),
            Value::Array(items) => return items.iter_mut().try_for_each(|v| self.secret_value(v, place, counts)),
            Value::Object(map) => return map.values_mut().try_for_each(|v| self.secret_value(v, place, counts)),
            _ => return Ok(()),
        };
        *counts.entry("secret".to_owned()).or_default() += 1;
        if self.engine.strategy == Strategy::Block {
            let mut found = PiiCounts::new();
            found.insert("secret".to_owned(), 1);
            return Err(blocked(place, &found));
        }
        *value = Value::String(self.engine.replacement("secret", &text));
        Ok(())
    }

    /// Scrubs the reply: its text and reasoning (unless `clean` says the
    /// streamed text was already scrubbed and is unchanged) and its tool calls' arguments.
    fn scrub_response(&self, response: &mut ModelResponse, counts: &mut PiiCounts, clean: (bool, bool)) -> Result<()> {
        if self.apply_to_output {
            for part in &mut response.message.content {
                match part {
                    ContentPart::Text { text } if !clean.0 => self.scrub(text, "the model's reply", counts)?,
                    ContentPart::Reasoning { text } if !clean.1 => self.scrub(text, "the model's reply", counts)?,
                    _ => {}
                }
            }
        }
        if self.apply_to_tool_args {
            for call in &mut response.message.tool_calls {
                self.scrub_call(call, "the model's tool-call arguments", counts)?;
            }
        }
        Ok(())
    }
}

impl PiiMiddleware {
    /// A tool result's content, error and data.
    fn scrub_tool_result<C>(&self, ctx: &RunContext<C>, pii: &RunState<PiiRun>, result: &mut ToolResult) -> Result<()> {
        let mut counts = PiiCounts::new();
        self.scrub(&mut result.content, "a tool result", &mut counts)?;
        if let Some(e) = &mut result.error {
            self.scrub(e, "a tool result", &mut counts)?;
        }
        if let Some(data) = &mut result.data {
            self.scrub_json(data, "a tool result", &mut counts)?;
        }
        report(ctx, "tool_result", &counts);
        pii.lock()?.passed.insert(tool_result_key(&result.call_id));
        Ok(())
    }

    /// A tool call's id, name (a name carrying PII is no tool's name) and arguments.
    fn scrub_call(&self, call: &mut ToolCall, place: &str, counts: &mut PiiCounts) -> Result<()> {
        self.scrub_id(&mut call.id, place, counts)?;
        self.scrub(&mut call.name, place, counts)?;
        self.scrub_json(&mut call.arguments, place, counts)
    }

    /// A call id carrying PII becomes `pii_<digest of the id>`: no PII, and
    /// still one id per call, the same wherever it appears (the call, its
    /// result, the history), so calls and results stay paired.
    fn scrub_id(&self, id: &mut String, place: &str, counts: &mut PiiCounts) -> Result<()> {
        match self.engine.redact(id) {
            Ok((_, found)) if found.is_empty() => Ok(()),
            Ok((_, found)) => {
                merge(counts, found);
                *id = format!("pii_{:016x}", Digest::of(id).value());
                Ok(())
            }
            Err(found) => Err(blocked(place, &found)),
        }
    }

    /// What `before_model` scrubs in one request message (by `apply_to_input` / `apply_to_tool_args`).
    fn scrub_request_message(&self, message: &mut Message, counts: &mut PiiCounts) -> Result<()> {
        if self.apply_to_input {
            for part in &mut message.content {
                if let ContentPart::Text { text } | ContentPart::Reasoning { text } = part {
                    self.scrub(text, "the request", counts)?;
                }
            }
        }
        if self.apply_to_tool_args {
            for call in &mut message.tool_calls {
                self.scrub_call(call, "the request's tool calls", counts)?;
            }
            if let Some(id) = &mut message.tool_call_id {
                self.scrub_id(id, "the request's tool calls", counts)?;
            }
        }
        Ok(())
    }

    /// Every text part and tool-call argument of `message`.
    fn scrub_message(&self, message: &mut Message, counts: &mut PiiCounts) -> Result<()> {
        for part in &mut message.content {
            if let ContentPart::Text { text } | ContentPart::Reasoning { text } = part {
                self.scrub(text, "the transcript", counts)?;
            }
        }
        for call in &mut message.tool_calls {
            self.scrub_call(call, "the transcript", counts)?;
        }
        if let Some(id) = &mut message.tool_call_id {
            self.scrub_id(id, "the transcript", counts)?;
        }
        Ok(())
    }
}

/// Whether `s` is already a replacement (`[REDACTED_…]`, `<…_hash:…>`).
fn is_marker(s: &str) -> bool {
    (s.starts_with("[REDACTED_") && s.ends_with(']'))
        || (s.starts_with('<') && s.contains("_hash:") && s.ends_with('>'))
}

/// The digest of every part of `response` of one kind, concatenated.
fn digest_of(response: &ModelResponse, reasoning: bool) -> Digest {
    let mut d = Digest::default();
    for part in &response.message.content {
        match part {
            ContentPart::Text { text } if !reasoning => d.push(text),
            ContentPart::Reasoning { text } if reasoning => d.push(text),
            _ => {}
        }
    }
    d
}

fn merge(into: &mut PiiCounts, from: PiiCounts) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}

/// [`merge`] from a kept verdict: a key is copied only the first time it is
/// counted (a long history's known verdicts are added every turn).
fn merge_ref(into: &mut PiiCounts, from: &PiiCounts) {
    for (k, v) in from {
        match into.get_mut(k) {
            Some(n) => *n += v,
            None => {
                into.insert(k.clone(), *v);
            }
        }
    }
}

fn describe(counts: &PiiCounts) -> String {
    counts
        .iter()
        .map(|(k, v)| format!("{v} {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn blocked(place: &str, counts: &PiiCounts) -> TinyAgentsError {
    TinyAgentsError::validation(format!(
        "PII detected in {place} ({}); the pii middleware blocks it",
        describe(counts)
    ))
}

/// The error for a stream stopped by `push`: a value found under `Block`, or more held back than the cap.
fn stopped(place: &str, stop: Stop, counts: &PiiCounts) -> TinyAgentsError {
    match stop {
        Stop::Blocked => blocked(place, counts),
        Stop::Overflow { held } => TinyAgentsError::limit(
            "max_held_bytes",
            format!(
                "the pii middleware held back {held} bytes of {place} waiting for a value to end, more than \
                 `max_held_bytes` allows; the stream is stopped and the held text dropped unsent. Raise \
                 `max_held_bytes` in the pii config if such text is expected"
            ),
        ),
    }
}

fn report<C>(ctx: &RunContext<C>, place: &'static str, counts: &PiiCounts) {
    if counts.is_empty() {
        return;
    }
    ctx.events().emit_with(EventKind::Custom, || AgentEvent::Custom {
        middleware: "pii".into(),
        name: "pii_detected".into(),
        data: json!({ "where": place, "counts": counts }),
    });
}

/// Detects PII (secrets and API keys, private-key blocks, emails, URLs, Luhn-checked cards, IBANs, IPv4/IPv6, MAC addresses, US SSNs, phone numbers, user patterns) and blocks, redacts, masks or hashes it in requests, replies, streamed text, streamed tool-call arguments, tool arguments, tool progress, tool results and the transcript.
#[middleware(
    builtin,
    name = "pii",
    run_state = PiiRun,
    config = PiiConfig,
    doc(
        mutation = "Rewrites message text parts of the request, streamed text, reasoning and tool-call argument deltas, the reply's text and tool-call arguments, tool-call arguments before they run, tool progress deltas, tool result content, error and data, and the user and system messages of the transcript handed back (`AgentRun::messages`; the replies and tool results in it were scrubbed on their way in), replacing each detected value (`[REDACTED_EMAIL]`, a masked value, or `<email_hash:…>`). Tool-call names are scrubbed too (a name carrying PII is no tool's name), and a call id carrying PII becomes `pii_<digest>` everywhere it appears, so calls and results stay paired. Tool results are scrubbed in its tool wrap, so every `after_tool` hook (they run in reverse order) sees them clean. JSON object keys are scrubbed like values (two keys that become equal are kept apart with a `#2` suffix); every string and number under a secret-named key (`password`, `api_key`, `clientSecret`, `…_token`, `credentials`, a password word anywhere in the key: `password_confirmation`, `passwordRepeat`, `pwd`; `pass` or `pin` as its last word, …; the key read normalised, so a soft hyphen or fullwidth letters do not hide it) is replaced whole. Detected: secrets (AWS access key ids and secret keys, GitHub, OpenAI/Anthropic `sk-`, Slack, Google, Stripe, GitLab, npm, Hugging Face, SendGrid and PyPI tokens, JWTs of any length, `Bearer`/`Basic` credentials, the credential after any scheme in an `Authorization:` header, `Cookie:`/`Set-Cookie:` header values, the password in the user info of a URL of any scheme (`postgres://u:PASS@db`, `redis://:PASS@cache`), whole PEM/OpenSSH/PGP private-key blocks, `password=…`-style values, a quoted one up to its closing quote, and every secret registered with the process's redactor), emails, URLs, cards (Luhn, issuer digit 2 to 6, groups of two or more digits joined by one separator: dot, dash or slash, or white space of any kind and mix, up to three characters: space, tab, CR, LF, VT, FF, NEL, every Unicode space, line and paragraph separator; a card followed by its CVV or expiry is found inside the longer run), IBANs (mod 97, either case, grouped by spaces, tabs, dots or dashes), IPv6 (also with an embedded IPv4), MAC addresses, dotted IPv4 (also with leading zeros), US SSNs, phone numbers; all on text normalised for detection (fullwidth forms, every Unicode decimal digit, other compatibility characters by NFKC such as mathematical alphanumerics and dot leaders, every Unicode separator, invisible characters, JSON escapes). JSON numbers are checked like strings at any depth; a number holding a value becomes a string placeholder (`\"[REDACTED_CREDIT_CARD]\"`), so a JSON document (the arguments, streamed or not, a JSON answer or tool result) stays valid. A number, or a string of 7 to 15 bare digits, under a key naming a phone (`phone`, `phoneNumber`, `mobile_no`, `tel`, …: a whole word of `PHONE_KEY_WORDS`, so not `hotel` or `cells_count`), or in an array under one, is a phone (`\"[REDACTED_PHONE]\"`). Not covered: a nested object or array under a secret-named key in the *streamed* argument text (it is replaced in the arguments, the reply and the history; a string or number directly under the key is replaced in the stream too), image parts, values spelled out or encoded (`four one one one`, base64, hex), digits glued to letters (`card4111…`; in a JSON number an exponent's `e` is no letter), a phone number written as a bare digit run (`14155552671`) outside a key naming a phone, undotted IPv4 (`3232235521`), names, postal addresses and national ids other than US SSNs (add a `custom` pattern).",
        events = "`Custom { middleware: \"pii\", name: \"pii_detected\", data: { where, counts } }` (`where`: request, stream, response, tool_args, tool_delta, tool_result, transcript) with counts by type, never values. A stream's held-back tail is released as deltas just before the finish delta (`ModelDelta::release_before`: forwarded to the sink and accumulated into the reply); a tool's held-back progress as one `ToolDelta` when the call ends.",
        failure = "With `block`, the hook fails with a `Validation` error naming the place and the counts, never the values: closed. In `before_tool` that becomes the call's error result (the tool does not run); in a tool's progress it fails the call (the tool is dropped); a tool result (before the model sees it) becomes the call's error result under the agent's default tool-error policy; in the request, the stream (text or tool-call arguments: before any call of the reply runs) or the reply it fails the run. The transcript handed back is redacted even with `block` (the run is over). Otherwise it cannot fail. Detection is pattern-based: values it has no pattern for, and that were not registered with the process's redactor, pass; the text of an error that ends the run is not rewritten.",
        streaming = "Holds back the last `max_match_chars` characters of the answer, reasoning and each tool call's argument stream, and of each tool call's progress, plus any match still reaching the end however long, so a value split across deltas never reaches the sink; at the finish delta the tails are released ahead of it and accumulated, so every wrap inside this one (e.g. `structured_output`) sees the whole scrubbed reply. A stream that ends without a finish delta has its text tails appended to the reply here (argument tails then leave truncated JSON: a retryable model error, and nothing runs). A reply cut by the output limit (`finish_reason = length`) keeps its tails held for the continuation `output_limit_recovery` asks for, which streams on where they stopped; `after_model` releases what no continuation took. Content after a finish delta is refused unsent (a `Model` error). A stream holding back more than `max_held_bytes` (a value that never ends, a flood of invisible characters) fails with a `LimitExceeded` error and its held text is dropped unsent. The reply is scanned again only when it differs from what was streamed. Released deltas do not pass the delta hooks registered after this one.",
        cache = "Redacting the request is deterministic, so the same history gives the same prefix and the provider cache keeps working; it does not touch system segments.",
        retries = "Per-attempt stream buffers are reset when a new attempt starts, so a failed attempt's held-back text never leaks into the next; the reply of every attempt (also one produced by an inner fallback or cache without streaming) is scrubbed in `wrap_model`."
    )
)]
impl PiiMiddleware {
    #[before_model]
    fn scrub_request<C>(&self, ctx: &mut RunContext<C>, pii: &mut PiiRun, request: &mut ModelRequest) -> Result<()> {
        if !self.apply_to_input && !self.apply_to_tool_args {
            return Ok(());
        }
        let mut counts = PiiCounts::new();
        if !self.remember {
            for i in 0..request.messages.len() {
                // a copy is scanned, so the shared history is copied only when a value is replaced
                let mut copy = request.messages[i].clone();
                let mut found = PiiCounts::new();
                self.scrub_request_message(&mut copy, &mut found)?;
                if !found.is_empty() {
                    request.messages[i] = copy;
                    merge(&mut counts, found);
                }
            }
            report(ctx, "request", &counts);
            return Ok(());
        }
        let mine = &mut pii.verdicts;
        // Taken now, put back only when every message was judged (an error
        // leaves no stale places behind).
        let mut last = std::mem::take(&mut mine.last);
        let mut out = mine.out.take();
        let mut replaced = std::mem::take(&mut mine.replaced);
        let mut found_all = std::mem::take(&mut mine.found);
        let mark = std::mem::take(&mut mine.mark);
        let input = &request.messages;
        // The leading messages at the places and addresses of last time's:
        // all of them when the history was only appended to.
        let same = match input.appended_since(&mark) {
            Some(n) if n == last.len() => n,
            _ => last
                .iter()
                .zip(input.iter())
                .take_while(|(a, m)| **a == m.addr())
                .count(),
        };
        last.truncate(same);
        if replaced.last().is_some_and(|(i, _)| *i >= same) {
            replaced.retain(|(i, _)| *i < same);
            found_all = PiiCounts::new();
            for (_, found) in &replaced {
                merge_ref(&mut found_all, found);
            }
        }
        if replaced.is_empty() {
            out = None;
        } else if let Some(o) = out.as_mut().filter(|o| o.len() > same) {
            o.truncate(same);
        }
        for (i, message) in input.iter().enumerate().skip(same) {
            last.push(message.addr());
            let scrubbed = match mine.by_message.get(&message.addr()) {
                Some(v) => v.scrubbed.as_ref().map(|hit| (hit.0.clone(), hit.1.clone())),
                None => {
                    // Not seen: scan a copy (the message itself stays shared).
                    let mut copy = message.clone();
                    let mut found = PiiCounts::new();
                    self.scrub_request_message(&mut copy, &mut found)?;
                    let scrubbed = (!found.is_empty()).then_some((copy, found));
                    mine.by_message.insert(
                        message.addr(),
                        Verdict {
                            _scanned: message.clone(),
                            scrubbed: scrubbed.clone().map(Box::new),
                        },
                    );
                    scrubbed
                }
            };
            match scrubbed {
                Some((scrubbed, found)) => {
                    // the first replacement of the run copies what came before it, once
                    out.get_or_insert_with(|| input[..i].iter().cloned().collect())
                        .push(scrubbed);
                    merge_ref(&mut found_all, &found);
                    replaced.push((i, found));
                }
                None => {
                    if let Some(o) = &mut out {
                        o.push(message.clone());
                    }
                }
            }
        }
        // Verdicts of messages no longer in the request go (checked when the
        // map has grown past twice the request, so the cost is spread thin).
        if mine.by_message.len() > 2 * last.len() + 64 {
            let keep: std::collections::HashSet<usize, std::hash::BuildHasherDefault<AddrHasher>> =
                last.iter().copied().collect();
            mine.by_message.retain(|addr, _| keep.contains(addr));
        }
        mine.mark = request.messages.mark();
        if let Some(o) = &out {
            request.messages = o.clone();
        }
        mine.last = last;
        mine.out = out;
        mine.replaced = replaced;
        report(ctx, "request", &found_all);
        mine.found = found_all;
        Ok(())
    }

    /// The transcript the run hands back (and a caller may store) carries no
    /// PII either: every message of it is scrubbed as the requests were — the
    /// caller's own earlier turns and injected messages of every role among
    /// them. (With
    /// `block` a value here is replaced, not refused: the run is over, and
    /// refusing would lose the transcript.)
    #[after_agent]
    fn scrub_transcript<C>(&self, ctx: &mut RunContext<C>, pii: &mut PiiRun, run: &mut AgentRun) -> Result<()> {
        if !self.apply_to_input && !self.apply_to_output && !self.apply_to_tool_args && !self.apply_to_tool_results {
            return Ok(());
        }
        let mut this = self.clone();
        if this.engine.strategy == Strategy::Block {
            this.engine.strategy = Strategy::Redact;
        }
        let mut counts = PiiCounts::new();
        // every role: a caller's earlier turns and a steering injection can
        // hold assistant and tool messages that never passed this middleware;
        // what did pass it stays as it was sent (scanning scrubbed text again
        // would judge values in a context the redaction itself changed)
        for message in run.messages.iter_mut().chain(run.final_message.as_mut()) {
            let sent =
                matches!(message.role, Role::Assistant | Role::Tool) && pii.passed.contains(&passed_key(message));
            if !sent {
                this.scrub_message(message, &mut counts)?;
            }
        }
        report(ctx, "transcript", &counts);
        Ok(())
    }

    #[on_model_delta]
    fn scrub_delta<C>(&self, ctx: &mut RunContext<C>, pii: &mut PiiRun, delta: &mut ModelDelta) -> Result<()> {
        if !self.apply_to_output && !self.apply_to_tool_args {
            return Ok(());
        }
        let attempt = ctx.counters().model_calls;
        let failed = last_failed_attempt(ctx);
        let state = pii.stream.get_or_insert_with(StreamState::default);
        if state.attempt != attempt {
            // a cut reply whose attempt then failed was discarded: nothing continues it
            if state.cut && state.attempt != failed {
                // the continuation of a reply cut by the output limit: its text
                // goes on where the held tails stopped (tool calls start anew)
                state.attempt = attempt;
                state.cut = false;
                state.args.clear();
            } else {
                *state = StreamState {
                    attempt,
                    ..StreamState::default()
                };
            }
        }
        if state.finished
            && matches!(
                delta.content,
                DeltaContent::Text { .. } | DeltaContent::Reasoning { .. } | DeltaContent::ToolCall { .. }
            )
        {
            // the tails were released as final at the finish delta: text after
            // it could complete a value whose start was already sent
            return Err(TinyAgentsError::model(
                "the model sent content after its finish delta; the pii middleware refuses it unsent",
                false,
            ));
        }
        let mut counts = PiiCounts::new();
        let (engine, hold) = (&self.engine, self.hold);
        let result = match &mut delta.content {
            DeltaContent::Text { text } if self.apply_to_output => {
                let piece = std::mem::take(text);
                state
                    .text
                    .push(engine, &piece, hold, false, &mut counts)
                    .map(|out| *text = out)
                    .map_err(|stop| ("the streamed reply", stop))
            }
            DeltaContent::Reasoning { text } if self.apply_to_output => {
                let piece = std::mem::take(text);
                state
                    .reasoning
                    .push(engine, &piece, hold, false, &mut counts)
                    .map(|out| *text = out)
                    .map_err(|stop| ("the streamed reply", stop))
            }
            DeltaContent::ToolCall {
                index,
                id,
                name,
                arguments,
            } if self.apply_to_tool_args => {
                // an id and a name arrive whole, in the call's first piece
                const PLACE: &str = "the streamed tool-call arguments";
                let whole = id
                    .as_mut()
                    .map_or(Ok(()), |id| self.scrub_id(id, PLACE, &mut counts))
                    .and_then(|()| name.as_mut().map_or(Ok(()), |n| self.scrub(n, PLACE, &mut counts)));
                whole?;
                let piece = std::mem::take(arguments);
                state
                    .args
                    .entry(*index)
                    .or_default()
                    .push(engine, &piece, hold, false, &mut counts)
                    .map(|out| *arguments = out)
                    .map_err(|stop| ("the streamed tool-call arguments", stop))
            }
            DeltaContent::Finish {
                reason: FinishReason::Length,
            } => {
                // a continuation may complete a value the tails hold: keep them
                state.cut = true;
                Ok(())
            }
            DeltaContent::Finish { .. } => {
                state.finished = true;
                // Release every held-back tail ahead of the finish delta: the
                // loop forwards and accumulates it, so each wrap inside this
                // one sees the whole (scrubbed) reply.
                flush_all(state, engine, hold, &mut counts).map(|released| {
                    for d in released {
                        delta.release_before(d);
                    }
                })
            }
            _ => Ok(()),
        };
        if let Err((place, stop)) = result {
            return Err(stopped(place, stop, &counts));
        }
        report(ctx, "stream", &counts);
        Ok(())
    }

    /// Releases the tails of a reply cut by the output limit that no
    /// continuation took (after every wrap: `output_limit_recovery` has merged
    /// what it continued), scrubbed, into the reply and to the sink.
    #[after_model]
    fn release_cut_tails<C>(
        &self,
        ctx: &mut RunContext<C>,
        pii: &mut PiiRun,
        response: &mut ModelResponse,
    ) -> Result<()> {
        if !self.apply_to_output && !self.apply_to_tool_args {
            return Ok(());
        }
        let taken = if pii.stream.as_ref().is_some_and(|s| s.cut) {
            pii.stream.take()
        } else {
            None
        };
        let Some(mut s) = taken else { return Ok(()) };
        let mut counts = PiiCounts::new();
        let released = flush_all(&mut s, &self.engine, self.hold, &mut counts)
            .map_err(|(place, stop)| stopped(place, stop, &counts))?;
        let released: Vec<ModelDelta> = released
            .into_iter()
            .filter(|d| matches!(d.content, DeltaContent::Text { .. } | DeltaContent::Reasoning { .. }))
            .collect();
        append_tails(response, &released);
        for delta in released {
            ctx.events()
                .emit_with(EventKind::ModelDelta, || AgentEvent::ModelDelta {
                    run_id: ctx.run_id().clone(),
                    attempt: s.attempt,
                    delta,
                });
        }
        report(ctx, "response", &counts);
        Ok(())
    }

    #[wrap_model]
    async fn scrub_reply<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        pii: &RunState<PiiRun>,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        if !self.apply_to_output && !self.apply_to_tool_args {
            return next.run(ctx, state, request).await;
        }
        // A stream a failed call left behind is not this call's: drop it first
        // (a reply cut by the output limit stays: this call may continue it).
        {
            let failed = last_failed_attempt(ctx);
            let mut run = pii.lock()?;
            if run.stream.as_ref().is_some_and(|s| !s.cut || s.attempt == failed) {
                run.stream = None;
            }
        }
        let mut response = next.run(ctx, state, request).await?.into_response();
        let taken = {
            let mut run = pii.lock()?;
            // cut by the output limit: held for a continuation, or for `after_model`
            if run.stream.as_ref().is_some_and(|s| s.cut) {
                None
            } else {
                run.stream.take()
            }
        };
        let mut counts = PiiCounts::new();
        let mut clean = (false, false);
        let failed = last_failed_attempt(ctx);
        // a stream whose attempt failed was discarded: its tails belong to no reply
        if let Some(mut s) = taken.filter(|s| s.attempt == ctx.counters().model_calls && s.attempt != failed) {
            // A stream that ended without a finish delta (or sent text after it)
            // still has tails pending. They belong to this reply only when it is
            // what that stream accumulated (not a fallback an inner wrap made
            // after the stream failed): then its text is what was emitted so far.
            let ours = (
                digest_of(&response, false) == s.text.emitted,
                digest_of(&response, true) == s.reasoning.emitted,
            );
            let mut tail_counts = PiiCounts::new();
            let released = match flush_all(&mut s, &self.engine, self.hold, &mut tail_counts) {
                Ok(released) => released,
                Err((place, stop)) => return Err(stopped(place, stop, &tail_counts)),
            };
            let released: Vec<ModelDelta> = released
                .into_iter()
                .filter(|d| match d.content {
                    DeltaContent::Text { .. } => ours.0,
                    DeltaContent::Reasoning { .. } => ours.1,
                    _ => false,
                })
                .collect();
            if !released.is_empty() {
                merge(&mut counts, tail_counts);
                append_tails(&mut response, &released);
            }
            // The reply's text is exactly what was streamed (scrubbed): no need to scan it again.
            clean = (
                digest_of(&response, false) == s.text.emitted,
                digest_of(&response, true) == s.reasoning.emitted,
            );
        }
        self.scrub_response(&mut response, &mut counts, clean)?;
        pii.lock()?.passed.insert(passed_key(&response.message));
        report(ctx, "response", &counts);
        Ok(response.into())
    }

    #[before_tool]
    fn scrub_args<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        if !self.apply_to_tool_args {
            return Ok(());
        }
        let mut counts = PiiCounts::new();
        self.scrub_call(call, "tool-call arguments", &mut counts)?;
        report(ctx, "tool_args", &counts);
        Ok(())
    }

    #[after_tool]
    fn scrub_result<C>(&self, ctx: &mut RunContext<C>, pii: &RunState<PiiRun>, result: &mut ToolResult) -> Result<()> {
        if !self.apply_to_tool_results {
            return Ok(());
        }
        let done = pii.lock()?.scrubbed.remove(&result.call_id);
        if done.is_some_and(|d| d == result_digest(result)) {
            // scrubbed in `wrap_tool` and unchanged since
            return Ok(());
        }
        self.scrub_tool_result(ctx, pii, result)
    }

    #[on_tool_delta]
    fn scrub_tool_delta<C>(
        &self,
        ctx: &mut RunContext<C>,
        pii: &RunState<PiiRun>,
        delta: &mut ToolDelta,
    ) -> Result<()> {
        if !self.apply_to_tool_results {
            return Ok(());
        }
        let mut run = pii.lock()?;
        let buffer = run.tool_streams.entry(delta.call_id.clone()).or_default();
        let mut counts = PiiCounts::new();
        let piece = std::mem::take(&mut delta.content);
        let result = buffer.push(&self.engine, &piece, self.hold, false, &mut counts);
        drop(run);
        match result {
            Ok(out) => delta.content = out,
            Err(stop) => return Err(stopped("a tool's progress", stop, &counts)),
        }
        report(ctx, "tool_delta", &counts);
        Ok(())
    }

    /// Releases the held-back tail of the call's progress when the call ends
    /// (also when it fails), and scrubs the result.
    #[wrap_tool]
    async fn flush_tool_progress<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        pii: &RunState<PiiRun>,
        call: ToolCall,
        next: ToolHandler<'_, S, C>,
    ) -> Result<MiddlewareToolOutcome> {
        if !self.apply_to_tool_results {
            return next.run(ctx, state, call).await;
        }
        let id = call.id.clone();
        let outcome = next.run(ctx, state, call).await;
        let buffer = pii.lock()?.tool_streams.remove(&id);
        if let Some(mut buffer) = buffer.filter(|b| !b.is_empty()) {
            let mut counts = PiiCounts::new();
            match buffer.push(&self.engine, "", self.hold, true, &mut counts) {
                Ok(tail) => {
                    ctx.events().emit_with(EventKind::ToolDelta, || AgentEvent::ToolDelta {
                        run_id: ctx.run_id().clone(),
                        delta: ToolDelta::new(id, tail),
                    });
                    report(ctx, "tool_delta", &counts);
                }
                // The tail is dropped, never sent; the call's outcome stands unless it succeeded.
                Err(stop) if outcome.is_ok() => return Err(stopped("a tool's progress", stop, &counts)),
                Err(_) => {}
            }
        }
        // Scrub the result here, so every wrap outside this one and every
        // `after_tool` hook (which run in reverse order) sees it clean.
        let mut result = outcome?.into_result();
        self.scrub_tool_result(ctx, pii, &mut result)?;
        let digest = result_digest(&result);
        pii.lock()?.scrubbed.insert(result.call_id.clone(), digest);
        Ok(result.into())
    }
}

/// Flushes every buffer of a model stream: the deltas to release (reasoning, text, then each call's arguments).
fn flush_all(
    state: &mut StreamState,
    engine: &Engine,
    hold: Hold,
    counts: &mut PiiCounts,
) -> std::result::Result<Vec<ModelDelta>, (&'static str, Stop)> {
    const REPLY: &str = "the streamed reply";
    let mut out = Vec::new();
    let reasoning = state
        .reasoning
        .push(engine, "", hold, true, counts)
        .map_err(|stop| (REPLY, stop))?;
    if !reasoning.is_empty() {
        out.push(ModelDelta::reasoning(reasoning));
    }
    let text = state
        .text
        .push(engine, "", hold, true, counts)
        .map_err(|stop| (REPLY, stop))?;
    if !text.is_empty() {
        out.push(ModelDelta::text(text));
    }
    for (&index, buffer) in &mut state.args {
        let arguments = buffer
            .push(engine, "", hold, true, counts)
            .map_err(|stop| ("the streamed tool-call arguments", stop))?;
        if !arguments.is_empty() {
            out.push(ModelDelta::new(DeltaContent::ToolCall {
                index,
                id: None,
                name: None,
                arguments,
            }));
        }
    }
    Ok(out)
}

/// Appends the tails released after the stream ended (no finish delta) to the reply's text and reasoning parts.
fn append_tails(response: &mut ModelResponse, released: &[ModelDelta]) {
    let parts = &mut response.message.content;
    for d in released {
        match &d.content {
            DeltaContent::Reasoning { text: reasoning } => match parts.iter_mut().find_map(|p| match p {
                ContentPart::Reasoning { text } => Some(text),
                _ => None,
            }) {
                Some(r) => r.push_str(reasoning),
                None => parts.insert(
                    0,
                    ContentPart::Reasoning {
                        text: reasoning.clone(),
                    },
                ),
            },
            DeltaContent::Text { text: tail } => match parts.iter_mut().rev().find_map(|p| match p {
                ContentPart::Text { text } => Some(text),
                _ => None,
            }) {
                Some(t) => t.push_str(tail),
                None => parts.push(ContentPart::text(tail)),
            },
            // Argument tails: the reply's calls were parsed already; their
            // parsed arguments are scrubbed as a whole below.
            _ => {}
        }
    }
}

/// The run's last model attempt that failed (0 when none has): its streamed
/// deltas were discarded, so what `pii` held from them belongs to no reply.
fn last_failed_attempt<C>(ctx: &RunContext<C>) -> u32 {
    ctx.locals()
        .try_local::<crate::harness::run::LastFailedAttempt>()
        .map_or(0, |f| f.0.load(std::sync::atomic::Ordering::Relaxed))
}

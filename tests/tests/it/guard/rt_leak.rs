//! Red-team round "rt-leak": secrets and PII that still pass the redaction
//! built-ins, and recorded spend a shared budget still loses. Each test fails
//! on the code it was written against because the leak (or loss) happens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::model::ModelResponse;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::store::{LedgerStore, LedgerTotals, MemoryLedger, Reservation, SharedBudget};
use tinyagents::testing::RecordingTool;

use super::pii_support::pii_agent;

fn redact(text: &str) -> String {
    PiiMiddleware::new(PiiStrategy::Redact).redact_text(text).unwrap().0
}

fn redact_value(value: &serde_json::Value) -> serde_json::Value {
    PiiMiddleware::new(PiiStrategy::Redact).redact_value(value).unwrap().0
}

// ---------------------------------------------------------------- PII / secrets

/// A database / broker connection string carries its password in the user
/// info, but only `http(s)`, `ftp` and `ws(s)` URLs are detected: a tool that
/// prints `DATABASE_URL` hands the password to the model.
#[tokio::test]
async fn rt_leak_connection_string_password_reaches_the_model() {
    let env = RecordingTool::new("env").returning(
        "DATABASE_URL=postgres://admin:Sup3rS3cretPass@db.internal:5432/app\n\
         REDIS_URL=redis://:R3disS3cretPass@cache:6379/0\n\
         AMQP_URL=amqp://guest:Amqp5ecretPass@rabbit:5672",
    );
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("env", json!({})),
        ScriptedTurn::text("done"),
    ]));
    let agent = pii_agent(model.clone(), env, PiiStrategy::Redact);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "show env")
        .await
        .unwrap();
    let second = format!("{:?}", model.requests()[1].messages);
    for pw in ["Sup3rS3cretPass", "R3disS3cretPass", "Amqp5ecretPass"] {
        assert!(!second.contains(pw), "{pw} reached the model: {second}");
    }
}

/// `password = "…"` whose value holds spaces (a passphrase) has only its first
/// word replaced: the context detector's value class stops at white space even
/// inside quotes.
#[test]
fn rt_leak_quoted_passphrase_after_password_keeps_all_but_its_first_word() {
    let out = redact(r#"password = "correct horse battery staple""#);
    assert!(!out.contains("horse battery staple"), "{out}");
    let out = redact("db_password: 'tr0ub4dor and 3'");
    assert!(!out.contains("and 3"), "{out}");
}

/// `Authorization: Bearer TOKEN` with a token without a digit: the bearer
/// detector wants a digit, and the `authorization:` context detector takes the
/// scheme word `Bearer` as the value, so the token itself passes.
#[test]
fn rt_leak_authorization_header_masks_the_scheme_not_the_token() {
    let out = redact("Authorization: Bearer abcdefghijklmnopqrstuvwxyzABCDEF");
    assert!(!out.contains("abcdefghijklmnopqrstuvwxyzABCDEF"), "{out}");
}

/// A session cookie: no detector for `Cookie:`/`session=` values.
#[test]
fn rt_leak_session_cookie_passes() {
    let out = redact("Cookie: sessionid=q8w7e6r5t4y3u2i1o0pASDFGHJ");
    assert!(!out.contains("q8w7e6r5t4y3u2i1o0pASDFGHJ"), "{out}");
}

/// An IBAN in lower case (as people type it), or grouped with dashes, is not
/// found: the pattern wants upper-case letters and spaces only.
#[test]
fn rt_leak_lowercase_or_dashed_iban_passes() {
    for text in [
        "iban de89370400440532013000 please",
        "iban de89 3704 0044 0532 0130 00 please",
        "iban DE89-3704-0044-0532-0130-00 please",
    ] {
        let out = redact(text);
        assert!(!out.contains("0532"), "{text} -> {out}");
    }
}

/// Compatibility forms beyond the fullwidth block are not folded: the
/// mathematical alphanumerics fold as digits (they are Nd) but not as letters,
/// so a country code or a token prefix in them hides the value; U+2024 ONE DOT
/// LEADER (NFKC: `.`) between card groups or in an e-mail domain hides it.
#[test]
fn rt_leak_compatibility_letters_and_dot_leader_are_not_folded() {
    for (text, needle) in [
        ("iban \u{1D403}\u{1D404}89370400440532013000", "0532"),
        ("token ghp_\u{1D41A}bcdefghijklmnopqrstuvwxyz0123456789", "ijklmnop"),
        ("card 4111\u{2024}1111\u{2024}1111\u{2024}1111", "1111"),
        ("mail ann@example\u{2024}com", "ann@"),
    ] {
        let out = redact(text);
        assert!(!out.contains(needle), "{text:?} -> {out:?}");
    }
}

/// A secret-named key written with an invisible character (soft hyphen, zero
/// width space) or fullwidth letters is not a secret-named key in a parsed
/// value (`is_secret_key` wants ASCII), so its short value passes; the same
/// document as text is redacted (the text is normalised first).
#[test]
fn rt_leak_secret_key_with_invisible_or_fullwidth_characters_in_a_parsed_value() {
    for key in ["pass\u{AD}word", "api\u{200B}_key", "\u{FF50}\u{FF41}\u{FF53}\u{FF53}\u{FF57}\u{FF4F}\u{FF52}\u{FF44}"] {
        let doc = json!({ key: "hunter2" });
        let text = redact(&doc.to_string());
        let value = redact_value(&doc).to_string();
        assert!(!text.contains("hunter2"), "text path {key:?}: {text}");
        assert!(!value.contains("hunter2"), "value path {key:?}: {value} (text path gave {text})");
    }
}

/// security.md: a number under a secret-named key such as `"pin": 1234`
/// "is replaced in the arguments the tool receives"; `pin` is no
/// secret-named key, so the tool gets it.
#[tokio::test]
async fn rt_leak_pin_named_in_the_docs_is_not_a_secret_key() {
    let send = RecordingTool::new("send").returning("sent");
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("send", json!({ "pin": 4821, "card_pin": "4821" })),
        ScriptedTurn::text("done"),
    ]);
    let agent = pii_agent(model, send.clone(), PiiStrategy::Redact);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let got = format!("{:?}", send.calls());
    assert!(!got.contains("4821"), "{got}");
}

/// A key is secret-named only when it *ends* with a secret word, so the
/// fields of every sign-up form (`password_confirmation`, `passwordRepeat`,
/// `password2`) and the common short names (`pwd`, `pass`) carry their value
/// to the tool, in parsed arguments and in the argument text alike.
#[tokio::test]
async fn rt_leak_secret_word_not_at_the_end_of_the_key_passes() {
    let send = RecordingTool::new("send").returning("sent");
    let args = json!({
        "password_confirmation": "hunter2",
        "passwordRepeat": "hunter2",
        "password2": "hunter2",
        "pwd": "hunter2",
    });
    let model = ScriptedModel::new([ScriptedTurn::tool_call("send", args.clone()), ScriptedTurn::text("done")]);
    let agent = pii_agent(model, send.clone(), PiiStrategy::Redact);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let got = format!("{:?}", send.calls());
    assert!(!got.contains("hunter2"), "{got}");
}

/// `pii` never consults the process's registered secrets: an API key the
/// provider configuration registered (a 32-hex-digit Azure-style key, which
/// no pattern knows) that a tool prints bare reaches the model.
#[tokio::test]
async fn rt_leak_registered_secret_printed_by_a_tool_reaches_the_model() {
    use tinyagents::harness::secrets::redactor;
    let key = "9f3c2a7be41d4c0e8a5b6d7e1f203948";
    redactor().add(key);
    assert_eq!(redactor().redact(key), "***");
    let printenv = RecordingTool::new("printenv").returning(key);
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("printenv", json!({"name": "AZURE_OPENAI_API_KEY"})),
        ScriptedTurn::text("done"),
    ]));
    let agent = pii_agent(model.clone(), printenv, PiiStrategy::Redact);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let second = format!("{:?}", model.requests()[1].messages);
    assert!(!second.contains(key), "{second}");
}

/// The process redactor masks registered secrets in strings and keys of a JSON
/// value, never in its numbers: a numeric secret (a PIN-like store password, a
/// numeric account token) in a JSON number of a `--json` line passes.
#[test]
fn rt_leak_registered_numeric_secret_in_a_json_number_passes_the_redactor() {
    use tinyagents::harness::secrets::redactor;
    redactor().add("839201745512");
    assert_eq!(redactor().redact("token 839201745512"), "token ***");
    let mut v = json!({ "data": { "account_token": 839201745512u64 } });
    redactor().redact_json(&mut v);
    assert!(!v.to_string().contains("839201745512"), "{v}");
}

// ---------------------------------------------------------------- spend

/// A ledger that answers like `MemoryLedger`, or never answers while `hang`
/// is set (a store behind a network partition).
#[derive(Default)]
struct Hanging {
    inner: MemoryLedger,
    hang: AtomicBool,
    down: AtomicBool,
}

impl Hanging {
    async fn gate(&self) -> tinyagents::Result<()> {
        if self.hang.load(Ordering::SeqCst) {
            futures::future::pending::<()>().await;
        }
        if self.down.load(Ordering::SeqCst) {
            return Err(TinyAgentsError::middleware("test ledger", "connection refused"));
        }
        Ok(())
    }
}

#[async_trait]
impl LedgerStore for Hanging {
    async fn reserve(&self, key: &str, cap: u64, amount: u64, ttl: Duration) -> tinyagents::Result<Reservation> {
        self.gate().await?;
        self.inner.reserve(key, cap, amount, ttl).await
    }
    async fn settle(&self, key: &str, reserved: u64, actual: u64, ttl: Duration) -> tinyagents::Result<LedgerTotals> {
        self.gate().await?;
        self.inner.settle(key, reserved, actual, ttl).await
    }
    async fn totals(&self, key: &str) -> tinyagents::Result<LedgerTotals> {
        self.gate().await?;
        self.inner.totals(key).await
    }
}

/// One call: 1000 input tokens at $30 per million.
const CALL_NANOS: u64 = 30_000_000;

fn budget_agent(ledger: Arc<Hanging>, on_call: impl Fn() + Send + Sync + 'static) -> (SharedBudget, Agent<()>) {
    let budget = SharedBudget::new(ledger, "team", 10.0).unwrap();
    let limits = LimitsMiddleware::new()
        .manual_rates(TokenRates {
            input: Some(30.0),
            output: Some(0.0),
            ..TokenRates::default()
        })
        .unwrap()
        .shared_budget(budget.clone());
    let model = ScriptedModel::from_fn(move |_| {
        on_call();
        ModelResponse::text("ok").with_usage(Usage::new(1000, 0)).into()
    });
    let agent = Agent::new(model).with_stack(MiddlewareStack::new().with(limits).unwrap());
    (budget, agent)
}

async fn run(agent: &Agent<()>) -> tinyagents::Result<()> {
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(Arc::new(CollectingSink::new()));
    agent.run(&mut ctx, &(), "go").await.map(drop)
}

/// Kept spend (a settle the store refused) is taken out of the process's
/// keep before the store is asked to record it; a caller's deadline that
/// drops `flush` (or the next run) while the store hangs drops the amount:
/// neither kept nor recorded.
#[tokio::test]
async fn rt_leak_kept_spend_is_lost_when_a_flush_is_cancelled() {
    let ledger = Arc::new(Hanging::default());
    let l = ledger.clone();
    let (budget, agent) = budget_agent(ledger.clone(), move || l.down.store(true, Ordering::SeqCst));
    run(&agent).await.unwrap_err();
    assert!((budget.unrecorded_usd() - 0.03).abs() < 1e-12, "{}", budget.unrecorded_usd());

    // The store hangs now; the caller gives flush a deadline.
    ledger.down.store(false, Ordering::SeqCst);
    ledger.hang.store(true, Ordering::SeqCst);
    let flushed = tokio::time::timeout(Duration::from_millis(50), budget.flush()).await;
    assert!(flushed.is_err(), "flush cannot finish while the store hangs");

    ledger.hang.store(false, Ordering::SeqCst);
    let spent = ledger.inner.totals("budget:team").await.unwrap().spent;
    assert!(
        budget.unrecorded_usd() > 0.0 || spent == CALL_NANOS,
        "the paid call's $0.03 is neither kept ({}) nor recorded ({spent})",
        budget.unrecorded_usd()
    );
}

/// The same through a run: the next run records the kept spend first; a run
/// cancelled (its future dropped by a deadline) while that record hangs loses
/// the amount, and later runs are admitted as if nothing was spent.
#[tokio::test]
async fn rt_leak_kept_spend_is_lost_when_the_next_run_is_cancelled() {
    let ledger = Arc::new(Hanging::default());
    let l = ledger.clone();
    let cut = Arc::new(AtomicBool::new(true));
    let c = cut.clone();
    let (budget, agent) = budget_agent(ledger.clone(), move || {
        if c.swap(false, Ordering::SeqCst) {
            l.down.store(true, Ordering::SeqCst);
        }
    });
    run(&agent).await.unwrap_err();
    assert!(budget.unrecorded_usd() > 0.0);

    ledger.down.store(false, Ordering::SeqCst);
    ledger.hang.store(true, Ordering::SeqCst);
    assert!(tokio::time::timeout(Duration::from_millis(50), run(&agent)).await.is_err());
    ledger.hang.store(false, Ordering::SeqCst);

    run(&agent).await.unwrap();
    let spent = ledger.inner.totals("budget:team").await.unwrap().spent;
    assert_eq!(
        spent,
        2 * CALL_NANOS,
        "two paid calls, recorded {spent}; unrecorded {}",
        budget.unrecorded_usd()
    );
}

/// A paid call's settle that hangs and is cancelled by the caller's deadline
/// is neither recorded nor kept: the store's settle is awaited before the
/// amount is put anywhere the process keeps.
#[tokio::test]
async fn rt_leak_a_cancelled_settle_drops_the_calls_cost() {
    let ledger = Arc::new(Hanging::default());
    let l = ledger.clone();
    // The store stops answering while the model answers: reserve went
    // through, the call is paid, the settle hangs.
    let (budget, agent) = budget_agent(ledger.clone(), move || l.hang.store(true, Ordering::SeqCst));
    assert!(tokio::time::timeout(Duration::from_millis(50), run(&agent)).await.is_err());
    ledger.hang.store(false, Ordering::SeqCst);
    let t = ledger.inner.totals("budget:team").await.unwrap();
    assert!(
        budget.unrecorded_usd() > 0.0 || t.spent == CALL_NANOS,
        "the paid call's $0.03 is neither kept ({}) nor recorded (spent {}, held {})",
        budget.unrecorded_usd(),
        t.spent,
        t.held
    );
}

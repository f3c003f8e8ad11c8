//! `pii` and values known by their key: a JSON number, or a string of bare
//! digits, under `phone`, `mobileNo`, `home_phone`, `tel`… is a phone
//! although it has no `+` or separators, in tool arguments and results,
//! earlier turns' calls, and streamed arguments (which still parse); every
//! string and number under a secret-named key (`password_confirmation`,
//! `pwd`, `pin`, a key written with invisible or fullwidth characters) is a
//! secret, in the parsed value and in its text alike.

use serde_json::{json, Value};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::MiddlewareHarness;

use super::pii_support::stream_arguments;

/// The issue's document.
const ISSUE_DOC: &str = r#"{"card":4111111111111111,"phone":14155552671,"email":"a@b.co"}"#;

fn issue_doc() -> Value {
    serde_json::from_str(ISSUE_DOC).unwrap()
}

fn issue_doc_redacted() -> Value {
    json!({ "card": "[REDACTED_CREDIT_CARD]", "phone": "[REDACTED_PHONE]", "email": "[REDACTED_EMAIL]" })
}

fn redact_value(value: &Value) -> Value {
    PiiMiddleware::new(PiiStrategy::Redact).redact_value(value).unwrap().0
}

fn redact_text(text: &str) -> String {
    PiiMiddleware::new(PiiStrategy::Redact).redact_text(text).unwrap().0
}

/// Both paths (the parsed value and its text) give the same document.
fn both(value: Value) -> Value {
    let parsed = redact_value(&value);
    let text = redact_text(&value.to_string());
    let from_text: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(parsed, from_text, "the parsed and the text paths agree on {value}");
    parsed
}

#[tokio::test]
async fn the_issue_s_document_is_scrubbed_in_arguments_results_and_earlier_turns() {
    let mut h: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Redact));
    // tool arguments
    let call = h.before_tool(ToolCall::new("1", "t", issue_doc())).await.unwrap();
    assert_eq!(call.arguments, issue_doc_redacted());
    // a tool result: its structured data and its content (a JSON text)
    let mut result = ToolResult::ok(&call, ISSUE_DOC);
    result.data = Some(issue_doc());
    let result = h.after_tool(result).await.unwrap();
    assert_eq!(result.data, Some(issue_doc_redacted()));
    let content: Value = serde_json::from_str(&result.content).expect("the content stays JSON");
    assert_eq!(content, issue_doc_redacted());
    // an earlier turn's call and its result, sent back to the provider
    let history = vec![
        Message::user("go"),
        Message::assistant("").with_tool_calls(vec![ToolCall::new("c1", "t", issue_doc())]),
        Message::tool("c1", "t", ISSUE_DOC),
    ];
    let request = h.before_model(ModelRequest::new(history)).await.unwrap();
    assert_eq!(request.messages[1].tool_calls[0].arguments, issue_doc_redacted());
    let text: Value = serde_json::from_str(&request.messages[2].text()).expect("still JSON");
    assert_eq!(text, issue_doc_redacted());
    // the text API, with the counts
    let (out, counts) = PiiMiddleware::new(PiiStrategy::Redact).redact_text(ISSUE_DOC).unwrap();
    assert_eq!(
        out,
        r#"{"card":"[REDACTED_CREDIT_CARD]","phone":"[REDACTED_PHONE]","email":"[REDACTED_EMAIL]"}"#
    );
    assert_eq!((counts["credit_card"], counts["phone"], counts["email"]), (1, 1, 1));
}

/// Streamed in pieces of every size, the arguments equal the whole text
/// redacted, parse, and the call runs with the phone replaced.
#[tokio::test]
async fn streamed_arguments_with_a_keyed_phone_parse_after_redaction() {
    // padding between the values, so the stream emits (and cuts) between and around them
    let pad = "lorem ipsum ".repeat(40);
    let raw = format!(
        concat!(
            r#"{{"card":4111111111111111,"p1":"{pad}","phone":14155552671,"email":"a@b.co","#,
            r#" "contact": {{"p2":"{pad}","mobileNo": "4155552671","p3":"{pad}","#,
            r#" "home_phone": [14155552671, "+4155552671", 12]}},"#,
            r#" "hotel": 14155552671, "p4":"{pad}", "n": 4096}}"#
        ),
        pad = pad
    );
    let raw = raw.as_str();
    let expected = json!({
        "p1": pad, "p4": pad,
        "card": "[REDACTED_CREDIT_CARD]",
        "phone": "[REDACTED_PHONE]",
        "email": "[REDACTED_EMAIL]",
        "contact": {
            "p2": pad, "p3": pad,
            "mobileNo": "[REDACTED_PHONE]",
            "home_phone": ["[REDACTED_PHONE]", "[REDACTED_PHONE]", 12],
        },
        "hotel": 14155552671u64,
        "n": 4096,
    });
    let whole = redact_text(raw);
    assert_eq!(serde_json::from_str::<Value>(&whole).unwrap(), expected, "{whole}");
    for size in [1, 2, 3, 5, 8, 13, 64, 400] {
        let (calls, streamed) = stream_arguments(raw, size).await;
        assert_eq!(
            streamed, whole,
            "pieces of {size}: the stream equals the whole text redacted"
        );
        let parsed: Value = serde_json::from_str(&streamed).unwrap_or_else(|e| panic!("pieces of {size}: {e}"));
        assert_eq!(parsed, expected, "pieces of {size}");
        assert_eq!(calls, vec![expected.clone()], "pieces of {size}");
    }
}

#[test]
fn keys_are_split_into_words_and_only_a_phone_word_counts() {
    for key in [
        "phone",
        "Phone",
        "PHONE",
        "phoneNumber",
        "PhoneNumber",
        "mobile_no",
        "mobile-no",
        "home_phone",
        "home.phone",
        "home phone",
        "tel",
        "telephone",
        "cell",
        "cellphone",
        "fax",
        "msisdn",
        "whatsapp",
        "SMSCode",
        "sms_to",
        "phone2",
        "phones",
    ] {
        assert_eq!(
            both(json!({ key: 14155552671u64 })),
            json!({ key: "[REDACTED_PHONE]" }),
            "a number under {key:?}"
        );
        assert_eq!(
            both(json!({ key: "14155552671" })),
            json!({ key: "[REDACTED_PHONE]" }),
            "bare digits under {key:?}"
        );
    }
    for key in [
        "hotel",
        "cancel",
        "cells",
        "cells_count",
        "telemetry_id",
        "telephoned",
        "microphone",
        "smsc",
        "n",
    ] {
        let doc = json!({ key: 14155552671u64, "s": { key: "14155552671" } });
        assert_eq!(both(doc.clone()), doc, "{key:?} names no phone");
    }
    // every declared word is a phone key, alone and as the last word of a longer key
    for word in PHONE_KEY_WORDS {
        assert_eq!(
            both(json!({ *word: 1234567 })),
            json!({ *word: "[REDACTED_PHONE]" }),
            "{word}"
        );
        let key = format!("contact_{word}");
        assert_eq!(
            both(json!({ &key: 1234567 })),
            json!({ &key: "[REDACTED_PHONE]" }),
            "{key}"
        );
    }
}

#[test]
fn a_keyed_phone_has_7_to_15_digits() {
    let doc = json!({
        "phone": 12345678901234567890u64,
        "mobile": 123456,
        "tel": "123456",
        "fax": "1234567890123456",
        "sms": "+1234567890123456",
        "cell": "call 4155552671 after 5",
        "msisdn": 1.5,
        "whatsapp": -3,
    });
    assert_eq!(both(doc.clone()), doc, "too few or too many digits, or not bare digits");
    assert_eq!(
        both(
            json!({ "phone": 1234567, "tel": "+123456789012345", "fax": 123456789012345u64, "cell": -14155552671i64 })
        ),
        json!({
            "phone": "[REDACTED_PHONE]",
            "tel": "[REDACTED_PHONE]",
            "fax": "[REDACTED_PHONE]",
            "cell": "[REDACTED_PHONE]",
        })
    );
    // a number written with a fraction or an exponent is read by its mantissa
    assert_eq!(
        redact_text(r#"{"phone": 14155552671.0, "tel": 1.4155552671e10, "fax": 3.25}"#),
        r#"{"phone": "[REDACTED_PHONE]", "tel": "[REDACTED_PHONE]", "fax": 3.25}"#
    );
    // a phone written with separators is found by the phone detector as always
    assert_eq!(
        both(json!({ "x": "+1 415 555 2671" })),
        json!({ "x": "[REDACTED_PHONE]" })
    );
}

#[test]
fn a_keyed_phone_is_found_at_any_depth_and_in_an_array_under_the_key() {
    let doc = json!({
        "a": { "b": [ { "contact": { "mobilePhone": 14155552671u64, "age": 42 } } ] },
        "phones": [14155552671u64, "4155552671", 12, "call me", { "x": 14155552671u64 }, [14155552671u64]],
        "phone": { "work": 14155552671u64, "ext": 14155552671u64 },
        "after": 14155552671u64,
    });
    assert_eq!(
        both(doc),
        json!({
            "a": { "b": [ { "contact": { "mobilePhone": "[REDACTED_PHONE]", "age": 42 } } ] },
            // an element of the array under the key; an array or object inside it is read by its own keys
            "phones": ["[REDACTED_PHONE]", "[REDACTED_PHONE]", 12, "call me", { "x": 14155552671u64 }, [14155552671u64]],
            // an object under a phone key: its own keys decide
            "phone": { "work": 14155552671u64, "ext": 14155552671u64 },
            "after": 14155552671u64,
        })
    );
    // digits of any script and escaped digits under the key are digits
    assert_eq!(
        both(json!({ "phone": "\u{661}\u{664}\u{661}\u{665}\u{665}\u{665}\u{665}\u{662}\u{666}\u{667}\u{661}" })),
        json!({ "phone": "[REDACTED_PHONE]" })
    );
    assert_eq!(
        redact_text(r#"{"tel": "\u0031\u0034155552671"}"#),
        r#"{"tel": "[REDACTED_PHONE]"}"#
    );
    // a key past 256 bytes names no phone
    let long = format!("phone_{}", "x".repeat(300));
    let doc = json!({ &long: 14155552671u64 });
    assert_eq!(both(doc.clone()), doc);
    // a key with an escape is read as the key it spells
    assert_eq!(
        redact_text(r#"{"\u0070hone": 14155552671, "x": 14155552671}"#),
        r#"{"\u0070hone": "[REDACTED_PHONE]", "x": 14155552671}"#
    );
}

#[tokio::test]
async fn a_keyed_phone_is_masked_hashed_blocked_or_left_when_phones_are_off() {
    let (masked, _) = PiiMiddleware::new(PiiStrategy::Mask)
        .redact_value(&json!({ "phone": 14155552671u64 }))
        .unwrap();
    assert_eq!(masked, json!({ "phone": "********671" }));
    let (hashed, _) = PiiMiddleware::new(PiiStrategy::Hash)
        .redact_value(&json!({ "phone": "14155552671" }))
        .unwrap();
    assert!(
        hashed["phone"].as_str().unwrap().starts_with("<phone_hash:"),
        "{hashed}"
    );
    let found = PiiMiddleware::new(PiiStrategy::Block)
        .redact_value(&json!({ "phone": 14155552671u64 }))
        .unwrap_err();
    assert_eq!(found.get("phone"), Some(&1));
    let found = PiiMiddleware::new(PiiStrategy::Block)
        .redact_text(ISSUE_DOC)
        .unwrap_err();
    assert_eq!(found.get("phone"), Some(&1));
    let mut block: MiddlewareHarness = MiddlewareHarness::new(PiiMiddleware::new(PiiStrategy::Block));
    let err = block
        .before_tool(ToolCall::new("1", "t", json!({ "tel": 14155552671u64 })))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("1 phone") && !err.to_string().contains("4155"),
        "{err}"
    );
    // with the phone type off, a keyed phone is left as it is
    let only_email = PiiMiddleware::new(PiiStrategy::Redact).only(["email"]).unwrap();
    let (out, _) = only_email.redact_value(&issue_doc()).unwrap();
    assert_eq!(
        out,
        json!({ "card": 4111111111111111u64, "phone": 14155552671u64, "email": "[REDACTED_EMAIL]" })
    );
    let (out, _) = only_email.redact_text(ISSUE_DOC).unwrap();
    assert_eq!(
        out,
        r#"{"card":4111111111111111,"phone":14155552671,"email":"[REDACTED_EMAIL]"}"#
    );
}

/// Keys that name a secret, and keys that look close but do not: split into
/// words, a password word counts wherever it stands, `pass` and `pin` only
/// as the last word, the longer names as the end of the key.
#[test]
fn secret_keys_are_split_into_words() {
    for key in [
        "password",
        "password_confirmation",
        "passwordRepeat",
        "password2",
        "new-password-again",
        "PASSWORD_HASH",
        "pwd",
        "db_pwd",
        "pass",
        "passwd",
        "db_pass",
        "smtpPass",
        "pass2",
        "passcode",
        "pin",
        "card_pin",
        "pinCode",
        "PIN_NUMBER",
        "api_key",
        "api_key_2",
        "clientSecret",
        "AWS_SECRET_ACCESS_KEY",
        "access_token",
        "sessionId",
        "PHPSESSID",
        "cookie",
        "Set-Cookie",
        "authorization",
    ] {
        assert_eq!(
            both(json!({ key: "plain-value", "n": { key: 7 } })),
            json!({ key: "[REDACTED_SECRET]", "n": { key: "[REDACTED_SECRET]" } }),
            "{key} names a secret"
        );
    }
    for key in [
        "passenger",
        "compass",
        "bypass_cache",
        "bypass",
        "pass_rate",
        "passes",
        "passwordless",
        "spin",
        "pinned",
        "pin_count",
        "max_tokens",
        "input_tokens",
        "token_count",
        "keyboard",
        "monkey",
        "session",
        "cookie_domain",
        "secretary_name",
        "a password is needed here, please",
    ] {
        let doc = json!({ key: "plain-value", "n": { key: 7 } });
        assert_eq!(both(doc.clone()), doc, "{key} names no secret");
    }
}

/// Sign-up forms' fields, short names and `pin` (which `docs/security.md`
/// names): the tool receives none of their values, strings or numbers.
#[tokio::test]
async fn every_secret_named_field_of_a_form_is_replaced_before_the_tool_runs() {
    use std::sync::Arc;
    use tinyagents::testing::RecordingTool;
    let send = RecordingTool::new("send").returning("sent");
    let args = json!({
        "password_confirmation": "hunter2",
        "passwordRepeat": "hunter2",
        "password2": "hunter2",
        "pwd": "hunter2",
        "pass": "hunter2",
        "passwd": "hunter2",
        "pin": 4821,
        "card_pin": "4821",
        "passenger": "Ann",
        "pass_rate": 93,
    });
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("send", args),
        ScriptedTurn::text("done"),
    ]));
    let agent = super::pii_support::pii_agent(model, send.clone(), PiiStrategy::Redact);
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let got = &send.calls()[0];
    let text = got.to_string();
    assert!(!text.contains("hunter2") && !text.contains("4821"), "{text}");
    assert_eq!(got["pin"], "[REDACTED_SECRET]");
    assert_eq!(got["passenger"], "Ann");
    assert_eq!(got["pass_rate"], 93);
}

/// The same keys in JSON text (streamed arguments, a JSON answer): the string
/// or number under them is replaced, and the parsed and text paths agree.
#[test]
fn secret_named_values_in_json_text_match_the_parsed_value() {
    let doc = json!({
        "password_confirmation": "hunter2",
        "pwd": "hunter2",
        "pin": 4821,
        "card": { "pin": -1234.5 },
        "passenger": "Ann",
        "pass_rate": 93,
    });
    let out = both(doc);
    assert_eq!(
        out,
        json!({
            "password_confirmation": "[REDACTED_SECRET]",
            "pwd": "[REDACTED_SECRET]",
            "pin": "[REDACTED_SECRET]",
            "card": { "pin": "[REDACTED_SECRET]" },
            "passenger": "Ann",
            "pass_rate": 93,
        })
    );
}

/// A secret-named key written with an invisible character (soft hyphen, zero
/// width space) or in fullwidth letters is read as its text is read: the
/// value under it is a secret in a parsed value as in the text; the same for
/// a phone key.
#[test]
fn a_key_with_invisible_or_fullwidth_characters_is_read_normalised() {
    for key in [
        "pass\u{AD}word",
        "api\u{200B}_key",
        "\u{FF50}\u{FF41}\u{FF53}\u{FF53}\u{FF57}\u{FF4F}\u{FF52}\u{FF44}",
        "\u{1D429}\u{1D422}\u{1D427}",
        "to\u{2060}ken",
    ] {
        let doc = json!({ key: "hunter2" });
        let text = redact_text(&doc.to_string());
        let value = redact_value(&doc).to_string();
        assert!(!text.contains("hunter2"), "text path {key:?}: {text}");
        assert!(!value.contains("hunter2"), "value path {key:?}: {value}");
    }
    let doc = json!({ "\u{FF50}\u{FF48}\u{FF4F}\u{FF4E}\u{FF45}": 14155552671u64, "mo\u{AD}bile": "4155552671" });
    let value = redact_value(&doc).to_string();
    assert!(!value.contains("4155552671"), "{value}");
}

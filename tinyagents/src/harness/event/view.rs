//! The run viewer: one self-contained HTML page (no network, its script and
//! style inline) showing a run's timeline, details, charts and filters.
//!
//! [`render_html`] embeds a [`RecordedRun`]; [`live_html`] makes the same
//! page fed by a server's SSE stream as the run happens (the `http_sse`
//! example serves it). The page is `view/viewer.html` with three slots
//! filled here: its style, its script and the run's data, a JSON document in
//! a `<script type="application/json">` element, escaped so no text of the
//! run can end that element ([`embed_json`]). The script writes every text of
//! the run with `textContent`, never as HTML. A recorded page prices each
//! model call from the built-in price table ([`render_html`]); a live page
//! shows its cost as unknown.
//!
//! ```
//! use tinyagents::harness::event::{render_html, RecordedRun};
//!
//! let log = "{\"format\":\"tinyagents-run\",\"version\":1,\"tinyagents\":\"0.1.0\"}\n\
//!            {\"t_us\":5,\"event\":{\"type\":\"notice\",\"source\":\"demo\",\"message\":\"</script><b>\",\"is_error\":false}}\n";
//! let run = RecordedRun::read(log.as_bytes()).unwrap();
//! let html = render_html(&run, "demo");
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! assert!(!html.contains("</script><b>"));
//! ```

use std::collections::HashMap;

use serde_json::Value;

use super::{EventKind, RecordedRun};
use crate::harness::model::catalog_rates;
use crate::harness::model::Usage;

const PAGE: &str = include_str!("view/viewer.html");
const STYLE: &str = include_str!("view/viewer.css");
const SCRIPT: &str = include_str!("view/viewer.js");

/// The viewer page showing `run`, titled `title`.
///
/// Each `model_call_completed` record carries a `cost` member: its price in
/// USD, derived from the model's name and the reported usage by the built-in
/// price table ([`catalog_rates`]), or why it is unknown (a model the table
/// does not price, usage the provider did not report, a token class with no
/// rate). Cache writes are priced at the base (short-lived) write rate.
pub fn render_html(run: &RecordedRun, title: &str) -> String {
    let mut models: HashMap<(String, u64, u64), String> = HashMap::new();
    let events: Vec<Value> = run
        .events
        .iter()
        .map(|r| {
            let mut rec = serde_json::json!({ "t_us": r.t_us, "event": r.event });
            let key = |e: &Value| {
                (
                    e["run_id"].as_str().unwrap_or_default().to_owned(),
                    e["step"].as_u64().unwrap_or_default(),
                    e["attempt"].as_u64().unwrap_or_default(),
                )
            };
            match r.kind {
                EventKind::ModelCallStarted => {
                    if let Some(model) = r.event["model"].as_str() {
                        models.insert(key(&r.event), model.to_owned());
                    }
                }
                EventKind::ModelCallCompleted => {
                    rec["cost"] = call_cost(models.get(&key(&r.event)).map(String::as_str), &r.event);
                }
                _ => {}
            }
            rec
        })
        .collect();
    let data = serde_json::json!({
        "title": title,
        "header": run.header,
        "events": events,
    });
    page(&data)
}

/// The price of one completed model call (`event`, a `model_call_completed`
/// of `model`): `{"usd": N}` or `{"unknown": "why"}`.
fn call_cost(model: Option<&str>, event: &Value) -> Value {
    let unknown = |why: String| serde_json::json!({ "unknown": why });
    let Some(model) = model else {
        return unknown("no model_call_started names this call's model".into());
    };
    if event["usage_reported"] != Value::Bool(true) {
        return unknown(format!("{model} reported no usage"));
    }
    let Ok(usage) = serde_json::from_value::<Usage>(event["usage"].clone()) else {
        return unknown("the usage is malformed".into());
    };
    let Some(rates) = catalog_rates(model) else {
        return unknown(format!("no price for model {model}"));
    };
    let v = rates.value(&usage, false);
    if v.unpriced.is_empty() {
        serde_json::json!({ "usd": v.usd })
    } else {
        unknown(format!("{model} has no rate for {}", v.unpriced.join(", ")))
    }
}

/// The viewer page for a live run: it shows a prompt box, and on submit
/// sends `POST {url}` with `{"prompt": …}` and draws the run from the
/// response's server-sent events as they arrive (each event's data one
/// `AgentEvent` as JSON; a `finished` or `error` event ends it), the
/// protocol of the `http_sse` example.
pub fn live_html(url: &str, title: &str) -> String {
    page(&serde_json::json!({ "title": title, "live": { "url": url } }))
}

fn page(data: &Value) -> String {
    let (head, rest) = PAGE.split_once("/*STYLE*/").expect("the page has a style slot");
    let (mid, rest) = rest.split_once("/*DATA*/").expect("the page has a data slot");
    let (mid2, tail) = rest.split_once("/*SCRIPT*/").expect("the page has a script slot");
    let json = embed_json(data);
    let mut out = String::with_capacity(PAGE.len() + STYLE.len() + SCRIPT.len() + json.len());
    for part in [head, STYLE, mid, &json, mid2, SCRIPT, tail] {
        out.push_str(part);
    }
    out
}

/// `value` as JSON that is safe inside an HTML `<script>` element: `<`, `>`
/// and `&` (which can only occur inside JSON strings) are written as `\u003c`,
/// `\u003e` and `\u0026`, so no `</script` or `<!--` can appear, and U+2028
/// and U+2029 as escapes. `JSON.parse` reads back the same value.
pub fn embed_json(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_end_its_script_element_and_reads_back_the_same() {
        let hostile = serde_json::json!({
            "a": "</script><script>alert(1)</script>",
            "b": "<!-- x --> & \u{2028}\u{2029}",
            "</SCRIPT": 1,
        });
        let text = embed_json(&hostile);
        for bad in ["<", ">", "&", "\u{2028}", "\u{2029}"] {
            assert!(!text.contains(bad), "{bad:?} in {text}");
        }
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), hostile);
    }

    #[test]
    fn the_page_has_its_slots_filled_once() {
        let html = live_html("/run", "t");
        assert!(!html.contains("/*STYLE*/") && !html.contains("/*DATA*/") && !html.contains("/*SCRIPT*/"));
        assert_eq!(
            html.matches("<script type=\"application/json\" id=\"run-data\">")
                .count(),
            1
        );
        // Nothing is loaded from elsewhere.
        for remote in ["http://", "https://", "src=", "href="] {
            let hits: Vec<_> = html
                .match_indices(remote)
                .map(|(i, _)| &html[i.saturating_sub(40)..i + 40])
                .collect();
            // The SVG namespace is a name, not a load.
            assert!(
                hits.iter().all(|h| h.contains("www.w3.org/2000/svg")),
                "{remote}: {hits:?}"
            );
        }
    }
}

//! The run viewer: one self-contained HTML page (no network, its script and
//! style inline) showing a run's timeline, details, charts and filters.
//!
//! [`render_html`] embeds a [`RecordedRun`]; [`live_html`] makes the same
//! page fed by a server's SSE stream as the run happens (the `http_sse`
//! example serves it). The page is `view/viewer.html` with three slots
//! filled here: its style, its script and the run's data, a JSON document in
//! a `<script type="application/json">` element, escaped so no text of the
//! run can end that element ([`embed_json`]). The script writes every text of
//! the run with `textContent`, never as HTML.
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

use serde_json::Value;

use super::RecordedRun;

const PAGE: &str = include_str!("view/viewer.html");
const STYLE: &str = include_str!("view/viewer.css");
const SCRIPT: &str = include_str!("view/viewer.js");

/// The viewer page showing `run`, titled `title`.
pub fn render_html(run: &RecordedRun, title: &str) -> String {
    let data = serde_json::json!({
        "title": title,
        "header": run.header,
        "events": run.events,
    });
    page(&data)
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

//! Headless Chromium for the run viewer's tests (shared with the `http_sse`
//! example's test): find it, open a page once with `--dump-dom` after a
//! bounded virtual-time budget (no sleep: Chromium exits when the page's
//! scripts and requests are done), and read the DOM it built.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The workspace's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Where screenshots and pages go: `target/viewer-screenshots/`.
pub fn out_dir() -> PathBuf {
    let dir = workspace().join("target").join("viewer-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Chromium, or `None` (skip) outside CI when it is not installed.
pub fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output() {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if out.status.success() && !path.is_empty() {
                return Some(PathBuf::from(path));
            }
        }
    }
    let msg = "the viewer's browser tests need Chromium (`apt-get install -y chromium`; .ci/run installs it)";
    let required = std::env::var("CI").as_deref() == Ok("true")
        || std::env::var("TINYAGENTS_REQUIRE_BROWSER").is_ok_and(|v| !v.is_empty() && v != "0");
    assert!(
        !required,
        "{msg}: CI=true or TINYAGENTS_REQUIRE_BROWSER is set, so this fails"
    );
    eprintln!("skipped: {msg}");
    None
}

/// Opens `url` and returns the DOM after its scripts ran; saves a
/// screenshot as `shot` when given. Fails on a JavaScript error.
pub fn open(chrome: &Path, url: &str, height: u32, shot: Option<&Path>) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let profile = std::env::temp_dir().join(format!(
        "tinyagents-viewer-profile-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&profile);
    let mut cmd = Command::new("timeout");
    cmd.arg("120").arg(chrome).args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--virtual-time-budget=10000",
    ]);
    cmd.arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size=1400,{height}"));
    if let Some(shot) = shot {
        cmd.arg(format!("--screenshot={}", shot.display()));
    }
    let out = cmd.arg("--dump-dom").arg(url).output().expect("chromium starts");
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8(out.stdout).expect("the DOM is UTF-8");
    assert!(
        dom.contains("data-ready=\"true\""),
        "the viewer did not finish loading {url}"
    );
    let errors = between(&dom, "<ul id=\"js-errors\">", "</ul>").unwrap_or_default();
    assert!(errors.is_empty(), "JavaScript errors on {url}: {errors}");
    dom
}

/// The text between `start` and the next `end`.
pub fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = text.find(start)? + start.len();
    let to = text[from..].find(end)? + from;
    Some(&text[from..to])
}

/// HTML text with its entities read back.
pub fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// A timeline row as rendered.
#[derive(Debug)]
pub struct Row {
    pub id: String,
    pub selected: bool,
    pub kind: String,
    pub outcome: String,
    pub depth: usize,
    pub label: String,
}

/// The timeline rows in the DOM.
pub fn rows(dom: &str) -> Vec<Row> {
    dom.split("<div class=\"row")
        .skip(1)
        .map(|chunk| {
            let attr = |name: &str| {
                between(chunk, &format!("{name}=\""), "\"")
                    .unwrap_or_default()
                    .to_owned()
            };
            Row {
                id: attr("data-id"),
                selected: chunk.starts_with(" selected\""),
                kind: attr("data-kind"),
                outcome: attr("data-outcome"),
                depth: attr("data-depth").parse().unwrap(),
                label: unescape(between(chunk, "class=\"label\">", "</span>").unwrap_or_default()),
            }
        })
        .collect()
}

/// The first row of `kind` whose label contains `label`.
pub fn row<'a>(rows: &'a [Row], kind: &str, label: &str) -> &'a Row {
    rows.iter()
        .find(|r| r.kind == kind && r.label.contains(label))
        .unwrap_or_else(|| panic!("no {kind} row with `{label}` in {rows:#?}"))
}

/// A value of the details pane (`<dd data-field=…>` or `<pre data-field=…>`).
pub fn field(dom: &str, name: &str) -> String {
    let details = between(dom, "<aside id=\"details\"", "</aside>").expect("a details pane");
    let at = details
        .find(&format!("data-field=\"{name}\">"))
        .unwrap_or_else(|| panic!("no detail `{name}` in {details}"));
    let rest = &details[at..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest.find("</").unwrap();
    unescape(&rest[start..end])
}

/// A value of the summary bar.
pub fn stat(dom: &str, name: &str) -> String {
    let at = dom
        .find(&format!("data-stat=\"{name}\""))
        .unwrap_or_else(|| panic!("no stat {name}"));
    unescape(between(&dom[at..], "<b>", "</b>").unwrap())
}

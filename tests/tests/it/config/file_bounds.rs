//! Issue 14, class 7: every error of an agent file has a place
//! (`file:line:col`) and every value it echoes is bounded and escaped:
//! unknown sections of every shape (dotted headers, arrays of tables, inline
//! tables, dotted keys), huge values, huge keys, control characters.

use tinyagents::config::{ConfigFile, FileErrors, MiddlewareRegistry};

fn errors(text: &str) -> FileErrors {
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let file = ConfigFile::parse("agent.toml", text).expect("valid TOML");
    match registry.build_file(&file) {
        Ok(_) => panic!("the file was accepted"),
        Err(e) => e,
    }
}

/// Every line of the display starts with `agent.toml:<line>:<col>: `.
fn assert_every_error_has_a_place(shown: &str) {
    for line in shown.lines() {
        let rest = line
            .strip_prefix("agent.toml:")
            .unwrap_or_else(|| panic!("no file: {line}"));
        let mut parts = rest.splitn(3, ':');
        let (l, c) = (parts.next().unwrap(), parts.next().unwrap_or(""));
        assert!(
            l.parse::<usize>().is_ok() && c.parse::<usize>().is_ok(),
            "no line and column: {line}"
        );
    }
}

const VALID: &str = "[[middleware]]\ntype = \"logging\"\n\n";

#[test]
fn unknown_sections_of_every_shape_are_reported_at_their_line() {
    let cases = [
        ("[oops.deeper]\nx = 1\n", 4),
        ("[oops.deeper.still]\nx = 1\n", 4),
        ("[[oops]]\nx = 1\n", 4),
        ("[[oops.deeper]]\nx = 1\n", 4),
        ("oops = { deeper = 1 }\n", 4),
        ("oops.deeper = 1\n", 4),
        ("[agent]\nprompt = \"hi\"\n[oops]\n", 6),
    ];
    for (tail, line) in cases {
        // Keys before any table header belong to the root: put them first.
        let text = if tail.starts_with('[') {
            format!("{VALID}{tail}")
        } else {
            format!("{tail}{VALID}")
        };
        let err = errors(&text);
        assert_eq!(err.len(), 1, "{text}\n{err}");
        let at = err.errors[0].location.unwrap_or_else(|| panic!("no place: {err}"));
        let want = if tail.starts_with('[') { line } else { 1 };
        assert_eq!(at.line, want, "{text}\n{err}");
        let shown = err.to_string();
        assert!(shown.contains("`oops`") && shown.contains("unknown section"), "{shown}");
        assert_every_error_has_a_place(&shown);
    }
}

#[test]
fn a_ten_megabyte_value_is_echoed_shortened_with_its_length() {
    let huge = "x".repeat(10_000_000);
    // The example at 10 MB; its siblings (a value under an unknown
    // key, an unknown type, an unknown section's value, a bad value inside an
    // array) at 1 MB, which is as far past the bound and parses faster.
    let big = "x".repeat(1_000_000);
    let texts = [
        format!("[[middleware]]\ntype = \"logging\"\nlevel = \"{huge}\"\n"),
        format!("[[middleware]]\ntype = \"logging\"\nnoise = \"{big}\"\n"),
        format!("[[middleware]]\ntype = \"{big}\"\n"),
        format!("{VALID}[oops]\nv = \"{big}\"\n"),
        format!("[[middleware]]\ntype = \"logging\"\nlevel = [\"{big}\"]\n"),
    ];
    for text in &texts {
        let err = errors(text);
        let shown = err.to_string();
        assert!(shown.len() < 3_000, "{} bytes shown", shown.len());
        assert!(
            shown.contains("bytes in all)"),
            "{}",
            shown.chars().take(400).collect::<String>()
        );
        assert_every_error_has_a_place(&shown);
        // Nothing lost: the error still carries the whole value for code to inspect.
        let kept = err.errors[0].error.value.as_ref().map_or(0, |v| v.to_string().len());
        assert!(
            kept > 1_000_000 || err.errors[0].error.value.is_none(),
            "value kept whole"
        );
    }
}

#[test]
fn a_ten_megabyte_key_is_echoed_shortened_and_costs_no_suggestion_time() {
    let key = "k".repeat(10_000_000);
    let text = format!("[[middleware]]\ntype = \"logging\"\n\"{key}\" = 1\n");
    let started = std::time::Instant::now();
    let err = errors(&text);
    let shown = err.to_string();
    assert!(shown.len() < 3_000, "{} bytes shown", shown.len());
    assert!(
        shown.contains("… (10000014 bytes in all)"),
        "{}",
        shown.chars().take(400).collect::<String>()
    );
    assert_eq!(err.errors[0].location.map(|l| l.line), Some(3));
    // Not a timing assertion on a loaded machine: a generous bound that an
    // edit distance against a 10 MB key (minutes) would blow.
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn control_characters_in_values_and_keys_are_escaped_not_echoed_raw() {
    let text =
        "[[middleware]]\ntype = \"logging\"\nlevel = \"\\u001b[31mred\\u202e\"\n\"\\u001b]0;pwned\\u0007\" = 1\n";
    let err = errors(text);
    let shown = err.to_string();
    assert_eq!(err.len(), 2, "{shown}");
    assert!(
        !shown.contains('\u{1b}') && !shown.contains('\u{7}') && !shown.contains('\u{202e}'),
        "{shown:?}"
    );
    assert!(shown.contains("\\u{1b}]0;pwned\\u{7}"), "{shown}");
    assert_every_error_has_a_place(&shown);
    assert_eq!(shown.lines().count(), 2, "no value adds lines of its own");
}

#[test]
fn a_type_mismatch_does_not_echo_the_value_through_the_parser_message() {
    let huge = "9".repeat(1_000_000);
    let text = format!("[[middleware]]\ntype = \"logging\"\nlevel = {{ deep = \"{huge}\" }}\n");
    let shown = errors(&text).to_string();
    assert!(shown.len() < 3_000, "{} bytes shown", shown.len());
}

#[test]
fn a_syntax_error_and_a_whole_document_error_have_a_place() {
    let err = ConfigFile::parse("agent.toml", "[[middleware]]\ntype = \"logging\"\nlevel = \n").unwrap_err();
    assert_every_error_has_a_place(&err.to_string());
    assert_eq!(err.errors[0].location.map(|l| l.line), Some(3));
    let err = errors("middleware = 5\n");
    assert_every_error_has_a_place(&err.to_string());
    assert_eq!(err.errors[0].location.map(|l| l.line), Some(1));
}

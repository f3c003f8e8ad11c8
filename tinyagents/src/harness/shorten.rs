//! Echoing untrusted text in an error message: bounded and escaped.

/// `text` as it may appear inside an error message: control characters and
/// bidirectional-override characters escaped (`\n`, `\u{202e}`), and cut after
/// `max` characters with an ellipsis and the full length in bytes, so a
/// 10 MB value never becomes a 10 MB message and a value can never forge
/// lines of its own in a log.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max.saturating_mul(2)) + 32);
    for (shown, c) in text.chars().enumerate() {
        if shown >= max {
            out.push_str(&format!("… ({} bytes in all)", text.len()));
            return out;
        }
        if c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::shorten;

    #[test]
    fn short_text_is_kept_long_text_is_cut_with_its_length_and_controls_are_escaped() {
        assert_eq!(shorten("plain", 80), "plain");
        assert_eq!(shorten("a\nb\x1b[31m\u{202e}", 80), "a\\nb\\u{1b}[31m\\u{202e}");
        let long = "x".repeat(10_000_000);
        let cut = shorten(&long, 80);
        assert_eq!(cut, format!("{}… (10000000 bytes in all)", "x".repeat(80)));
        // Multi-byte characters are never split.
        assert_eq!(shorten("ééé", 2), "éé… (6 bytes in all)");
    }
}

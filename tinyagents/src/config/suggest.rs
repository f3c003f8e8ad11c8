//! "Did you mean …?" for unknown keys and types.

/// The candidate nearest to `word`, when it is close enough to be a typo.
pub(crate) fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = word.chars().count();
    candidates
        .into_iter()
        // The distance is at least the difference in length: a word far
        // longer than every candidate (a 10 MB key) costs nothing.
        .filter(|c| len.abs_diff(c.chars().count()) <= (c.len() / 3).max(1) + 1)
        .map(|c| (distance(word, c), c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(1) + 1 && *d < c.len())
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `; did you mean `x`?` or nothing.
pub(crate) fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    nearest(word, candidates)
        .map(|c| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}

/// `` `a`, `b` `` (or `(none)`).
pub(crate) fn list<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = names.into_iter().map(|n| format!("`{n}`")).collect();
    if items.is_empty() {
        "(none)".to_owned()
    } else {
        items.join(", ")
    }
}

fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

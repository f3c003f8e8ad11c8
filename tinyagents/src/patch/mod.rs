//! Patches: one strict reading, used by the guard to judge a patch and by
//! [`ApplyPatchTool`] to apply it — what is checked is what is applied, with
//! no second reader (`patch`, `git apply`) that could read other targets.
//!
//! Two formats are read:
//!
//! * the **envelope** (`*** Begin Patch`, `*** Add File: p`, `*** Update
//!   File: p` with an optional `*** Move to: q`, `*** Delete File: p`,
//!   `*** End Patch`; hunks of ` `/`-`/`+` lines after optional `@@`
//!   lines), markers spelled exactly, at the start of the line;
//! * **unified diffs**, plain (`--- a` / `+++ b`) or from git (`diff --git`
//!   with `new file mode`, `deleted file mode`, `index`, `similarity index`,
//!   `rename from` / `rename to`), hunks read by their line counts.
//!
//! Everything else that some applier would read as a header is refused,
//! never skipped: a context diff (`*** old` / `--- new`, whose old name GNU
//! `patch` may write), a padded or mixed-case envelope marker
//! (`  *** Add File: .git/hooks/pre-commit`, which trimming appliers take),
//! `Index:` and `Prereq:` lines, `copy from`/`copy to`, mode changes,
//! symlinks and binary patches, quoted names, a `diff --git` line whose names
//! disagree with its `---`/`+++` or `rename` lines, a plain diff whose old
//! and new names differ. [`Patch::names`] lists every name the headers
//! carry, raw and with `a/`/`b/` stripped: the guard judges all of them.
//!
//! ```
//! use tinyagents::patch::{Patch, Change};
//!
//! let p = Patch::parse("*** Begin Patch\n*** Add File: src/new.rs\n+fn f() {}\n*** End Patch\n").unwrap();
//! assert_eq!(p.files[0].path, "src/new.rs");
//! assert!(matches!(p.files[0].change, Change::Add { .. }));
//! let err = Patch::parse("*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n  *** Add File: .git/hooks/pre-commit\n+x\n*** End Patch\n")
//!     .unwrap_err();
//! assert!(err.to_string().contains("marker"));
//! ```

mod apply;
mod tool;

pub use apply::{apply, Applied};
pub use tool::ApplyPatchTool;

use std::fmt;

/// The largest patch read, in bytes.
pub const MAX_PATCH_BYTES: usize = 8 << 20;

/// A parsed patch: the files it changes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Patch {
    /// One entry per file.
    pub files: Vec<FilePatch>,
}

/// One file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// The path changed (for a move, the source), relative to the root, as the tool applies it.
    pub path: String,
    /// What happens to it.
    pub change: Change,
    /// Every name the headers carry for this file, as written and with an
    /// `a/`/`b/` prefix stripped (what any applier might write).
    pub names: Vec<String>,
}

/// What happens to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// A new file with these lines (it may not exist).
    Add {
        /// The content.
        lines: Vec<String>,
        /// Whether the last line ends with a newline.
        newline_at_end: bool,
        /// Whether it is executable (`new file mode 100755`).
        executable: bool,
    },
    /// The file is removed (it must exist).
    Delete,
    /// The file's hunks are applied, and it is moved when `move_to` is set.
    Update {
        /// The hunks, in order.
        hunks: Vec<Hunk>,
        /// Where the result is written instead (a move or a git rename).
        move_to: Option<String>,
    },
}

/// One hunk: lines to find (context and removed) and their replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The 1-based line the old lines start at, when the format says (unified diffs).
    pub old_start: Option<usize>,
    /// The lines, in order.
    pub lines: Vec<Line>,
    /// The old text has no newline after its last line (`\ No newline at end of file`).
    pub old_no_newline: bool,
    /// The new text has no newline after its last line.
    pub new_no_newline: bool,
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// Kept.
    Context(String),
    /// Removed.
    Remove(String),
    /// Added.
    Add(String),
}

/// Why a patch was refused: the line (1-based), and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchError {
    /// The line of the patch, when one is to blame.
    pub line: Option<usize>,
    /// What is wrong, and the fix.
    pub reason: String,
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(n) => write!(f, "patch line {n}: {}", self.reason),
            None => write!(f, "patch: {}", self.reason),
        }
    }
}

impl std::error::Error for PatchError {}

fn err<T>(line: usize, reason: impl Into<String>) -> Result<T, PatchError> {
    Err(PatchError {
        line: Some(line + 1),
        reason: reason.into(),
    })
}

const ENVELOPE_FIX: &str = "write envelope markers exactly (`*** Add File: path`, at the start of the line)";

/// Whether `line` is something an applier might read as a header: checked
/// case-insensitively after leading whitespace, as the most lenient readers do.
fn header_like(line: &str) -> Option<&'static str> {
    let t = line.trim_start().to_ascii_lowercase();
    const HEADERS: &[(&str, &str)] = &[
        ("***", "a `***` line (an envelope marker or a context diff's header)"),
        ("--- ", "a `--- ` file header"),
        ("+++ ", "a `+++ ` file header"),
        ("diff ", "a `diff` header"),
        ("index:", "an `Index:` header (GNU patch takes a file name from it)"),
        ("prereq:", "a `Prereq:` header"),
        ("@@", "a hunk header"),
        ("rename from", "a `rename from` header"),
        ("rename to", "a `rename to` header"),
        ("copy from", "a `copy from` header"),
        ("copy to", "a `copy to` header"),
        ("new file mode", "a `new file mode` header"),
        ("deleted file mode", "a `deleted file mode` header"),
        ("old mode", "an `old mode` header"),
        ("new mode", "a `new mode` header"),
        ("git binary patch", "a binary patch"),
        ("binary files", "a binary patch"),
    ];
    HEADERS.iter().find(|(p, _)| t.starts_with(p)).map(|(_, what)| *what)
}

impl Patch {
    /// Reads `text` (the envelope, or unified/git diffs); refuses what it
    /// does not understand and every header form it does not take (see the module docs).
    pub fn parse(text: &str) -> Result<Self, PatchError> {
        if text.len() > MAX_PATCH_BYTES {
            return Err(PatchError {
                line: None,
                reason: format!("the patch is over {MAX_PATCH_BYTES} bytes: split it"),
            });
        }
        let lines: Vec<&str> = text.lines().map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
        if let Some(i) = lines.iter().position(|l| l.contains('\0')) {
            return err(i, "a NUL byte: binary content is not applied");
        }
        let first = lines.iter().position(|l| !l.trim().is_empty());
        let patch = match first {
            None => {
                return Err(PatchError {
                    line: None,
                    reason: "the patch is empty".to_owned(),
                })
            }
            Some(i)
                if lines[i]
                    .trim_start()
                    .to_ascii_lowercase()
                    .starts_with("*** begin patch") =>
            {
                envelope(&lines, i)?
            }
            Some(_) => unified(&lines)?,
        };
        if patch.files.is_empty() {
            return Err(PatchError {
                line: None,
                reason: "the patch changes no file".to_owned(),
            });
        }
        Ok(patch)
    }

    /// Every name the patch's headers carry (raw and stripped of `a/`/`b/`),
    /// and every path it writes: what the guard confines and checks.
    pub fn names(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for f in &self.files {
            for n in f.names.iter().chain(std::iter::once(&f.path)).chain(match &f.change {
                Change::Update { move_to: Some(to), .. } => Some(to),
                _ => None,
            }) {
                if !out.contains(n) {
                    out.push(n.clone());
                }
            }
        }
        out
    }
}

/// A file name from a header: no quotes, no surrounding blanks, not empty.
fn name(raw: &str, at: usize) -> Result<String, PatchError> {
    if raw.is_empty() {
        return err(at, "a header without a file name");
    }
    if raw.starts_with('"') {
        return err(at, "a quoted file name (escapes are not read): rename the file plainly");
    }
    if raw.trim() != raw {
        return err(at, "a file name with leading or trailing blanks");
    }
    Ok(raw.to_owned())
}

/// The envelope, from its `*** Begin Patch` line.
fn envelope(lines: &[&str], begin: usize) -> Result<Patch, PatchError> {
    if lines[begin] != "*** Begin Patch" {
        return err(
            begin,
            format!("a padded or mixed-case `*** Begin Patch`: {ENVELOPE_FIX}"),
        );
    }
    let mut files: Vec<FilePatch> = Vec::new();
    let mut i = begin + 1;
    let marker = |l: &str, tag: &str| l.strip_prefix(tag).map(str::to_owned);
    loop {
        let Some(&line) = lines.get(i) else {
            return err(i.saturating_sub(1), "the patch ends without `*** End Patch`");
        };
        if line == "*** End Patch" {
            if let Some(j) = (i + 1..lines.len()).find(|&j| !lines[j].trim().is_empty()) {
                return err(j, "text after `*** End Patch`");
            }
            break;
        }
        if let Some(p) = marker(line, "*** Add File: ") {
            let path = name(&p, i)?;
            i += 1;
            let mut content = Vec::new();
            while let Some(&l) = lines.get(i) {
                if l.starts_with("*** ") && !l.starts_with("*** End of File") {
                    break;
                }
                check_body(l, i, lines.get(i + 1).copied())?;
                match l.strip_prefix('+') {
                    Some(rest) => content.push(rest.to_owned()),
                    None => return err(i, "a line of an added file that does not start with `+`"),
                }
                i += 1;
            }
            files.push(FilePatch {
                names: vec![path.clone()],
                path,
                change: Change::Add {
                    lines: content,
                    newline_at_end: true,
                    executable: false,
                },
            });
        } else if let Some(p) = marker(line, "*** Delete File: ") {
            let path = name(&p, i)?;
            files.push(FilePatch {
                names: vec![path.clone()],
                path,
                change: Change::Delete,
            });
            i += 1;
        } else if let Some(p) = marker(line, "*** Update File: ") {
            let path = name(&p, i)?;
            i += 1;
            let mut move_to = None;
            if let Some(to) = lines.get(i).and_then(|l| marker(l, "*** Move to: ")) {
                move_to = Some(name(&to, i)?);
                i += 1;
            }
            let mut hunks: Vec<Hunk> = Vec::new();
            let mut current: Option<Hunk> = None;
            while let Some(&l) = lines.get(i) {
                if l == "*** End of File" {
                    i += 1;
                    continue;
                }
                if l.starts_with("*** ") {
                    break;
                }
                check_body(l, i, lines.get(i + 1).copied())?;
                if l == "@@" || l.starts_with("@@ ") {
                    hunks.extend(current.take().filter(|h| !h.lines.is_empty()));
                    current = Some(Hunk {
                        old_start: None,
                        lines: Vec::new(),
                        old_no_newline: false,
                        new_no_newline: false,
                    });
                    i += 1;
                    continue;
                }
                let hunk = current.get_or_insert_with(|| Hunk {
                    old_start: None,
                    lines: Vec::new(),
                    old_no_newline: false,
                    new_no_newline: false,
                });
                let parsed = match l.chars().next() {
                    None => Line::Context(String::new()),
                    Some(' ') => Line::Context(l[1..].to_owned()),
                    Some('-') => Line::Remove(l[1..].to_owned()),
                    Some('+') => Line::Add(l[1..].to_owned()),
                    Some(_) => return err(i, "a hunk line that starts with none of ` `, `-`, `+`"),
                };
                hunk.lines.push(parsed);
                i += 1;
            }
            hunks.extend(current.take().filter(|h| !h.lines.is_empty()));
            if hunks.is_empty() && move_to.is_none() {
                return err(i.saturating_sub(1), format!("`*** Update File: {path}` has no hunk"));
            }
            let mut names = vec![path.clone()];
            names.extend(move_to.clone());
            files.push(FilePatch {
                names,
                path,
                change: Change::Update { hunks, move_to },
            });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            let what = header_like(line).unwrap_or("a line outside any file section");
            return err(
                i,
                format!("{what} where an envelope marker was expected: {ENVELOPE_FIX}"),
            );
        }
    }
    Ok(Patch { files })
}

/// A body line of the envelope: nothing another applier could read as a header.
fn check_body(line: &str, at: usize, next: Option<&str>) -> Result<(), PatchError> {
    let t = line.trim_start().to_ascii_lowercase();
    if t.starts_with("***") {
        return err(
            at,
            format!("a padded or mixed-case `***` marker inside a file section (trimming appliers read it as one): {ENVELOPE_FIX}"),
        );
    }
    if line.starts_with("diff --git ") || (line.starts_with("--- ") && next.is_some_and(|n| n.starts_with("+++ "))) {
        return err(
            at,
            "a unified-diff file header inside an envelope: send one format per patch",
        );
    }
    Ok(())
}

/// Unified and git diffs.
fn unified(lines: &[&str]) -> Result<Patch, PatchError> {
    let mut files = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("diff --git ") || line.starts_with("--- ") {
            let (file, next) = unified_file(lines, i)?;
            files.push(file);
            i = next;
            continue;
        }
        if let Some(what) = header_like(line) {
            return err(
                i,
                format!(
                    "{what}, which this reader does not take and another applier would: send unified diffs \
                     (`--- a/x`, `+++ b/x`, `@@`) or the `*** Begin Patch` envelope"
                ),
            );
        }
        i += 1; // commentary before or between files
    }
    Ok(Patch { files })
}

fn strip(name: &str, prefix: &str) -> Option<String> {
    name.strip_prefix(prefix).map(str::to_owned)
}

/// One file of a unified diff, from its `diff --git` or `---` line; returns
/// it and the index of the line after it.
fn unified_file(lines: &[&str], start: usize) -> Result<(FilePatch, usize), PatchError> {
    let mut i = start;
    let mut git: Option<(usize, String)> = None;
    let (mut new_file, mut deleted, mut executable) = (false, false, false);
    let (mut rename_from, mut rename_to): (Option<String>, Option<String>) = (None, None);
    if let Some(rest) = lines[i].strip_prefix("diff --git ") {
        git = Some((i, rest.to_owned()));
        i += 1;
        while let Some(&l) = lines.get(i) {
            if let Some(mode) = l.strip_prefix("new file mode ") {
                new_file = true;
                executable = match mode {
                    "100644" => false,
                    "100755" => true,
                    _ => return err(i, format!("file mode `{mode}` (a symlink or submodule) is not applied")),
                };
            } else if let Some(mode) = l.strip_prefix("deleted file mode ") {
                if !matches!(mode, "100644" | "100755") {
                    return err(i, format!("file mode `{mode}` (a symlink or submodule) is not applied"));
                }
                deleted = true;
            } else if let Some(p) = l.strip_prefix("rename from ") {
                rename_from = Some(name(p, i)?);
            } else if let Some(p) = l.strip_prefix("rename to ") {
                rename_to = Some(name(p, i)?);
            } else if l.starts_with("index ") || l.starts_with("similarity index ") {
            } else if l.starts_with("old mode ") || l.starts_with("new mode ") {
                return err(i, "a mode change is not applied: change modes yourself");
            } else if l.starts_with("copy from ") || l.starts_with("copy to ") {
                return err(i, "`copy from`/`copy to` is not applied: add the copy as a new file");
            } else {
                break;
            }
            i += 1;
        }
    }
    let (mut old, mut new) = (None, None);
    if let Some(l) = lines.get(i).and_then(|l| l.strip_prefix("--- ")) {
        old = Some(name(l.split('\t').next().unwrap_or(l), i)?);
        i += 1;
        let Some(n) = lines.get(i).and_then(|l| l.strip_prefix("+++ ")) else {
            return err(i, "a `---` header not followed by `+++`");
        };
        new = Some(name(n.split('\t').next().unwrap_or(n), i)?);
        i += 1;
    }
    if git.is_none() && old.is_none() {
        return err(start, "a file section without `---`/`+++` headers");
    }
    let prefixed = old.as_deref().is_none_or(|o| o == "/dev/null" || o.starts_with("a/"))
        && new.as_deref().is_none_or(|n| n == "/dev/null" || n.starts_with("b/"))
        && (git.is_some() || old.is_some());
    let side = |n: &Option<String>, p: &str| -> Option<String> {
        n.as_deref().filter(|n| *n != "/dev/null").map(|n| {
            if prefixed {
                strip(n, p).unwrap_or_else(|| n.to_owned())
            } else {
                n.to_owned()
            }
        })
    };
    let mut from = side(&old, "a/");
    let mut to = side(&new, "b/");
    if old.as_deref() == Some("/dev/null") {
        new_file = true;
    }
    if new.as_deref() == Some("/dev/null") {
        deleted = true;
    }
    if let (Some(rf), Some(rt)) = (&rename_from, &rename_to) {
        if from.as_ref().is_some_and(|f| f != rf) || to.as_ref().is_some_and(|t| t != rt) {
            return err(start, "`rename from`/`rename to` disagree with the `---`/`+++` names");
        }
        from = Some(rf.clone());
        to = Some(rt.clone());
    } else if rename_from.is_some() || rename_to.is_some() {
        return err(start, "a `rename from` without `rename to`, or the reverse");
    }
    if let Some((at, rest)) = &git {
        // the `diff --git` names must be exactly the ones the other headers give
        let (a, b) = match (&from, &to) {
            (Some(f), Some(t)) => (f.clone(), t.clone()),
            (Some(f), None) => (f.clone(), f.clone()),
            (None, Some(t)) => (t.clone(), t.clone()),
            (None, None) => return err(*at, "a `diff --git` section without `---`/`+++` or `rename` names"),
        };
        if *rest != format!("a/{a} b/{b}") {
            return err(
                *at,
                format!("the `diff --git` names `{rest}` are not `a/{a} b/{b}`, the names of the other headers"),
            );
        }
    }
    let (path, move_to) = match (&from, &to) {
        (Some(f), Some(t)) if f == t => (f.clone(), None),
        (Some(f), Some(t)) if rename_from.is_some() => (f.clone(), Some(t.clone())),
        (Some(_), Some(_)) => {
            return err(
                start,
                "the old and new names differ without git's `rename from`/`rename to` (appliers disagree on \
                 which is written): use the same name, or a git rename",
            )
        }
        (Some(f), None) => (f.clone(), None),
        (None, Some(t)) => (t.clone(), None),
        (None, None) => return err(start, "both names are `/dev/null`"),
    };
    let mut names = Vec::new();
    for n in [&old, &new, &rename_from, &rename_to].into_iter().flatten() {
        if n != "/dev/null" {
            names.push(n.clone());
            names.extend(strip(n, "a/").or_else(|| strip(n, "b/")));
        }
    }
    if let Some((_, rest)) = &git {
        names.extend(rest.split(' ').map(str::to_owned));
    }
    let mut hunks = Vec::new();
    while let Some(&l) = lines.get(i) {
        if !l.starts_with("@@ ") {
            break;
        }
        let (hunk, next) = unified_hunk(lines, i)?;
        hunks.push(hunk);
        i = next;
    }
    let change = if new_file && deleted {
        return err(start, "a file both created and deleted");
    } else if new_file {
        if move_to.is_some() {
            return err(start, "a new file with a rename");
        }
        let mut content = Vec::new();
        let mut newline_at_end = true;
        for h in &hunks {
            for l in &h.lines {
                match l {
                    Line::Add(s) => content.push(s.clone()),
                    _ => return err(start, "a new file's hunk with context or removed lines"),
                }
            }
            newline_at_end &= !h.new_no_newline;
        }
        Change::Add {
            lines: content,
            newline_at_end,
            executable,
        }
    } else if deleted {
        Change::Delete
    } else {
        if hunks.is_empty() && move_to.is_none() {
            return err(start, "a file section without hunks");
        }
        Change::Update { hunks, move_to }
    };
    names.sort();
    names.dedup();
    Ok((FilePatch { path, change, names }, i))
}

/// `@@ -a[,b] +c[,d] @@`: the old start and the two counts.
fn hunk_header(line: &str) -> Option<(usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((s, n)) => Some((s.parse().ok()?, n.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (_, d) = range(new)?;
    Some((a, b, d))
}

/// One hunk of a unified diff, read by its counts.
fn unified_hunk(lines: &[&str], start: usize) -> Result<(Hunk, usize), PatchError> {
    let Some((old_start, mut old_left, mut new_left)) = hunk_header(lines[start]) else {
        return err(start, "a hunk header that is not `@@ -a,b +c,d @@`");
    };
    let mut hunk = Hunk {
        old_start: Some(old_start),
        lines: Vec::new(),
        old_no_newline: false,
        new_no_newline: false,
    };
    let mut i = start + 1;
    while old_left > 0 || new_left > 0 {
        let Some(&l) = lines.get(i) else {
            return err(
                i.saturating_sub(1),
                "the patch ends inside a hunk (its counts promise more lines)",
            );
        };
        let (kind, text) = match l.chars().next() {
            None => (' ', ""),
            Some(c @ (' ' | '-' | '+')) => (c, &l[1..]),
            Some('\\') => {
                mark_no_newline(&mut hunk);
                i += 1;
                continue;
            }
            Some(_) => {
                return err(
                    i,
                    "a hunk line that starts with none of ` `, `-`, `+` (the counts promise more)",
                )
            }
        };
        // a line another applier, reading without counts, would take as a file header
        if kind == '-' && l.starts_with("--- ") && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ ")) {
            return err(
                i,
                "a hunk line pair that reads as a `---`/`+++` file header: split the patch",
            );
        }
        if text.trim_start().to_ascii_lowercase().starts_with("***") {
            return err(
                i,
                "a hunk line that reads as a `***` header to lenient appliers: apply this change another way",
            );
        }
        match kind {
            ' ' if old_left > 0 && new_left > 0 => {
                old_left -= 1;
                new_left -= 1;
                hunk.lines.push(Line::Context(text.to_owned()));
            }
            '-' if old_left > 0 => {
                old_left -= 1;
                hunk.lines.push(Line::Remove(text.to_owned()));
            }
            '+' if new_left > 0 => {
                new_left -= 1;
                hunk.lines.push(Line::Add(text.to_owned()));
            }
            _ => return err(i, "a hunk with more lines than its header counts"),
        }
        i += 1;
    }
    if lines.get(i).is_some_and(|l| l.starts_with('\\')) {
        mark_no_newline(&mut hunk);
        i += 1;
    }
    Ok((hunk, i))
}

/// `\ No newline at end of file` after the hunk's last line.
fn mark_no_newline(hunk: &mut Hunk) {
    match hunk.lines.last() {
        Some(Line::Remove(_)) => hunk.old_no_newline = true,
        Some(Line::Add(_)) => hunk.new_no_newline = true,
        Some(Line::Context(_)) => {
            hunk.old_no_newline = true;
            hunk.new_no_newline = true;
        }
        None => {}
    }
}

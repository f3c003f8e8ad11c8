//! Confining a path argument to a workspace root: lexical checks for tricks
//! the file system would not see (encodings, Windows forms, look-alikes),
//! then resolution of `..` and of symlinks against the canonical root.

use std::path::{Component, Path, PathBuf};

/// Characters that look like `.` or `/` but are not, and invisible or
/// direction-changing characters: a path holding one is not understood.
const LOOKALIKES: &[char] = &[
    '\u{2024}', '\u{2025}', '\u{2026}', '\u{FF0E}', '\u{FF0F}', '\u{2215}', '\u{2044}', '\u{29F8}', '\u{FE52}',
    '\u{200B}', '\u{200C}', '\u{200D}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}',
    '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{FEFF}', '\u{FF3C}', '\u{2216}',
];

/// The lexical checks: `Err(reason)` for a path form that is refused before
/// the file system is consulted.
pub(super) fn lexical(raw: &str) -> Result<(), String> {
    if raw.is_empty() {
        return Err("an empty path".to_owned());
    }
    if let Some(c) = raw.chars().find(|c| c.is_control()) {
        return Err(format!("a control character (U+{:04X}) in the path", c as u32));
    }
    if let Some(c) = raw.chars().find(|c| LOOKALIKES.contains(c)) {
        return Err(format!(
            "a look-alike or invisible character (U+{:04X}) in the path",
            c as u32
        ));
    }
    if raw.contains('\\') {
        return Err("a backslash (a Windows-style path or an escape)".to_owned());
    }
    if raw.contains('%') {
        return Err("a `%` (URL-encoded paths are not accepted)".to_owned());
    }
    if raw.contains("://") || raw.to_ascii_lowercase().starts_with("file:") {
        return Err("a URL instead of a path".to_owned());
    }
    let b = raw.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err("a Windows drive letter".to_owned());
    }
    if raw.starts_with('~') {
        return Err("a `~` home-directory path".to_owned());
    }
    if raw.contains('$') || raw.contains('`') {
        return Err("a `$` or backtick (variables and substitutions are not expanded here)".to_owned());
    }
    Ok(())
}

/// Confines `raw` to `root` (which must be canonical): `Ok(resolved)` when the
/// path, walked component by component as the OS would (every existing
/// symlink resolved where it stands, so `link/..` means the link target's
/// parent), ends under the root. A dangling symlink is refused: writing
/// through it could create a file anywhere.
pub(super) fn confine(root: &Path, raw: &str) -> Result<PathBuf, String> {
    lexical(raw)?;
    let mut current = if Path::new(raw).is_absolute() {
        PathBuf::from("/")
    } else {
        root.to_path_buf()
    };
    let mut exists = true;
    for comp in Path::new(raw).components() {
        match comp {
            Component::Prefix(_) => return Err("a path prefix".to_owned()),
            Component::RootDir => current = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !current.pop() {
                    return Err("`..` climbs above the file-system root".to_owned());
                }
            }
            Component::Normal(part) => {
                current.push(part);
                if !exists {
                    continue;
                }
                match std::fs::symlink_metadata(&current) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        current = std::fs::canonicalize(&current)
                            .map_err(|_| format!("`{raw}` goes through a symlink that cannot be resolved"))?;
                    }
                    Ok(_) => {}
                    Err(_) => exists = false,
                }
            }
        }
    }
    if !current.starts_with(root) {
        return Err(format!("`{raw}` resolves outside the workspace root"));
    }
    Ok(current)
}

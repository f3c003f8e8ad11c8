//! Applying a parsed [`Patch`] to a workspace: every change computed in
//! memory first (each hunk found, each file's precondition checked), then
//! written; nothing is written when any part does not apply.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use super::{Change, Hunk, Line, Patch};
use crate::{Result, TinyAgentsError};

/// The largest file a patch updates, in bytes.
const MAX_FILE_BYTES: u64 = 16 << 20;

/// What [`apply`] did, paths relative to the root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Files written (added, updated, or the destination of a move).
    pub written: Vec<PathBuf>,
    /// Files removed (deleted, or the source of a move).
    pub removed: Vec<PathBuf>,
}

fn refuse(message: String) -> TinyAgentsError {
    TinyAgentsError::validation(format!("apply_patch: {message}"))
}

/// A file as it will be: its text and whether it is executable; `None`: absent.
type Staged = Option<(String, bool)>;

/// Applies `patch` under `root` (a canonical directory). Each path must be
/// relative, free of `..`, reached through real directories (no symlink on
/// the way or at the end) and outside `protected` (patterns as in
/// `shell_fs_guard`'s `protected_paths`). Errors name the file, the hunk and the rule.
pub fn apply(patch: &Patch, root: &Path, protected: &[String]) -> Result<Applied> {
    let mut staged: BTreeMap<PathBuf, Staged> = BTreeMap::new();
    let mut applied = Applied::default();
    for f in &patch.files {
        let rel = checked(root, &f.path, protected)?;
        let current = |staged: &BTreeMap<PathBuf, Staged>, rel: &Path| -> Result<Staged> {
            match staged.get(rel) {
                Some(s) => Ok(s.clone()),
                None => read(root, rel),
            }
        };
        match &f.change {
            Change::Add {
                lines,
                newline_at_end,
                executable,
            } => {
                if current(&staged, &rel)?.is_some() {
                    return Err(refuse(format!(
                        "`{}` already exists: update it instead of adding it",
                        f.path
                    )));
                }
                let mut text = lines.join("\n");
                if *newline_at_end && !lines.is_empty() {
                    text.push('\n');
                }
                staged.insert(rel.clone(), Some((text, *executable)));
                applied.written.push(rel);
            }
            Change::Delete => {
                if current(&staged, &rel)?.is_none() {
                    return Err(refuse(format!("`{}` does not exist: nothing to delete", f.path)));
                }
                staged.insert(rel.clone(), None);
                applied.removed.push(rel);
            }
            Change::Update { hunks, move_to } => {
                let Some((text, exec)) = current(&staged, &rel)? else {
                    return Err(refuse(format!(
                        "`{}` does not exist: add it instead of updating it",
                        f.path
                    )));
                };
                let updated = apply_hunks(&text, hunks).map_err(|e| refuse(format!("`{}`: {e}", f.path)))?;
                match move_to {
                    Some(to) => {
                        let dest = checked(root, to, protected)?;
                        if current(&staged, &dest)?.is_some() {
                            return Err(refuse(format!(
                                "`{to}`, the destination of `{}`, already exists",
                                f.path
                            )));
                        }
                        staged.insert(rel.clone(), None);
                        staged.insert(dest.clone(), Some((updated, exec)));
                        applied.removed.push(rel);
                        applied.written.push(dest);
                    }
                    None => {
                        staged.insert(rel.clone(), Some((updated, exec)));
                        applied.written.push(rel);
                    }
                }
            }
        }
    }
    for (rel, state) in &staged {
        let path = root.join(rel);
        let fail = |what: &str, e: std::io::Error| refuse(format!("{what} `{}`: {e}", rel.display()));
        match state {
            None => std::fs::remove_file(&path).map_err(|e| fail("cannot remove", e))?,
            Some((text, exec)) => {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| fail("cannot make the directory of", e))?;
                }
                let tmp = path.with_file_name(format!(
                    ".{}.apply_patch.{}",
                    rel.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
                    std::process::id()
                ));
                std::fs::write(&tmp, text).map_err(|e| fail("cannot write", e))?;
                let mode = if *exec { 0o755 } else { 0o644 };
                let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode));
                std::fs::rename(&tmp, &path).map_err(|e| {
                    let _ = std::fs::remove_file(&tmp);
                    fail("cannot write", e)
                })?;
            }
        }
    }
    Ok(applied)
}

/// `raw` as a path relative to `root`: lexically plain, reached through real
/// directories only, not protected.
fn checked(root: &Path, raw: &str, protected: &[String]) -> Result<PathBuf> {
    crate::protected::path_lexical(raw).map_err(|why| refuse(format!("the path `{raw}` is refused: {why}")))?;
    let rel = PathBuf::from(raw);
    if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(refuse(format!(
            "the path `{raw}` must be relative to the workspace root, without `.` or `..`"
        )));
    }
    let mut at = root.to_path_buf();
    for c in rel.components() {
        at.push(c);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(refuse(format!(
                    "the path `{raw}` goes through the symlink `{}`: patch the file at its real path",
                    at.strip_prefix(root).unwrap_or(&at).display()
                )))
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    if let Some(hit) = crate::protected::protected_hit(root, &root.join(&rel), protected) {
        return Err(refuse(format!(
            "`{raw}` is under `{hit}`, configuration that programs execute (protected_paths): make that change \
             yourself"
        )));
    }
    Ok(rel)
}

/// The file's current text (`None`: absent); refused when not a regular UTF-8 file within the size bound.
fn read(root: &Path, rel: &Path) -> Result<Staged> {
    let path = root.join(rel);
    let meta = match std::fs::symlink_metadata(&path) {
        Err(_) => return Ok(None),
        Ok(m) => m,
    };
    if !meta.is_file() {
        return Err(refuse(format!("`{}` is not a regular file", rel.display())));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(refuse(format!(
            "`{}` is over {MAX_FILE_BYTES} bytes: too large to patch",
            rel.display()
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| refuse(format!("cannot read `{}`: {e}", rel.display())))?;
    let text = String::from_utf8(bytes).map_err(|_| refuse(format!("`{}` is not UTF-8 text", rel.display())))?;
    Ok(Some((text, meta.permissions().mode() & 0o111 != 0)))
}

/// Applies the hunks in order to `text`.
fn apply_hunks(text: &str, hunks: &[Hunk]) -> std::result::Result<String, String> {
    let mut newline_at_end = text.is_empty() || text.ends_with('\n');
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let mut cursor = 0;
    for (n, h) in hunks.iter().enumerate() {
        let old: Vec<&str> = h
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Remove(s) => Some(s.as_str()),
                Line::Add(_) => None,
            })
            .collect();
        let new: Vec<String> = h
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Context(s) | Line::Add(s) => Some(s.clone()),
                Line::Remove(_) => None,
            })
            .collect();
        let matches_at = |pos: usize| pos + old.len() <= lines.len() && lines[pos..pos + old.len()] == old[..];
        let pos = if old.is_empty() {
            h.old_start.unwrap_or(lines.len()).min(lines.len()).max(cursor)
        } else {
            let hinted = h
                .old_start
                .map(|s| s.saturating_sub(1))
                .filter(|&p| p >= cursor && matches_at(p));
            match hinted.or_else(|| (cursor..=lines.len().saturating_sub(old.len())).find(|&p| matches_at(p))) {
                Some(p) => p,
                None => {
                    return Err(format!(
                        "hunk {} does not match the file (its old lines are not found)",
                        n + 1
                    ))
                }
            }
        };
        let end = pos + old.len();
        if end == lines.len() && (h.new_no_newline || h.old_no_newline) {
            newline_at_end = !h.new_no_newline;
        }
        lines.splice(pos..end, new.iter().cloned());
        cursor = pos + new.len();
    }
    let mut out = lines.join("\n");
    if newline_at_end && !lines.is_empty() {
        out.push('\n');
    }
    Ok(out)
}

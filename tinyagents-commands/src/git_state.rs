//! What a sandboxed run may not change in the workspace's git repository:
//! the index and the refs, where a protected path is concerned.
//!
//! The OS sandbox keeps protected paths read-only in the work tree and
//! removes the ones a run creates, but `.git` is only pinned (git must write
//! its objects, index and refs), so a run could stage or commit a protected
//! path — a CI workflow, `.mvn/jvm.config` — that the next `git checkout`,
//! `pull` or `push` outside the sandbox materialises. [`GitState::take`]
//! records the bytes of the root repository's index and refs (`HEAD`,
//! `packed-refs`, every file under `refs/`) before the run;
//! [`GitState::check_and_restore`], once no process of the run is left,
//! compares them: when nothing changed, nothing more happens; when the
//! index or a ref changed, git itself (outside the sandbox, with the safe
//! mode's overrides, no global or system config) lists the protected
//! entries of the index before and after and the paths each moved ref
//! changed, and if a protected path was added, changed or removed the
//! index and every ref are written back as they were and the call fails.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::plan::SAFE_MODES;
use crate::protected::{ends_with_pattern, pattern_parts};

/// The most files under `refs/` recorded; past it the run is refused.
const MAX_REF_FILES: usize = 100_000;

/// The index and refs of the root repository before a run.
#[derive(Debug)]
pub(crate) struct GitState {
    root: PathBuf,
    git_dir: PathBuf,
    /// The protected patterns, as lower-cased components.
    patterns: Vec<Vec<String>>,
    /// `index`, `HEAD`, `packed-refs` and `refs/…`, relative to the git
    /// directory, with their bytes (absent files are not listed).
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl GitState {
    /// The state of `root/.git` (a real directory; a gitlink or no
    /// repository: `Ok(None)`) for the protected `patterns`. `Err` when it
    /// cannot be read in full (the run is then refused).
    pub(crate) fn take(root: &Path, patterns: &[String]) -> Result<Option<Self>, String> {
        let git_dir = root.join(".git");
        if !git_dir.symlink_metadata().is_ok_and(|m| m.is_dir()) || patterns.is_empty() {
            return Ok(None);
        }
        let patterns = patterns.iter().filter_map(|p| pattern_parts(p)).collect();
        let files = read_state(&git_dir)?;
        Ok(Some(Self {
            root: root.to_path_buf(),
            git_dir,
            patterns,
            files,
        }))
    }

    /// Whether the git path `path` (`/`-separated, from the work tree's top)
    /// falls under a protected pattern placed at any depth, as the sandbox
    /// places it ([`ends_with_pattern`]): it, or a directory it lies in,
    /// ends with the pattern.
    fn protected(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        (0..parts.len()).any(|i| {
            self.patterns
                .iter()
                .any(|p| ends_with_pattern(&parts[..i], parts[i], p))
        })
    }

    /// After the run (no process of it left): `Ok` when the index and the
    /// refs are unchanged, or changed without touching a protected path;
    /// otherwise they are restored and `Err` says what was undone. `scratch`
    /// is a directory the run no longer writes (for a copy of the old index).
    pub(crate) fn check_and_restore(&self, scratch: &Path) -> Result<(), String> {
        let now = match read_state(&self.git_dir) {
            Ok(now) => now,
            Err(e) => {
                return self.undo(format!(
                    "the repository's index and refs cannot be read after the run ({e})"
                ))
            }
        };
        if now == self.files {
            return Ok(());
        }
        match self.protected_changes(&now, scratch) {
            Ok(changed) if changed.is_empty() => Ok(()),
            Ok(changed) => {
                let names: Vec<String> = changed.iter().map(|p| format!("`{p}`")).collect();
                self.undo(format!(
                    "the run staged or committed a change to {} (protected paths: configuration other programs \
                     execute, which a later checkout, pull or push would put in place)",
                    names.join(", ")
                ))
            }
            Err(e) => self.undo(format!(
                "the run changed the repository's index or refs, and the sandbox could not check them ({e})"
            )),
        }
    }

    /// Writes the recorded index and refs back (removing what the run
    /// added), and the error to return.
    fn undo(&self, why: String) -> Result<(), String> {
        let restored = self.restore();
        let outcome = match restored {
            Ok(()) => "the sandbox restored the index and every ref to what they were before the call (the \
                       objects stay, unreferenced)"
                .to_owned(),
            Err(e) => format!("restoring the index and refs FAILED ({e}): inspect `git status` and `git reflog`"),
        };
        Err(format!(
            "{why}; {outcome}. A sandboxed command may not stage, commit or remove protected paths (rule: \
             SandboxPolicy::protected_paths, at any depth); make such a change yourself, outside the agent"
        ))
    }

    fn restore(&self) -> Result<(), String> {
        let now = read_state(&self.git_dir).unwrap_or_default();
        for rel in now.keys().filter(|k| !self.files.contains_key(*k)) {
            let path = self.git_dir.join(rel);
            std::fs::remove_file(&path).map_err(|e| format!("removing `{}`: {e}", path.display()))?;
        }
        for (rel, bytes) in &self.files {
            if now.get(rel) == Some(bytes) {
                continue;
            }
            let path = self.git_dir.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| format!("`{}`: {e}", parent.display()))?;
            }
            // a new file renamed over the name: whatever stands there (a
            // symlink the run left) is replaced, never followed
            let tmp = path.with_extension("tinyagents-restore");
            let _ = std::fs::remove_file(&tmp);
            std::fs::write(&tmp, bytes).map_err(|e| format!("writing `{}`: {e}", tmp.display()))?;
            std::fs::rename(&tmp, &path).map_err(|e| format!("restoring `{}`: {e}", path.display()))?;
        }
        Ok(())
    }

    /// The protected paths whose index entry or committed content the run
    /// changed, from the state `now`.
    fn protected_changes(&self, now: &BTreeMap<PathBuf, Vec<u8>>, scratch: &Path) -> Result<BTreeSet<String>, String> {
        let mut changed = BTreeSet::new();
        let index = Path::new("index");
        if self.files.get(index) != now.get(index) {
            let before = match self.files.get(index) {
                Some(bytes) => {
                    let copy = scratch.join("git-index-before");
                    std::fs::write(&copy, bytes).map_err(|e| format!("copying the index: {e}"))?;
                    self.protected_entries(Some(&copy))?
                }
                None => BTreeSet::new(),
            };
            let after = match now.get(index) {
                Some(_) => self.protected_entries(None)?,
                None => BTreeSet::new(),
            };
            changed.extend(before.symmetric_difference(&after).map(|(path, _)| path.clone()));
        }
        let (old_refs, new_refs) = (resolved_refs(&self.files)?, resolved_refs(now)?);
        let base = old_refs.get("HEAD").cloned();
        for (name, new) in &new_refs {
            let old = old_refs.get(name).or(base.as_ref());
            if old == Some(new) {
                continue;
            }
            for path in self.changed_paths(old.map(String::as_str), new)? {
                if self.protected(&path) {
                    changed.insert(path);
                }
            }
        }
        Ok(changed)
    }

    /// `git` with the safe mode's overrides, no system or global config, the
    /// repository named, run outside the sandbox (after it).
    fn git(&self) -> Command {
        let mut cmd = Command::new("git");
        cmd.env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", "/nonexistent")
            .current_dir(&self.root);
        if let Some((_, switches)) = SAFE_MODES.iter().find(|(p, _)| *p == "git") {
            cmd.args(*switches);
        }
        cmd.arg("--no-optional-locks")
            .arg(format!("--git-dir={}", self.git_dir.display()))
            .arg(format!("--work-tree={}", self.root.display()));
        cmd
    }

    fn output(mut cmd: Command) -> Result<Vec<u8>, String> {
        let out = cmd.output().map_err(|e| format!("git cannot run: {e}"))?;
        if !out.status.success() {
            return Err(format!("git failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(out.stdout)
    }

    /// The protected entries of an index (`index`: a copy of the old one;
    /// `None`: the repository's own): `(path, "mode object stage")`.
    fn protected_entries(&self, index: Option<&Path>) -> Result<BTreeSet<(String, String)>, String> {
        let mut cmd = self.git();
        if let Some(index) = index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        cmd.args(["ls-files", "--stage", "-z"]);
        let out = Self::output(cmd)?;
        let mut entries = BTreeSet::new();
        for record in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let record = String::from_utf8_lossy(record);
            let Some((meta, path)) = record.split_once('\t') else {
                return Err(format!("an index entry that is not understood: {record}"));
            };
            if self.protected(path) {
                entries.insert((path.to_owned(), meta.to_owned()));
            }
        }
        Ok(entries)
    }

    /// The paths that differ between the trees of two commits (`old`:
    /// `None` compares with the empty tree).
    fn changed_paths(&self, old: Option<&str>, new: &str) -> Result<Vec<String>, String> {
        let mut cmd = self.git();
        cmd.args([
            "diff-tree",
            "-r",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            "--no-commit-id",
            "--name-only",
            "-z",
        ]);
        match old {
            Some(old) => cmd.args([old, new]),
            None => cmd.arg("--root").arg(new),
        };
        let out = Self::output(cmd)?;
        Ok(out
            .split(|b| *b == 0)
            .filter(|r| !r.is_empty())
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect())
    }
}

fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `index`, `HEAD`, `packed-refs`, and every file under `refs/` (a
/// `reftable` directory too: its change cannot be read, so it fails the
/// check), never following symlinks.
fn read_state(git_dir: &Path) -> Result<BTreeMap<PathBuf, Vec<u8>>, String> {
    let mut files = BTreeMap::new();
    for name in ["index", "HEAD", "packed-refs"] {
        let path = git_dir.join(name);
        match path.symlink_metadata() {
            Ok(m) if m.is_file() => {
                let bytes = std::fs::read(&path).map_err(|e| format!("`{}`: {e}", path.display()))?;
                files.insert(PathBuf::from(name), bytes);
            }
            Ok(_) => return Err(format!("`{}` is not a regular file", path.display())),
            Err(_) => {}
        }
    }
    let mut stack = vec![PathBuf::from("refs"), PathBuf::from("reftable")];
    while let Some(rel) = stack.pop() {
        let dir = git_dir.join(&rel);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let entry = entry.map_err(|e| format!("`{}`: {e}", dir.display()))?;
            let ft = entry.file_type().map_err(|e| format!("`{}`: {e}", dir.display()))?;
            let child = rel.join(entry.file_name());
            if ft.is_dir() {
                stack.push(child);
            } else if ft.is_file() {
                let path = git_dir.join(&child);
                let bytes = std::fs::read(&path).map_err(|e| format!("`{}`: {e}", path.display()))?;
                files.insert(child, bytes);
                if files.len() > MAX_REF_FILES {
                    return Err(format!("more than {MAX_REF_FILES} files under `refs/`"));
                }
            } else {
                return Err(format!("`{}` is not a regular file", git_dir.join(&child).display()));
            }
        }
    }
    Ok(files)
}

/// Every ref of a recorded state and the object it names (symbolic refs
/// followed), from the loose files and `packed-refs`. A state that cannot
/// be read this way (a `reftable`) is an error.
fn resolved_refs(files: &BTreeMap<PathBuf, Vec<u8>>) -> Result<BTreeMap<String, String>, String> {
    let mut direct: BTreeMap<String, String> = BTreeMap::new();
    if files.keys().any(|k| k.starts_with("reftable")) {
        return Err("the repository keeps its refs in a reftable, which the sandbox cannot read".to_owned());
    }
    if let Some(packed) = files.get(Path::new("packed-refs")) {
        for line in String::from_utf8_lossy(packed).lines() {
            if line.starts_with('#') || line.starts_with('^') {
                continue;
            }
            if let Some((id, name)) = line.split_once(' ') {
                direct.insert(name.to_owned(), id.to_owned());
            }
        }
    }
    for (rel, bytes) in files {
        if rel.as_os_str() == "index" || rel.as_os_str() == "packed-refs" {
            continue;
        }
        let name = rel.to_string_lossy().into_owned();
        let text = String::from_utf8_lossy(bytes);
        direct.insert(name, text.lines().next().unwrap_or("").trim().to_owned());
    }
    let mut out = BTreeMap::new();
    for name in direct.keys() {
        let mut value = direct[name].clone();
        for _ in 0..10 {
            match value.strip_prefix("ref:") {
                Some(target) => match direct.get(target.trim()) {
                    Some(next) => value = next.clone(),
                    None => {
                        value = String::new();
                        break;
                    }
                },
                None => break,
            }
        }
        if is_object_id(&value) {
            out.insert(name.clone(), value);
        } else if !value.is_empty() {
            return Err(format!("the ref `{name}` is not understood"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_resolve_through_symbolic_refs_and_packed_refs() {
        let id = "a".repeat(40);
        let other = "b".repeat(40);
        let files: BTreeMap<PathBuf, Vec<u8>> = [
            (PathBuf::from("HEAD"), b"ref: refs/heads/main\n".to_vec()),
            (
                PathBuf::from("packed-refs"),
                format!("# pack-refs\n{id} refs/heads/main\n^{other}\n").into_bytes(),
            ),
            (PathBuf::from("refs/heads/x"), format!("{other}\n").into_bytes()),
        ]
        .into_iter()
        .collect();
        let refs = resolved_refs(&files).unwrap();
        assert_eq!(refs["HEAD"], id);
        assert_eq!(refs["refs/heads/main"], id);
        assert_eq!(refs["refs/heads/x"], other);
    }

    #[test]
    fn protected_patterns_match_components_at_any_depth() {
        let state = GitState {
            root: PathBuf::new(),
            git_dir: PathBuf::new(),
            patterns: [".github", ".mvn/jvm.config"]
                .iter()
                .filter_map(|p| pattern_parts(p))
                .collect(),
            files: BTreeMap::new(),
        };
        assert!(state.protected(".github/workflows/ci.yml"));
        assert!(state.protected("vendor/x/.GitHub/workflows/ci.yml"));
        assert!(state.protected("sub/.mvn/jvm.config"));
        assert!(!state.protected("sub/.mvn/other"));
        assert!(!state.protected("docs/github.md"));
    }
}

//! Batch scheduling: which calls of one tool batch may run concurrently.
//!
//! Calls that touch a common file, one of them writing it, share a group and
//! run one after another in the model's order; groups are independent and
//! run concurrently. A read of a directory touches every file under it; a
//! read declared as a glob pattern ([`FileAccess::matching`], what `glob`
//! and `search_text` declare for their filter) touches only the files the
//! pattern matches, so a search of `*.md` runs alongside an edit of `src/a.rs`.

use crate::harness::tool::{FileAccess, FileAccessMode, ToolCall, ToolRegistry};

/// The files a call declares it touches, from its effective arguments (none
/// for an unknown tool). A `file_access` that panics declares nothing here;
/// the call itself then runs (and fails) like any other.
pub(super) fn declared_access(tools: &ToolRegistry, call: &ToolCall) -> Vec<FileAccess> {
    let Some(tool) = tools.get(&call.name) else {
        return Vec::new();
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.file_access(&call.arguments))).unwrap_or_default()
}

/// Groups the calls of a batch (given by their declared file access) so that
/// calls touching a common file, one of them writing it, share a group (in
/// the model's order); groups are independent.
pub(super) fn conflict_groups(access: &[Vec<FileAccess>]) -> Vec<Vec<usize>> {
    let n = access.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for i in 0..n {
        for j in (i + 1)..n {
            let conflict = access[i].iter().any(|a| {
                access[j].iter().any(|b| {
                    (a.mode == FileAccessMode::Write || b.mode == FileAccessMode::Write) && overlap(&a.path, &b.path)
                })
            });
            if conflict {
                let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                parent[ri.max(rj)] = ri.min(rj);
            }
        }
    }
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index_of_root = vec![usize::MAX; n];
    for i in 0..n {
        let r = root(&mut parent, i);
        if index_of_root[r] == usize::MAX {
            index_of_root[r] = groups.len();
            groups.push(Vec::new());
        }
        groups[index_of_root[r]].push(i);
    }
    groups
}

/// A declared path's components, lexically normalised (`./a//b` and
/// `src/../a/b` are `a/b`).
fn normal(path: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts
}

/// Whether two declared paths name the same file, lexically: `./a.rs`,
/// `a.rs` and `src/../a.rs` are one file (symlinks are the guard's business).
#[cfg(test)]
fn same_file(a: &str, b: &str) -> bool {
    a == b || (a.starts_with('/') == b.starts_with('/') && normal(a) == normal(b))
}

/// Whether two declared accesses may touch a common file: the same file, a
/// file and a directory holding it, or a file and a glob pattern it matches
/// (a pattern is compared with its directory part normalised; two patterns,
/// or a pattern that does not parse, overlap whatever they share a root with:
/// unsure is ordered).
fn overlap(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if a.starts_with('/') != b.starts_with('/') {
        // an absolute and a relative path are not compared lexically
        return false;
    }
    let (na, nb) = (normal(a), normal(b));
    match (FileAccess::is_pattern(a), FileAccess::is_pattern(b)) {
        (false, false) => na.starts_with(&nb) || nb.starts_with(&na),
        (true, false) => matches(&na, &nb),
        (false, true) => matches(&nb, &na),
        (true, true) => true,
    }
}

/// Whether the plain path `file` (or a file under it, when it is a
/// directory) may be matched by `pattern`.
fn matches(pattern: &[&str], file: &[&str]) -> bool {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: false,
    };
    // the pattern's literal directory part: a file outside it is never matched
    let literal = pattern.iter().take_while(|p| !FileAccess::is_pattern(p)).count();
    if !(file.starts_with(&pattern[..literal]) || pattern[..literal].starts_with(file)) {
        return false;
    }
    if pattern[..literal].starts_with(file) {
        // `file` is a directory above (or at) the pattern's root: it holds what the pattern matches
        return true;
    }
    match glob::Pattern::new(&pattern.join("/")) {
        Ok(p) => p.matches_with(&file.join("/"), options),
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> FileAccess {
        FileAccess {
            path: path.to_owned(),
            mode: FileAccessMode::Read,
        }
    }

    fn write(path: &str) -> FileAccess {
        FileAccess {
            path: path.to_owned(),
            mode: FileAccessMode::Write,
        }
    }

    #[test]
    fn lexically_equal_paths_are_one_file() {
        assert!(same_file("a.rs", "./a.rs"));
        assert!(same_file("src/../a.rs", "a.rs"));
        assert!(same_file("src\\lib.rs", "src/lib.rs"));
        assert!(
            !same_file("/a.rs", "a.rs"),
            "an absolute and a relative path are not compared lexically"
        );
        assert!(!same_file("../a.rs", "a.rs"));
    }

    #[test]
    fn a_write_groups_every_call_touching_its_file_and_reads_stay_apart() {
        let access = vec![
            vec![read("a.rs")],
            vec![read("./a.rs")],
            vec![write("b.rs")],
            vec![read("b.rs"), read("c.rs")],
            vec![],
            vec![write("c.rs")],
        ];
        assert_eq!(conflict_groups(&access), vec![vec![0], vec![1], vec![2, 3, 5], vec![4]]);
    }

    #[test]
    fn a_read_of_a_directory_waits_for_writes_under_it() {
        let access = vec![
            vec![write("src/a.rs")],
            vec![read("./src")],
            vec![read("docs")],
            vec![read("src/b.rs")],
        ];
        assert_eq!(conflict_groups(&access), vec![vec![0, 1], vec![2], vec![3]]);
        assert!(overlap(".", "src/a.rs"), "the workspace root holds every relative file");
        assert!(
            !overlap("src", "srcs/a.rs"),
            "a directory holds its components, not a prefix of a name"
        );
    }

    #[test]
    fn a_filtered_read_waits_only_for_writes_its_filter_could_see() {
        let md = FileAccess::matching(".", "*.md");
        let rs_in_src = FileAccess::matching("src", "**/*.rs");
        let access = vec![
            vec![write("src/a.rs")],
            vec![md.clone()],
            vec![write("docs/guide.md")],
            vec![rs_in_src.clone()],
            vec![write("README.md")],
        ];
        // the `*.md` search runs after both Markdown writes, alongside the edit of src/a.rs;
        // the `src/**/*.rs` glob waits for src/a.rs only
        assert_eq!(conflict_groups(&access), vec![vec![0, 3], vec![1, 2, 4]]);
        assert!(overlap(&md.path, "README.md"), "a name filter matches at the root too");
        assert!(
            !overlap(&rs_in_src.path, "tests/a.rs"),
            "outside the filter's directory"
        );
        assert!(
            overlap(&rs_in_src.path, "src"),
            "deleting the directory the filter reads"
        );
        assert!(overlap("src/*.rs", "src/[bad"), "two patterns: unsure is ordered");
    }
}

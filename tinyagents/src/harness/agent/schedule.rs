//! Batch scheduling: which calls of one tool batch may run concurrently.
//!
//! Calls that touch a common file, one of them writing it, share a group and
//! run one after another in the model's order; groups are independent and
//! run concurrently.

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
                    (a.mode == FileAccessMode::Write || b.mode == FileAccessMode::Write) && same_file(&a.path, &b.path)
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

/// Whether two declared paths name the same file, lexically: `./a.rs`,
/// `a.rs` and `src/../a.rs` are one file (symlinks are the guard's business).
fn same_file(a: &str, b: &str) -> bool {
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
    a == b || (a.starts_with('/') == b.starts_with('/') && normal(a) == normal(b))
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
}

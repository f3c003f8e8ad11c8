//! A pids cgroup of its own for one command: the process limit that holds
//! for root (where `RLIMIT_NPROC` is not enforced), and a list of every
//! process of the tree to kill. cgroup v2 (where this process may create a
//! child with the pids controller) or the v1 pids hierarchy.

use std::fs::{self, OpenOptions};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys;

static COUNTER: AtomicU64 = AtomicU64::new(0);

pub(crate) struct Cgroup {
    dir: PathBuf,
    /// `cgroup.procs`, opened for writing in the parent; the child writes "0" (itself).
    pub(crate) procs: OwnedFd,
}

impl Cgroup {
    /// A new cgroup with `pids.max = max`, or why none can be made.
    pub(crate) fn create(max: u64) -> Result<Self, String> {
        let mounts = fs::read_to_string("/proc/self/mountinfo").map_err(|e| format!("/proc/self/mountinfo: {e}"))?;
        let own = fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let mut tried = Vec::new();
        for parent in candidates(&mounts, &own) {
            match Self::create_in(&parent, max) {
                Ok(c) => return Ok(c),
                Err(e) => tried.push(format!("{}: {e}", parent.display())),
            }
        }
        if tried.is_empty() {
            Err("no cgroup v2 mount and no v1 pids hierarchy in /proc/self/mountinfo".to_owned())
        } else {
            Err(tried.join("; "))
        }
    }

    fn create_in(parent: &Path, max: u64) -> Result<Self, String> {
        if parent.join("cgroup.subtree_control").exists() {
            // v2: the pids controller must be enabled for children.
            let control = fs::read_to_string(parent.join("cgroup.subtree_control")).map_err(|e| e.to_string())?;
            if !control.split_whitespace().any(|c| c == "pids") {
                fs::write(parent.join("cgroup.subtree_control"), "+pids")
                    .map_err(|e| format!("cannot enable the pids controller: {e}"))?;
            }
        }
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = parent.join(format!("tinyagents-sandbox-{}-{n}", std::process::id()));
        fs::create_dir(&dir).map_err(|e| format!("cannot create a cgroup: {e}"))?;
        let made = (|| {
            fs::write(dir.join("pids.max"), max.to_string()).map_err(|e| format!("cannot write pids.max: {e}"))?;
            let procs = OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.procs"))
                .map_err(|e| format!("cannot open cgroup.procs: {e}"))?;
            Ok::<_, String>(OwnedFd::from(procs))
        })();
        match made {
            Ok(procs) => Ok(Self { dir, procs }),
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// Kills every process in the cgroup; `true` when it is empty.
    pub(crate) fn kill_all(&self) -> bool {
        let Ok(list) = fs::read_to_string(self.dir.join("cgroup.procs")) else {
            return true;
        };
        let mut any = false;
        for pid in list.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
            any = true;
            sys::kill_pid(pid);
        }
        !any
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Every process is killed first; SIGKILL is fast, so a few rounds do.
        for _ in 0..5000 {
            if self.kill_all() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let _ = fs::remove_dir(&self.dir);
    }
}

/// The cgroup directories this process could create a child in: its own
/// cgroup on the v2 mount, then its own cgroup in the v1 pids hierarchy.
fn candidates(mountinfo: &str, own: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        if left.len() < 5 || right.len() < 3 {
            continue;
        }
        let (root, mountpoint, fstype, options) = (left[3], left[4], right[0], right[2]);
        let path = match fstype {
            "cgroup2" => own.lines().find_map(|l| l.strip_prefix("0::")),
            "cgroup" if options.split(',').any(|o| o == "pids") => own.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers.split(',').any(|c| c == "pids").then_some(path)
            }),
            _ => None,
        };
        let Some(path) = path else { continue };
        let relative = path.strip_prefix(root).unwrap_or(path).trim_start_matches('/');
        let dir = Path::new(mountpoint).join(relative);
        if fstype == "cgroup2" {
            out.insert(0, dir);
        } else {
            out.push(dir);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_v1_pids_and_v2_own_cgroup() {
        let mounts = "30 25 0:26 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
                      31 25 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n\
                      32 25 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let own = "8:pids:/a/b\n4:memory:/m\n0::/user.slice\n";
        let c = candidates(mounts, own);
        assert_eq!(
            c,
            vec![
                PathBuf::from("/sys/fs/cgroup/unified/user.slice"),
                PathBuf::from("/sys/fs/cgroup/pids/a/b"),
            ]
        );
    }
}

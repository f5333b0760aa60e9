//! Shared test helpers: locating the captured /proc+/sys trees in ../shared (or
//! `$OPTGATE_SHARED`), unpacking one into a temporary directory with `tar`, and saying
//! plainly when they are absent so the test is skipped rather than failed.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The shared folder: `$OPTGATE_SHARED`, else `shared/` beside the repository.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("OPTGATE_SHARED") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared")),
    }
}

/// A captured tree unpacked into a temporary directory; removed on drop.
pub struct Fixture {
    _dir: tempfile::TempDir,
    /// The tree's root (holding `proc/` and `sys/`).
    pub root: PathBuf,
}

/// Unpacks `fixtures/hwloc-topologies/NAME.tar.bz2` from the shared folder, or returns
/// `None` (after saying so on stderr) when the shared folder is absent.
pub fn fixture(name: &str) -> Option<Fixture> {
    let tarball = shared_dir()
        .join("fixtures/hwloc-topologies")
        .join(format!("{name}.tar.bz2"));
    if !tarball.is_file() {
        skipped(&format!(
            "fixture {} is absent (set OPTGATE_SHARED to the shared folder)",
            tarball.display()
        ));
        return None;
    }
    // Thousands of small files: on tmpfs they unpack in a tenth of a second, on the
    // VM's disk in seconds.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() && nix::unistd::access(shm, nix::unistd::AccessFlags::W_OK).is_ok() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    let status = Command::new("tar")
        .arg("-xjf")
        .arg(&tarball)
        .arg("-C")
        .arg(dir.path())
        // Ownership of the capturing machine means nothing here, and a root test run
        // would otherwise recreate it.
        .arg("--no-same-owner")
        .status()
        .expect("run tar");
    assert!(status.success(), "tar failed on {}", tarball.display());
    let root = dir.path().join(name);
    assert!(
        root.join("proc/cpuinfo").is_file(),
        "{} has no proc/cpuinfo",
        root.display()
    );
    Some(Fixture { _dir: dir, root })
}

/// Says that a test is skipped, on the real stderr: the test harness captures
/// `eprintln!` of passing tests, and a skip must be seen.
pub fn skipped(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// Writes `text` to `path`, creating parent directories.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

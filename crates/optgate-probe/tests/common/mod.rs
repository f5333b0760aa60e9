//! Shared test helpers: locating the captured /proc+/sys trees kept in the repository
//! (`tests/fixtures/hwloc-topologies`, see `tests/fixtures/README.md`), unpacking one
//! into a temporary directory with `tar`, and failing loudly when one is missing: a
//! missing fixture is a broken checkout, never a skipped test.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's fixture folder, `tests/fixtures` at the workspace root.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// A captured tree unpacked into a temporary directory; removed on drop.
pub struct Fixture {
    _dir: tempfile::TempDir,
    /// The tree's root (holding `proc/` and `sys/`).
    pub root: PathBuf,
}

/// Unpacks `tests/fixtures/hwloc-topologies/NAME.tar.bz2`; panics, naming the path,
/// when it is missing.
pub fn fixture(name: &str) -> Fixture {
    let tarball = fixtures_dir()
        .join("hwloc-topologies")
        .join(format!("{name}.tar.bz2"));
    assert!(
        tarball.is_file(),
        "fixture {} is missing: it is part of the repository (tests/fixtures/README.md)",
        tarball.display()
    );
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
    Fixture { _dir: dir, root }
}

/// Says that a test is skipped, on the real stderr: the test harness captures
/// `eprintln!` of passing tests, and a skip must be seen.
pub fn skipped(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// Something outside the repository that a test needs is missing. Fails the test with
/// `why` (one line naming what provides it) unless `$skip_var` is `1`, which says its
/// absence is deliberate: then the skip is said on the real stderr and the caller
/// returns.
pub fn missing_external(why: &str, skip_var: &str) {
    if std::env::var(skip_var).is_ok_and(|v| v == "1") {
        skipped(&format!("{why} ({skip_var}=1)"));
    } else {
        panic!("{why}; {skip_var}=1 skips this test on purpose");
    }
}

/// Writes `text` to `path`, creating parent directories.
pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

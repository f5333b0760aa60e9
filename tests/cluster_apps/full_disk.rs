//! A full file system, everywhere optgate writes: `plan` removes what it half-wrote,
//! `optgate run --out` gives up after a bounded wait naming the lack of space, a run hit
//! by ENOSPC is recorded as such, and the daemon pauses an experiment whose state
//! directory or workdir is full, resuming it when space returns.
//!
//! Each test mounts its own small tmpfs on a private temporary directory (tests run as
//! root, here and in CI) and unmounts it when it ends, passed or not. A machine where the
//! mount is impossible fails the test saying so: it is never skipped.

use crate::support;

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

/// An experiment whose third run (b002-baseline, the first of block 2), once its output is
/// written, fills the file system `fs` once (the flag file `flag`, outside it, says it
/// has): its wrapper cannot write its manifest, and nothing else can be written there.
fn filling_experiment(name: &str, fs: &SmallFs, root: &Path, flag: &Path) -> String {
    let filler = fs.path().join("filler");
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done; if [ "$OPTGATE_RUN_ID" = b002-baseline ] && [ ! -e {flag} ]; then touch {flag}; head -c 100000000 /dev/zero > {filler} 2>/dev/null; fi; true']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
workdir: {root}
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#,
        flag = flag.display(),
        filler = filler.display(),
        root = root.display(),
    )
}

/// `optgate run --out` on a file system that fills up gives up after its bounded wait
/// (`OPTGATE_NO_SPACE_GIVE_UP`, 3 s here) with exit 3 and the reason naming the lack of
/// space, instead of retrying for ever; the run hit by ENOSPC leaves its mark; once space
/// is back, `--out` resumes and finishes every run. Catches an engine that keeps failing
/// its passes with no end (the command would never exit: the test's wait gives up), a
/// reason without the free bytes, and a run hit by ENOSPC counted failed (the resume
/// would exit 3 with failed runs).
#[test]
fn run_on_a_full_file_system_gives_up_naming_the_lack_of_space_and_resumes() {
    let fs = SmallFs::mount(2 * 1024 * 1024);
    let dir = tempfile::tempdir().unwrap();
    let root = fs.path().join("exec");
    let yaml = filling_experiment("fills", &fs, fs.path(), &dir.path().join("filled"));
    let p = write_experiment(dir.path(), &yaml);
    let args = [
        "run",
        p.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--quiet",
    ];
    let o = optgate()
        .args(args)
        .env("OPTGATE_NO_SPACE_GIVE_UP", "3s")
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains(
            "gave up after waiting 3s for space (OPTGATE_NO_SPACE_GIVE_UP): no space \
                      left on the state directory's file system: "
        ),
        "{err}"
    );
    assert!(err.contains(" bytes free ("), "{err}");
    assert!(!err.contains("engine pass failed"), "{err}");
    // The job was left to end by itself: the run that filled the disk could not write
    // its manifest and says why.
    let mark = root.join("runs/b002-baseline/manifest.enospc");
    wait_for(
        "the ENOSPC mark of b002-baseline",
        std::time::Duration::from_secs(60),
        || mark.exists().then_some(()),
    );
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    let o = optgate().args(args).arg("--json").output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("resuming: 2 of 10 runs already done"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("run(s) failed"), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report.is_object(), "{report}");
}

/// `optgate status ID --json` of `home`'s daemon, once `pick` finds what it waits for.
fn wait_status(
    home: &Path,
    id: &str,
    what: &str,
    pick: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for(what, std::time::Duration::from_secs(120), || {
            last = status(home, id);
            pick(&last).then(|| last.clone())
        })
    }));
    found.unwrap_or_else(|_| panic!("gave up waiting for {what}; the last status: {last:#}"))
}

/// Submits the filling experiment to the daemon of `home`, waits until `fs` is full and
/// `status` shows the experiment paused with `reason`, frees the space and waits until the
/// experiment ends: decided, with every run completed. Returns the paused status.
fn paused_then_finished(
    home: &Path,
    fs: &SmallFs,
    workdir: &Path,
    reason: &str,
) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let yaml = filling_experiment("paused", fs, workdir, &dir.path().join("filled"));
    submitted_paused_then_finished(home, fs, &dir, &yaml, reason)
}

/// [`paused_then_finished`] for the experiment `yaml`, written into `dir`.
fn submitted_paused_then_finished(
    home: &Path,
    fs: &SmallFs,
    dir: &tempfile::TempDir,
    yaml: &str,
    reason: &str,
) -> serde_json::Value {
    let exp = write_experiment(dir.path(), yaml);
    let _stop = StopOnDrop(home.to_path_buf());
    let o = cli(home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let paused = wait_status(home, &id, "the no-space reason", |s| {
        s["reason"].as_str().is_some_and(|r| r.contains(reason))
    });
    assert!(
        !paused["state"]
            .as_str()
            .is_some_and(|s| ["failed", "decided"].contains(&s)),
        "{paused:#}"
    );
    std::fs::remove_file(fs.path().join("filler")).unwrap();
    let ended = wait_status(home, &id, "the end", |s| {
        ["decided", "budget_exhausted", "failed"].contains(&s["state"].as_str().unwrap_or(""))
    });
    assert_eq!(ended["state"], "decided", "{ended:#}");
    assert_eq!(ended["runs"]["failed"], 0, "{ended:#}");
    assert!(
        !ended["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no space")),
        "{ended:#}"
    );
    paused
}

/// The daemon's state directory fills up while an experiment runs: the experiment is
/// paused, not failed, `status` says why (with the free bytes) though the database cannot
/// be written, and once space is back it finishes with no run lost. Catches the stall with
/// no reason (status would never show it: the wait gives up), a pause that never ends,
/// and a run hit by ENOSPC counted failed.
#[test]
fn a_full_state_directory_pauses_the_experiment_until_space_returns() {
    let fs = SmallFs::mount(8 * 1024 * 1024);
    let home = fs.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let work = tempfile::tempdir().unwrap();
    let paused = paused_then_finished(
        &home,
        &fs,
        work.path(),
        "no space left on the state directory's file system: ",
    );
    let reason = paused["reason"].as_str().unwrap();
    assert!(
        reason.contains(" bytes free (") && reason.ends_with("paused until space returns"),
        "{reason}"
    );
}

/// The experiment's workdir fills up: the run hit by ENOSPC runs again and the experiment
/// waits — paused, the reason naming the workdir — instead of failing at once, and
/// finishes once space is back. Catches the run files' write error failing the
/// experiment (the old `Rejected` class) and the run recorded lost instead of hit by ENOSPC.
#[test]
fn a_full_workdir_pauses_the_experiment_until_space_returns() {
    let fs = SmallFs::mount(8 * 1024 * 1024);
    // A short private state directory (the socket's path has a length limit).
    let state = tempfile::tempdir().unwrap();
    let home = state.path().join("home");
    std::fs::create_dir(&home).unwrap();
    paused_then_finished(
        &home,
        &fs,
        fs.path(),
        "no space left on the workdir's file system: ",
    );
}

/// `optgate run --out` onto a file system already full: exit 3 at once (the engine's
/// database cannot even be made, so there is nothing to wait on) with the reason naming
/// the lack of space and the free bytes. Catches SQLite's "database or disk is full"
/// passed through as the reason (no place, no free bytes).
#[test]
fn run_onto_a_full_file_system_exits_3_naming_the_lack_of_space() {
    let fs = SmallFs::mount(256 * 1024);
    let o = Command::new("dd")
        .args(["if=/dev/zero", "bs=4096", "count=1000"])
        .arg(format!("of={}", fs.path().join("filler").display()))
        .output()
        .unwrap();
    assert!(!o.status.success(), "the file system did not fill up");
    let dir = tempfile::tempdir().unwrap();
    let p = write_experiment(dir.path(), &fake_app_experiment("onfull", ""));
    let root = fs.path().join("exec");
    let o = run(&[
        "run",
        p.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--quiet",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("optgate: error: no space left on the state directory's file system: "),
        "{err}"
    );
    assert!(err.contains(" bytes free ("), "{err}");
}

/// A build that fills the workdir: the build's record cannot be written, and the
/// experiment stays `building` with the reason instead of failing; once space is back the
/// build runs again and the experiment finishes. Catches the build's I/O error failing the
/// experiment at once.
#[test]
fn a_build_on_a_full_workdir_waits_for_space() {
    let fs = SmallFs::mount(8 * 1024 * 1024);
    let state = tempfile::tempdir().unwrap();
    let home = state.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("filled");
    let filler = fs.path().join("filler");
    let yaml = format!(
        "{}build:\n  command: 'if [ ! -e {flag} ]; then touch {flag}; head -c 100000000 /dev/zero > {filler} 2>/dev/null; fi; true'\n",
        fake_app_experiment("building", &format!("workdir: {}\n", fs.path().display())),
        flag = flag.display(),
        filler = filler.display(),
    );
    let paused = submitted_paused_then_finished(
        &home,
        &fs,
        &dir,
        &yaml,
        "no space left on the workdir's file system: ",
    );
    assert_eq!(paused["state"], "building", "{paused:#}");
}

//! Helpers shared by the end-to-end tests: the real `optgate` binary, the repository root,
//! and experiment files written into temporary directories.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The real binary, with a private state directory for the calling test (see
/// [`private_home`]); a test that runs a daemon sets its own `OPTGATE_HOME` after this.
pub fn optgate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_optgate"));
    c.env_remove("OPTGATE_LOG")
        .env_remove("RUST_LOG")
        .env("OPTGATE_HOME", private_home());
    c
}

/// A state directory of the calling test alone, named after it, under Cargo's scratch
/// directory for integration tests: a test never takes the real user's
/// `~/.local/state/optgate` (its machine-wide lock, its daemon) nor another test's.
pub fn private_home() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let test = std::thread::current()
        .name()
        .unwrap_or("main")
        .replace("::", "-");
    let exe = std::env::current_exe().unwrap();
    let binary = exe.file_stem().unwrap().to_string_lossy().into_owned();
    let home = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("optgate-home")
        .join(format!("{binary}-{test}"));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&home)
        .unwrap();
    home
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn run(args: &[&str]) -> Output {
    optgate().args(args).output().expect("optgate starts")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `yaml` as `exp.yaml` in `dir` and returns its path.
pub fn write_experiment(dir: &Path, yaml: &str) -> PathBuf {
    let p = dir.join("exp.yaml");
    std::fs::write(&p, yaml).unwrap();
    p
}

/// A tiny app in bash that prints `epochs` epoch lines; extra shell code runs first.
pub fn fake_app_experiment(name: &str, extra: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
{extra}"#
    )
}

/// Writes `yaml` as `dir/exp.yaml` and runs `optgate run` on it into `dir/exec` (quietly),
/// with `extra` arguments; returns what the binary printed and the execution's root.
pub fn run_experiment(dir: &Path, yaml: &str, extra: &[&str]) -> (Output, PathBuf) {
    let p = write_experiment(dir, yaml);
    let root = dir.join("exec");
    let mut args = vec![
        "run",
        p.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    (run(&args), root)
}

/// `optgate ARGS` against the daemon of state directory `home`.
pub fn cli(home: &Path, args: &[&str]) -> Output {
    optgate()
        .args(args)
        .env("OPTGATE_HOME", home)
        .output()
        .unwrap()
}

/// Stops the background daemon of `home` when the test ends, passed or not.
pub struct StopOnDrop(pub PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = cli(&self.0, &["daemon", "stop"]);
    }
}

/// `optgate status ID --json` of the daemon of `home`: the experiment's object.
pub fn status(home: &Path, id: &str) -> serde_json::Value {
    let o = cli(home, &["status", id, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["experiments"][0].clone()
}

/// Signals the process group `pgid`, which this test started (a child spawned as its own
/// group leader, or one whose pid file the test's own run wrote).
///
/// The rule for every test: signal process groups only through this function, never by
/// running `kill` with a negative number — procps `kill -KILL -1234` may read the number
/// as options and become `kill(-1)`, which as root reaches every process on the machine.
/// `tests/no-stray-signals.sh` (run by `tests/run-all.sh`) fails on any such call.
pub fn signal_group_we_started(pgid: i32, signal: nix::sys::signal::Signal) {
    let _ = optgate_wrapper::signal::signal_group(nix::unistd::Pid::from_raw(pgid), signal);
}

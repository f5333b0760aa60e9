//! Helpers shared by the end-to-end tests: the real `optgate` binary, the repository root,
//! and experiment files written into temporary directories.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn optgate() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_optgate"));
    c.env_remove("OPTGATE_LOG").env_remove("RUST_LOG");
    c
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

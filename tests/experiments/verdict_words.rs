//! Verdict words through the real binary: a correctness value that is a word is
//! compared as a word, `correctness.expect` requires every run to print the verdict — a
//! variant printing `FAILED` is rejected as changing the computation, both printing
//! `PASSED` leaves the decision to the metric — and a baseline printing `FAILED` is an
//! error of the experiment (exit 3, `failed` through the daemon) naming its output line.

use crate::support;

use std::path::Path;

use serde_json::Value;
use support::*;

/// An experiment whose app prints three epochs (the variant `v1` faster: `X=1`) and then
/// `check $VERDICT` (default `PASSED`); `app_env` and `variant_env` are flow-mapping
/// bodies. The `correctness` key is on line 7.
fn experiment(name: &str, app_env: &str, variant_env: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'if [ "${{X:-0}}" = 1 ]; then b=$((700 + OPTGATE_BLOCK * 7)); else b=$((1000 + OPTGATE_BLOCK * 3)); fi; for e in 1 2 3; do echo "epoch $e took $((b + e * 11)).0 s"; done; echo "check ${{VERDICT:-PASSED}}"']
  env: {{ {app_env} }}
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
correctness:
  values: {{ pattern: 'check (?P<value>\w+)' }}
  expect: PASSED
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1", {variant_env} }}
"#
    )
}

const CORRECTNESS_LINE: usize = 7;

fn report_json(root: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(root.join("report.json")).unwrap()).unwrap()
}

/// The names of the run directories under `root`, sorted.
fn run_dirs(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Both arms print `PASSED`: the word is no longer "not a number", and the faster variant
/// is decided on its metric. Catches words parsed as numbers (the variant was rejected
/// with "`PASSED` is not a number") and the verdict check failing a run that passes.
#[test]
fn both_printing_passed_is_decided_on_the_metric() {
    let dir = tempfile::tempdir().unwrap();
    let (o, root) = run_experiment(dir.path(), &experiment("vw-pass", "", ""), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = report_json(&root);
    let v = &r["variants"][0];
    assert_eq!(v["decision"], "accept", "{v:#}");
    assert_eq!(
        r["provenance"]["correctness"]["v1"]["blocks_compared"], 5,
        "{r:#}"
    );
}

/// A variant printing `FAILED` is rejected as changing the computation, its run, output
/// line and the line's text quoted. Catches the variant's verdict unchecked.
#[test]
fn a_variant_printing_failed_is_rejected_as_changing_the_computation() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = experiment("vw-vfail", "", "VERDICT: FAILED");
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = report_json(&root);
    let v = &r["variants"][0];
    assert_eq!(v["decision"], "reject", "{v:#}");
    let reason = v["reason"].as_str().unwrap();
    assert!(reason.contains("changes the computation"), "{reason}");
    let line = format!(
        "block 1: run b001-v1 does not print the expected verdict: {}:4: `FAILED` where `PASSED` \
         is expected (the line: `check FAILED`)",
        root.join("runs/b001-v1/stdout").display()
    );
    assert!(reason.contains(&line), "{reason}\nwanted: {line}");
}

/// A baseline printing `FAILED` fails the experiment after its first block (exit 3),
/// naming the baseline's output line and the experiment file's `correctness` line; no
/// report judges the variant. Catches the baseline's verdict unchecked (the variant,
/// printing `PASSED`, was rejected as differing from it) and fail fast not applying it
/// (every block ran).
#[test]
fn a_baseline_printing_failed_fails_the_experiment_naming_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = experiment("vw-bfail", "VERDICT: FAILED", "VERDICT: PASSED");
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    let line = format!(
        "experiment `vw-bfail` failed: stopped after block 1: baseline run b001-baseline does \
         not print the expected verdict: {}:4: `FAILED` where `PASSED` is expected",
        root.join("runs/b001-baseline/stdout").display()
    );
    assert!(err.contains(&line), "{err}\nwanted: {line}");
    let exp = dir.path().join("exp.yaml").canonicalize().unwrap();
    assert!(
        err.contains(&format!("({}:{CORRECTNESS_LINE})", exp.display())),
        "{err}"
    );
    assert_eq!(run_dirs(&root), ["b001-baseline", "b001-v1"]);
}

/// Through the daemon the same baseline ends the experiment `failed`, with the reason in
/// `status`. Catches the daemon's engine taking another path than `optgate run`'s.
#[test]
fn through_the_daemon_a_baseline_printing_failed_ends_failed() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(
        dir.path(),
        &experiment("vw-daemon", "VERDICT: FAILED", "VERDICT: PASSED"),
    );
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let o = cli(&home, &["status", &id, "--watch"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = status(&home, &id);
    assert_eq!(s["state"], "failed", "{s:#}");
    let reason = s["reason"].as_str().unwrap();
    let root = Path::new(s["root"].as_str().unwrap());
    let line = format!(
        "stopped after block 1: baseline run b001-baseline does not print the expected \
         verdict: {}:4: `FAILED` where `PASSED` is expected",
        root.join("runs/b001-baseline/stdout").display()
    );
    assert!(reason.contains(&line), "{reason}\nwanted: {line}");
    assert!(
        reason.contains(&format!("exp.yaml:{CORRECTNESS_LINE})")),
        "{reason}"
    );
    assert_eq!(s["runs"]["completed"], 2, "{s:#}");
}

//! `experiments/hpcc-blas.yaml` on the real benchmark suite it names: Debian's HPC Challenge
//! (`hpcc`) with the reference BLAS against OpenBLAS. One run prints each figure of merit
//! once; HPL's Tflop/s is gated, STREAM and RandomAccess are guardrails, and HPL's residual
//! check must print PASSED. Needs `hpcc`, `libblas3` and `libopenblas0-pthread`
//! (tests/run-all.sh installs them); without them this test FAILS with that instruction.

use crate::support;

use std::path::Path;

use support::*;

const SETUP: &str = "run tests/run-all.sh (it installs hpcc, libblas3 and libopenblas0-pthread)";

fn require_hpcc() {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v hpcc"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(found, "`hpcc` is missing: {SETUP}");
    for lib in ["blas", "openblas-pthread"] {
        let p = Path::new("/usr/lib/x86_64-linux-gnu")
            .join(lib)
            .join("libblas.so.3");
        assert!(p.exists(), "{} is missing: {SETUP}", p.display());
    }
}

/// The shipped experiment with its workdir made absolute (it is copied out of the tree),
/// and `edit` applied to its text.
fn shipped_experiment(dir: &Path, edit: impl Fn(String) -> String) -> std::path::PathBuf {
    let text = std::fs::read_to_string(repo_root().join("experiments/hpcc-blas.yaml"))
        .unwrap()
        .replace(
            "workdir: ../examples/hpcc",
            &format!("workdir: {}", repo_root().join("examples/hpcc").display()),
        );
    assert!(!text.contains("workdir: .."));
    let path = dir.join("hpcc-blas.yaml");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

#[test]
fn openblas_is_accepted_on_hpl_with_its_guardrails_reported() {
    let _machine = support::measuring();
    require_hpcc();
    let out = tempfile::tempdir().unwrap();
    let exp = shipped_experiment(out.path(), |t| t);
    let root = out.path().join("exec");
    let o = run(&[
        "run",
        exp.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let v = &report["variants"][0];
    assert_eq!(v["name"], "openblas");
    // OpenBLAS's DGEMM is several times the reference loop's: HPL's Tflop/s rises, and a
    // figure of merit that is higher-is-better gives a positive App Impact.
    assert_eq!(v["decision"], "accept", "{v}");
    assert!(v["app_impact_pct"].as_f64().unwrap() > 100.0, "{v}");
    let names: Vec<&str> = v["guardrails"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dgemm", "stream_triad", "random_access", "ptrans"]);
    let limited: Vec<&serde_json::Value> = v["guardrails"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["max_regression_pct"].is_number())
        .collect();
    assert_eq!(limited.len(), 2, "{v}");
    // DGEMM is the BLAS kernel itself: its interval lies wholly above zero.
    let dgemm = &v["guardrails"][0];
    assert!(dgemm["impact_ci_low"].as_f64().unwrap() > 0.0, "{dgemm}");
    // Both arms' runs are in the samples: at least the first look's 5 blocks × 2 arms.
    let csv = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    assert!(csv.lines().count() > 10, "{csv}");
}

#[test]
fn a_baseline_whose_hpl_check_fails_is_an_error_of_the_experiment() {
    require_hpcc();
    let out = tempfile::tempdir().unwrap();
    // A residual threshold no solve meets: HPL prints `...... FAILED` in the baseline's runs.
    let exp = shipped_experiment(out.path(), |t| {
        t.replace(
            "env: { LD_LIBRARY_PATH: /usr/lib/x86_64-linux-gnu/blas }",
            "env: { LD_LIBRARY_PATH: /usr/lib/x86_64-linux-gnu/blas, HPCC_RESIDUAL_THRESHOLD: 1e-12 }",
        )
    });
    let root = out.path().join("exec");
    let o = run(&[
        "run",
        exp.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--quiet",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "stderr:\n{err}");
    assert!(err.contains("`FAILED` where `PASSED` is expected"), "{err}");
    assert!(err.contains("hpccoutf.txt:"), "{err}");
    // Stopped after the first block: no later block's runs were started.
    assert!(!root.join("runs/b002-baseline/manifest.json").exists());
}

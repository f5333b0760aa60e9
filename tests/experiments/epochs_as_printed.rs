//! Epochs as apps print them, end to end through the real binary: an OpenFOAM-shaped solver
//! log (`Time = 0.005` … `ExecutionTime = 1.23 s  ClockTime = 1 s`, a running clock) read
//! without a wrapper, matched by its printed labels; a run that prints other labels fails
//! with the first difference named.

use crate::support;

use support::*;

/// A tiny transient solver in Python shaped like OpenFOAM's log: 6 time steps of `DT`,
/// each sleeping `STEP_S` seconds (the "work"), then the running wall clock since start.
/// The run `LABELS_OFF_IN` (a run id) steps by 2·DT instead: other labels.
const SOLVER: &str = r#"
import os, time
dt, step = 0.005, float(os.environ["STEP_S"])
if os.environ.get("OPTGATE_RUN_ID") == os.environ.get("LABELS_OFF_IN"):
    dt = 0.01
start = time.perf_counter()
print("Starting time loop\n")
for i in range(1, 7):
    print(f"Courant Number mean: 0.0{i} max: 0.{i}")
    print(f"Time = {i * dt:g}\n")
    time.sleep(step)
    print("smoothSolver:  Solving for Ux, Initial residual = 1, Final residual = 1e-06, No Iterations 3")
    now = time.perf_counter() - start
    print(f"ExecutionTime = {now:.4f} s  ClockTime = {int(now)} s\n")
print("End")
"#;

fn experiment(dir: &std::path::Path, labels_off_in: &str) -> String {
    std::fs::write(dir.join("solver.py"), SOLVER).unwrap();
    let python = std::env::var("OPTGATE_PYTHON").unwrap_or_else(|_| "python3".into());
    format!(
        r#"name: foam-shaped
workdir: {dir}
app:
  command: ['{python}', '{solver}']
  env: {{ STEP_S: "0.1", LABELS_OFF_IN: "{labels_off_in}" }}
metric:
  # The simulated time as printed, and the running clock after that step.
  pattern: '(?m)^Time = (?P<epoch>[0-9.e-]+)$(?s:.*?)^ExecutionTime = (?P<seconds>[0-9.]+) s'
  cumulative: true
  better: lower
scheduler: {{ kind: local }}
design: blocked
replicates: 6
max_replicates: 6
seed: 3
compare: {{ steady_epochs: "2..", min_effect_pct: 2 }}
variants:
  - name: faster
    dimension: l2_threading_model
    env: {{ STEP_S: "0.07" }}
"#,
        dir = dir.display(),
        solver = dir.join("solver.py").display(),
    )
}

/// 30 % less time per step on the running clock is a 1/0.7 ≈ 1.43× speed-up, accepted;
/// the report shows the times as printed.
#[test]
fn an_openfoam_shaped_running_clock_is_a_per_epoch_metric() {
    let dir = tempfile::tempdir().unwrap();
    let (o, _root) = run_experiment(dir.path(), &experiment(dir.path(), "none"), &["--json"]);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        report["epoch_labels"],
        serde_json::json!(["0.005", "0.01", "0.015", "0.02", "0.025", "0.03"])
    );
    let v = &report["variants"][0];
    assert_eq!(v["decision"], "accept", "{v:#}");
    let s = v["speedup"]["estimate"].as_f64().unwrap();
    assert!(
        (1.30..1.56).contains(&s),
        "speed-up {s}, expected about 1/0.7 = 1.43"
    );
    // Each epoch is one step's time (about 0.1 s and 0.07 s), not the clock's value.
    for row in v["per_epoch"].as_array().unwrap() {
        let base = row["baseline_median_s"].as_f64().unwrap();
        assert!((0.09..0.2).contains(&base), "{row}");
    }
}

/// One run printing other simulated times fails, naming its output and the first
/// difference; the others are analysed without it.
#[test]
fn a_run_printing_other_labels_fails_with_the_first_difference() {
    let dir = tempfile::tempdir().unwrap();
    let (o, root) = run_experiment(
        dir.path(),
        &experiment(dir.path(), "b002-faster"),
        &["--json"],
    );
    let report: serde_json::Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: stdout {} stderr {}", stdout(&o), stderr(&o)));
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("runs/b002-faster/manifest.json")).unwrap(),
    )
    .unwrap();
    let all = format!("{}\n{}\n{report}\n{m}", stdout(&o), stderr(&o));
    assert!(
        all.contains(
            "runs/b002-faster/stdout: its epoch 1 is labelled 0.01 where the other runs print 0.005"
        ),
        "{all}"
    );
    assert_eq!(
        report["variants"][0]["n_variant"], 5,
        "{:#}",
        report["variants"][0]
    );
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));
}

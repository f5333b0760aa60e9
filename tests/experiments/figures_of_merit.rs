//! Figures of merit through the real binary: a benchmark that prints one figure of merit per run
//! (`rate 12.3 GB/s`, higher is better) is declared with a `value` group and decided — a
//! 20 % faster variant accepted, an identical one not — and a variant that improves the
//! primary metric by 20 % while a guardrail read from its results file regresses by 30 %
//! is rejected naming the guardrail.
//!
//! The app times a sleep whose length the arm sets and prints the rate of a fixed amount
//! of "work" over the measured time: the effects are real measurements with a margin far
//! above timing noise (20 % and 30 % against a worthwhile effect of 5 %).

use crate::support;

use std::path::Path;

use support::*;

/// The benchmark: the rate of the main kernel on stdout, the guardrail kernel's rate in
/// `results.txt` of the run's directory; `WORK_S` and `GUARD_S` are the kernels' times.
const APP: &str = r#"#!/bin/bash
set -eu
rate() { # NAME SECONDS: sleeps SECONDS, prints NAME's rate of 2 GB over the measured time
  local s e
  s=$(date +%s%N); sleep "$2"; e=$(date +%s%N)
  awk -v n="$1" -v ns=$((e - s)) 'BEGIN { printf "%s %.6f GB/s\n", n, 2.0 / (ns / 1e9) }'
}
echo "warm-up rate 1.0 GB/s"
rate rate "${WORK_S:-0.2}"
rate triad "${GUARD_S:-0.1}" > results.txt
echo done
"#;

fn write_app(dir: &Path) -> String {
    let p = dir.join("bench.sh");
    std::fs::write(&p, APP).unwrap();
    p.display().to_string()
}

fn report_json(root: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(root.join("report.json")).unwrap()).unwrap()
}

fn variant<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no variant {name} in {r}"))
}

/// A rate 20 % higher is accepted with App Impact ≈ +20 %, an identical arm is not; the
/// report says "one value per run" where the epoch parts would be and shows the unit.
/// Planted bugs caught: the value group refused by validation, the rate analysed as a
/// time (the faster variant rejected), the per-epoch table printed for a figure of merit
/// (App Impact's exact formula is held by the statistics crate's tests).
#[test]
fn a_figure_of_merit_decides_a_faster_variant_and_not_an_identical_one() {
    let dir = tempfile::tempdir().unwrap();
    let app = write_app(dir.path());
    let yaml = format!(
        "name: fom\napp:\n  command: [bash, '{app}']\n\
         metric:\n  pattern: '(?m)^rate (?P<value>[0-9.]+) GB/s'\n  better: higher\n  unit: GB/s\n\
         replicates: 6\ncompare: {{ min_effect_pct: 5 }}\n\
         variants:\n  - {{ name: fast, dimension: l2_threading_model, env: {{ WORK_S: \"0.166667\" }} }}\n  \
         - {{ name: same, dimension: l1_vectorization, env: {{ UNUSED: \"1\" }} }}\n"
    );
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = report_json(&root);
    assert_eq!(r["per_run"], true, "{r}");
    assert_eq!(r["unit"], "GB/s");
    let fast = variant(&r, "fast");
    assert_eq!(fast["decision"], "accept", "{fast}");
    let app = fast["app_impact_pct"].as_f64().unwrap();
    assert!((app - 20.0).abs() < 5.0, "App Impact {app}");
    assert!(fast["per_epoch"].as_array().unwrap().is_empty());
    assert!(fast["breakeven_epoch"].is_null() && fast["first_epoch"]["change_pct"].is_null());
    let same = variant(&r, "same");
    assert_ne!(same["decision"], "accept", "{same}");
    let table = stdout(&o);
    assert!(table.contains("one value per run"), "{table}");
    assert!(table.contains("value (GB/s)"), "{table}");
    assert!(!table.contains("Matched per-epoch table"), "{table}");
    // The runs' samples hold the value as epoch 1 (the warm-up line is not the value: the
    // pattern is anchored, and the last match counts).
    let samples = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    assert!(
        samples.lines().skip(1).all(|l| l.contains(",1,")),
        "{samples}"
    );
}

/// `metrics:` with the rate as primary and the results file's triad rate as a guardrail
/// limited to 10 %: a variant 20 % faster whose triad is 30 % slower is rejected naming
/// the guardrail, with the guardrail's change and interval in the JSON report; a variant
/// that only speeds up the primary is accepted with the guardrail reported. Planted bugs
/// caught: the guardrail not read from its file, the veto not applied (the variant
/// accepted), the veto applied to a guardrail within its limit.
#[test]
fn a_guardrail_that_regresses_beyond_its_limit_rejects_an_improved_variant() {
    let dir = tempfile::tempdir().unwrap();
    let app = write_app(dir.path());
    let yaml = format!(
        "name: guard\napp:\n  command: [bash, '{app}']\n\
         metrics:\n\
         \x20 - {{ name: rate, pattern: '(?m)^rate (?P<value>[0-9.]+) GB/s', better: higher, unit: GB/s }}\n\
         \x20 - {{ name: triad, source: file, file: results.txt, pattern: 'triad (?P<value>[0-9.]+) GB/s', better: higher, unit: GB/s, max_regression_pct: 10 }}\n\
         replicates: 6\ncompare: {{ min_effect_pct: 5 }}\n\
         variants:\n  - {{ name: trade, dimension: l2_threading_model, env: {{ WORK_S: \"0.166667\", GUARD_S: \"0.142857\" }} }}\n  \
         - {{ name: clean, dimension: l1_vectorization, env: {{ WORK_S: \"0.166667\" }} }}\n"
    );
    let (o, root) = run_experiment(dir.path(), &yaml, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = report_json(&root);
    let trade = variant(&r, "trade");
    assert_eq!(trade["decision"], "reject", "{trade}");
    let reason = trade["reason"].as_str().unwrap();
    assert!(reason.starts_with("guardrail triad regressed"), "{reason}");
    assert!(trade["app_impact_pct"].as_f64().unwrap() > 10.0, "{trade}");
    let g = &trade["guardrails"][0];
    assert_eq!(g["name"], "triad");
    assert_eq!(g["regressed"], true, "{g}");
    assert_eq!(g["max_regression_pct"], 10.0);
    let change = g["impact_pct"].as_f64().unwrap();
    assert!((change + 30.0).abs() < 8.0, "{g}");
    assert!(g["impact_ci_high"].as_f64().unwrap() < -10.0, "{g}");
    let clean = variant(&r, "clean");
    assert_eq!(clean["decision"], "accept", "{clean}");
    assert_eq!(clean["guardrails"][0]["regressed"], false, "{clean}");
    let table = stdout(&o);
    assert!(table.contains("Guardrails"), "{table}");
    assert!(
        r["experiment"]["metric"]
            .as_str()
            .unwrap()
            .contains("guardrails: `triad`")
    );
}

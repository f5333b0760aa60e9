//! Resource use per run through the real binary: CPU time recorded in every manifest and
//! in `samples.csv`, and System Impact comparing core-seconds by default — a variant that
//! keeps a second core busy for the same wall time costs resources, the mirror case saves
//! them (the VPIC story: fewer threads, same time, positive System Impact).

mod support;

use support::*;

/// An app that keeps `$BURNERS` cores busy (default `default`) for the same wall time,
/// then prints identical epoch times: only its CPU use differs between arms.
fn burner_experiment(name: &str, default: u32, variant: u32) -> String {
    format!(
        r#"name: {name}
app:
  command:
    - bash
    - -c
    - |
      for i in $(seq 1 "${{BURNERS:-{default}}}"); do
        timeout 0.4 bash -c 'while :; do :; done' &
      done
      wait
      for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
variants:
  - name: v
    dimension: l2_threading_model
    env: {{ BURNERS: "{variant}" }}
"#
    )
}

#[test]
fn a_variant_that_burns_a_second_core_has_a_negative_system_impact() {
    let dir = tempfile::tempdir().unwrap();
    let (o, root) = run_experiment(dir.path(), &burner_experiment("burn", 1, 2), &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(report["system_resource"], "core_seconds", "{report:#}");
    let v = &report["variants"][0];
    let (est, high) = (
        v["system_impact_pct"].as_f64().unwrap(),
        v["system_impact_ci_high"].as_f64().unwrap(),
    );
    // About twice the core-seconds: about −100 %; the whole interval is a cost.
    assert!(est < -30.0, "{v:#}");
    assert!(high < 0.0, "{v:#}");
    // The score counts it: below half the App Impact (which is 0 here: same times).
    assert!(v["weighted_score"].as_f64().unwrap() < -15.0, "{v:#}");

    // Every run's manifest and samples row carry its CPU time.
    let csv = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("variant,replicate,block,epoch,seconds,cpu_s,max_rss_kib,energy_j")
    );
    let mut cpu = std::collections::BTreeMap::<String, Vec<f64>>::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let c: f64 = f[5].parse().unwrap();
        assert!(f[6].parse::<u64>().unwrap() > 0, "{line}");
        cpu.entry(f[0].to_string()).or_default().push(c);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    assert!(
        median(cpu.get_mut("v").unwrap()) > median(cpu.get_mut("baseline").unwrap()),
        "{csv}"
    );
    let m: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("runs/b001-v/manifest.json")).unwrap(),
    )
    .unwrap();
    assert!(
        m["resources"]["cpu_user_s"].as_f64().unwrap() > 0.0,
        "{m:#}"
    );
}

#[test]
fn fewer_busy_cores_for_the_same_time_is_a_positive_system_impact() {
    let dir = tempfile::tempdir().unwrap();
    let (o, _) = run_experiment(dir.path(), &burner_experiment("fewer", 2, 1), &[]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        text.contains("System Impact compares core-seconds per run"),
        "{text}"
    );
    // The proposal table's System Impact cell: positive, about +50 %.
    let row = text
        .lines()
        .find(|l| l.starts_with("1  v "))
        .unwrap_or_default();
    let cells: Vec<&str> = row.split("  ").filter(|c| !c.trim().is_empty()).collect();
    // #, strategy, description, App Impact, System Impact, …
    assert!(
        cells.get(4).is_some_and(|c| c.trim().starts_with('+')),
        "{text}"
    );

    let (o, _) = run_experiment(dir.path(), &burner_experiment("fewer", 2, 1), &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
    let v = &report["variants"][0];
    assert!(v["system_impact_pct"].as_f64().unwrap() > 20.0, "{v:#}");
    assert!(v["system_impact_ci_low"].as_f64().unwrap() > 0.0, "{v:#}");
}

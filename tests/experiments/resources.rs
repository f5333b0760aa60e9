//! Resource use per run through the real binary: CPU time recorded in every manifest and
//! in `samples.csv`, and System Impact comparing core-seconds by default — a variant that
//! keeps a second core busy for the same wall time costs resources, the mirror case saves
//! them (the VPIC story: fewer threads, same time, positive System Impact).

use crate::support;

use support::*;

/// An app that keeps `$BURNERS` cores busy (default `default`) side by side, then prints
/// identical epoch times: only its CPU use differs between arms. Each burner does a fixed
/// amount of work rather than running for a fixed time, so that its CPU time does not
/// depend on how busy the machine running the test is.
fn burner_experiment(name: &str, default: u32, variant: u32) -> String {
    format!(
        r#"name: {name}
app:
  command:
    - bash
    - -c
    - |
      for i in $(seq 1 "${{BURNERS:-{default}}}"); do
        bash -c 'i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done' &
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

/// An app with a compile cache: the first run that finds `$TORCHINDUCTOR_CACHE_DIR` empty
/// "compiles" (fills it) and says `cache cold`; a run that finds it filled says `cache warm`.
const CACHING_APP: &str = r#"name: caches
app:
  command:
    - bash
    - -c
    - |
      if [ -f "$TORCHINDUCTOR_CACHE_DIR/kernel.so" ]; then echo "cache warm"; else
        echo "cache cold"; mkdir -p "$TORCHINDUCTOR_CACHE_DIR" "$TRITON_CACHE_DIR"
        echo compiled > "$TORCHINDUCTOR_CACHE_DIR/kernel.so"
      fi
      for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
replicates: 5
variants:
  - name: warm
    dimension: l2_compiler_runtime_flags
    env: { X: "1" }
    caches: warm
"#;

#[test]
fn each_run_gets_a_cold_compile_cache_unless_its_arm_asks_for_warm() {
    let dir = tempfile::tempdir().unwrap();
    let (o, root) = run_experiment(dir.path(), CACHING_APP, &["--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The report says which arm had which caches.
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        report["isolation"]["arms"],
        serde_json::json!([
            {"arm": "baseline", "caches": "cold", "page_cache": "leave"},
            {"arm": "warm", "caches": "warm", "page_cache": "leave"},
        ])
    );
    let mut baseline_dirs = std::collections::BTreeSet::new();
    let mut warm_dirs = std::collections::BTreeSet::new();
    for b in 1..=5 {
        let run = |arm: &str| root.join(format!("runs/b{b:03}-{arm}"));
        let manifest = |arm: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(run(arm).join("manifest.json")).unwrap())
                .unwrap()
        };
        // Cold (the default): every replicate compiles, in a cache inside its own run.
        let out = std::fs::read_to_string(run("baseline").join("stdout")).unwrap();
        assert!(out.starts_with("cache cold\n"), "b{b}: {out}");
        let m = manifest("baseline");
        let inductor = m["environment"]["TORCHINDUCTOR_CACHE_DIR"]
            .as_str()
            .unwrap();
        assert!(
            std::path::Path::new(inductor).starts_with(run("baseline")),
            "{inductor}"
        );
        assert!(
            m["environment"]["TRITON_CACHE_DIR"]
                .as_str()
                .unwrap()
                .ends_with("/caches/triton")
        );
        assert_eq!(m["isolation"]["caches"], "cold");
        baseline_dirs.insert(inductor.to_string());
        // Warm: every timed run finds the arm's one cache filled by the warm-up.
        let out = std::fs::read_to_string(run("warm").join("stdout")).unwrap();
        assert!(out.starts_with("cache warm\n"), "b{b}: {out}");
        let m = manifest("warm");
        assert_eq!(m["isolation"]["caches"], "warm");
        warm_dirs.insert(
            m["environment"]["TORCHINDUCTOR_CACHE_DIR"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        // Only the first run of the arm did the warm-up.
        assert_eq!(m["isolation"]["warmup"].is_object(), b == 1, "{m:#}");
    }
    assert_eq!(baseline_dirs.len(), 5, "{baseline_dirs:?}");
    assert_eq!(warm_dirs.len(), 1, "{warm_dirs:?}");
    let warmup_out = std::fs::read_to_string(root.join("caches/warm/warmup/stdout")).unwrap();
    assert!(warmup_out.starts_with("cache cold\n"), "{warmup_out}");
    // The warm-up is not a sample.
    let csv = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    assert_eq!(
        csv.lines().filter(|l| l.starts_with("warm,")).count(),
        5 * 3
    );
}

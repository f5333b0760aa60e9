//! The README's main command, end to end through the real binary: the quickstart builds the
//! OpenMP stencil, runs every arm in blocks, and prints a report whose structure and data
//! are checked here.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};

use support::*;

#[test]
fn quickstart_runs_end_to_end_and_reports_every_arm() {
    let out = tempfile::tempdir().unwrap();
    let root = out.path().join("exec");
    // The quickstart with one look (`max_replicates: 7`): by default it adapts (up to 42
    // blocks, the staged rule), which `tests/daemon/staged.rs` covers; this test checks the
    // whole run and the report of 7 blocks against the rules at a single level α.
    let text = std::fs::read_to_string(repo_root().join("experiments/quickstart.yaml"))
        .unwrap()
        .replace(
            "workdir: ../examples/openmp-stencil",
            &format!(
                "workdir: {}",
                repo_root().join("examples/openmp-stencil").display()
            ),
        )
        .replace("\nreplicates: 7\n", "\nreplicates: 7\nmax_replicates: 7\n")
        // Half the sweeps per epoch: what is checked is the whole path and the report, not
        // the speed-ups, and a run still lasts several of the thread sampler's intervals.
        .replace(r#""--sweeps", "60""#, r#""--sweeps", "30""#);
    assert!(text.contains("max_replicates: 7") && !text.contains("workdir: .."));
    assert!(
        text.contains(r#""--sweeps", "30""#),
        "the quickstart's sweeps changed"
    );
    let exp = out.path().join("quickstart.yaml");
    std::fs::write(&exp, text).unwrap();
    let o = run(&[
        "run",
        exp.to_str().unwrap(),
        "--out",
        root.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    assert_eq!(o.status.code(), Some(0), "stderr:\n{}", stderr(&o));

    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("--json prints JSON");
    assert_eq!(report["baseline"], "baseline");
    let variants = report["variants"].as_array().unwrap();
    let names: BTreeSet<&str> = variants
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["threads-match-cores", "o3-native", "bind-close"])
    );
    let alpha = report["alpha"].as_f64().unwrap();
    for v in variants {
        // The measurement on a shared machine decides which way each goes; whichever it
        // is, it must follow from the reported numbers by the documented rules.
        check_decision_follows_from_numbers(v, alpha);
        assert!(!v["reason"].as_str().unwrap().is_empty());
        assert_eq!(v["n_baseline"], 7);
        assert_eq!(v["n_variant"], 7);
        // Matched epoch-N table for all 5 epochs, steady window 2..5.
        assert_eq!(v["per_epoch"].as_array().unwrap().len(), 5);
        assert_eq!(v["steady_epochs"], serde_json::json!([2, 3, 4, 5]));
        assert!(v["speedup"]["estimate"].as_f64().unwrap() > 0.0);
        assert!(v["first_epoch"]["change_pct"].is_number());
        // Every variant's checksum was compared with its block's baseline in all 7 runs,
        // and the reason says so.
        assert_eq!(
            v["output_check"]["checked"],
            serde_json::json!(["values"]),
            "{v:#}"
        );
        assert_eq!(v["output_check"]["runs"], 7);
        assert!(
            v["reason"]
                .as_str()
                .unwrap()
                .contains("rel 1e-12 in 7/7 runs"),
            "{}",
            v["reason"]
        );
        // Core-seconds are measured for every run: System Impact is never left blank.
        assert!(v["system_impact_pct"].is_number(), "{v:#}");
    }
    // Utilisation on the local backend too: the 1-thread baseline keeps one of this
    // machine's cores busy; the variant running a thread per core keeps them all busy.
    let cores = std::thread::available_parallelism().unwrap().get() as f64;
    let util = |arm: &str| -> serde_json::Value {
        report["utilisation"]
            .as_array()
            .expect("utilisation for local runs")
            .iter()
            .find(|u| u["arm"] == arm)
            .cloned()
            .unwrap_or_else(|| panic!("no utilisation for {arm}: {:#}", report["utilisation"]))
    };
    let base = util("baseline");
    assert_eq!(base["of"], "runs");
    assert_eq!(base["cores_allotted"].as_f64(), Some(cores));
    if cores >= 2.0 {
        assert_eq!(base["finding"], "idle_cores", "{base:#}");
    }
    if cores == 2.0 {
        let all = util("threads-match-cores");
        assert!(all["finding"].is_null(), "{all:#}");
        // Its two threads asked for both cores; under other load it may get less of them.
        assert!(all["runnable_threads"].as_f64().unwrap() > 1.2, "{all:#}");
        if all["under_load"] == false {
            assert!(all["cores_used"].as_f64().unwrap() > 1.2, "{all:#}");
        }
    }

    // The samples file holds every arm's 7 replicates × 5 epochs, all positive.
    let csv = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    let mut per_arm: BTreeMap<String, BTreeSet<(u32, u32)>> = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let secs: f64 = f[4].parse().unwrap();
        assert!(secs > 0.0);
        // Every run's CPU time is recorded beside its samples.
        let cpu_s: f64 = f[5].parse().unwrap();
        assert!(cpu_s > 0.0, "{line}");
        per_arm
            .entry(f[0].to_string())
            .or_default()
            .insert((f[1].parse().unwrap(), f[3].parse().unwrap()));
    }
    assert_eq!(per_arm.len(), 4);
    for (arm, cells) in &per_arm {
        assert_eq!(cells.len(), 7 * 5, "arm {arm}");
    }

    // The recorded plan: 7 blocks, each holding every arm once, run in that order.
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("plan.json")).unwrap()).unwrap();
    let blocks = plan["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 7);
    let mut starts: Vec<(String, String)> = Vec::new();
    for b in blocks {
        let order: Vec<&str> = b["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(order.iter().collect::<BTreeSet<_>>().len(), 4);
        for arm in order {
            let id = format!("b{:03}-{arm}", b["index"].as_u64().unwrap());
            let m: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(root.join("runs").join(&id).join("manifest.json"))
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(m["outcome"], "completed");
            starts.push((m["started_at"].as_str().unwrap().to_string(), id));
        }
    }
    let mut sorted = starts.clone();
    sorted.sort();
    assert_eq!(starts, sorted, "runs did not start in the recorded order");
    // The two distinct builds each got their own directory.
    let builds: Vec<_> = std::fs::read_dir(root.join("builds")).unwrap().collect();
    assert_eq!(builds.len(), 2);
}

/// The decision rules of docs/STATISTICS.md (4: improvement, 5: cannot reach the worthwhile
/// effect, 5′: acceptance impossible even at the intervals' favourable ends, 6: otherwise
/// inconclusive), checked against the figures the report gives.
fn check_decision_follows_from_numbers(v: &serde_json::Value, alpha: f64) {
    let d = v["decision"].as_str().unwrap();
    let p_imp = v["p_improvement_adjusted"].as_f64().unwrap();
    let p_nw = v["p_no_worthwhile_adjusted"].as_f64().unwrap();
    let app = v["app_impact_pct"].as_f64();
    let ctx = format!("{v:#}");
    match d {
        "accept" => {
            assert!(p_imp < alpha, "accepted without p_adj < α: {ctx}");
            assert!(
                app.is_none_or(|a| a > 0.0),
                "accepted at App Impact ≤ 0: {ctx}"
            );
            assert!(v["speedup"]["estimate"].as_f64().unwrap() > 1.0, "{ctx}");
        }
        // Rule 5 (cannot reach the worthwhile effect), rule 4's sign check, or rule 5′:
        // even the favourable ends of the intervals leave App Impact ≤ 0.
        "reject" => assert!(
            p_nw < alpha
                || (p_imp < alpha && app.is_some_and(|a| a <= 0.0))
                || v["app_impact_best"].as_f64().is_some_and(|b| b <= 0.0),
            "rejected without any of the three reasons: {ctx}"
        ),
        "inconclusive" => assert!(
            p_imp >= alpha && p_nw >= alpha,
            "inconclusive although a test is significant: {ctx}"
        ),
        // Correctness and applicability are not at stake in the quickstart.
        other => panic!("unexpected decision {other}: {ctx}"),
    }
}

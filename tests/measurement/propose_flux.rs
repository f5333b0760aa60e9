//! `optgate propose` through the daemon on the real 4-broker Flux
//! (`schedulers/flux/setup-one-node.sh --brokers 4`, `OPTGATE_FLUX_URI_4`): the shipped
//! hybrid MPI+OpenMP example with its variants and verdicts removed — each rank given 2
//! cores by `flux run -c 2` and running 1 OpenMP thread, the defect the seed found in VPIC.
//! The baseline is measured inside the step (`optgate step` records each task), and the
//! file propose writes must hold the seed's fix: `cpus_per_task: 2` with
//! `OMP_NUM_THREADS: 2`, which, submitted unedited, the daemon accepts.
//!
//! One node (one rank): the 4 "nodes" are brokers on one machine sharing its 2 cores, so two
//! ranks of 2 threads would oversubscribe them and no thread count could win here. And a
//! larger grid than the example's (which checks placement, not speed): at its 20 ms epochs
//! a second thread's start-up outweighed its help (0.79×, inconclusive, when tried).
//!
//! Without a 4-broker Flux or `mpicc` this test FAILS with instructions; it never skips.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// A guard against hanging forever; nothing is asserted about how long anything took.
const DEADLINE: Duration = Duration::from_secs(900);

/// experiments/hybrid-flux.yaml up to its variants, on one node, its workdir a private copy.
fn baseline_only(dir: &Path) -> PathBuf {
    let root = support::repo_root();
    let work = dir.join("hybrid-stencil");
    std::fs::create_dir(&work).unwrap();
    std::fs::copy(
        root.join("examples/hybrid-stencil/stencil.c"),
        work.join("stencil.c"),
    )
    .unwrap();
    let yaml = std::fs::read_to_string(root.join("experiments/hybrid-flux.yaml")).unwrap();
    let (head, tail) = yaml.split_once("\nvariants:\n").unwrap();
    assert!(
        tail.contains("\nchecklist:\n") && !tail.contains("\nscheduler:"),
        "experiments/hybrid-flux.yaml no longer ends with its variants and checklist"
    );
    let small = r#"args: ["--n", "768", "--epochs", "4", "--sweeps", "30"]"#;
    let large = r#"args: ["--n", "1536", "--epochs", "5", "--sweeps", "60"]"#;
    for from in [
        "workdir: ../examples/hybrid-stencil",
        "  nodes: 2\n",
        "OMP_NUM_THREADS: 1 }",
        small,
    ] {
        assert!(head.contains(from), "hybrid-flux.yaml has no `{from}`");
    }
    let head = head
        .replace(
            "workdir: ../examples/hybrid-stencil",
            &format!("workdir: {}", work.display()),
        )
        .replace("  nodes: 2\n", "  nodes: 1\n")
        .replace(small, large);
    let path = dir.join("hybrid.yaml");
    std::fs::write(&path, format!("{head}\n")).unwrap();
    path
}

#[test]
fn propose_on_flux_finds_the_idle_cores_and_its_fix_is_accepted() {
    let _machine = support::measuring();
    let uri = support::require_four_brokers();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    let file = baseline_only(dir.path());
    // The daemon propose starts inherits this FLUX_URI: every job goes to the 4 brokers.
    let o = support::optgate()
        .args(["propose", file.to_str().unwrap()])
        .env("OPTGATE_HOME", &home)
        .env("FLUX_URI", &uri)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let out = dir.path().join("hybrid.proposed.yaml");
    let text = std::fs::read_to_string(&out).unwrap();
    let proposed: optgate_experiment::ExperimentFile =
        optgate_experiment::yaml::from_str_all(&text).unwrap();
    let fix = proposed
        .variants
        .iter()
        .find(|v| v.dimension.as_deref() == Some("l2_threading_model"))
        .unwrap_or_else(|| panic!("no threads variant in\n{text}\n{}", support::stderr(&o)));
    assert_eq!(fix.env["OMP_NUM_THREADS"].0, "2", "{text}");
    assert_eq!(fix.launcher.cpus_per_task, Some(2), "{text}");
    let why = fix.description.as_deref().unwrap_or("");
    assert!(
        why.contains("of 2 allotted cores busy per task") && why.contains("OMP_NUM_THREADS=1"),
        "the variant does not say what was measured: {why}"
    );

    let o = support::cli(&home, &["submit", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let id = support::stdout(&o).trim().to_string();
    let s = support::wait_for("the proposed experiment to end", DEADLINE, || {
        let s = support::status(&home, &id);
        support::ended(&s).then_some(s)
    });
    assert_eq!(s["state"], "decided", "{s:#}");
    let o = support::cli(&home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == fix.name.as_str())
        .unwrap();
    assert_eq!(v["decision"], "accept", "{v:#}");
}

//! A hybrid MPI+OpenMP experiment on 2 nodes of a real multi-broker Flux: the 4-broker
//! instance that `schedulers/flux/setup-one-node.sh --brokers 4` starts (`tests/run-all.sh`
//! runs it and exports its URI as `OPTGATE_FLUX_URI_4`). The shipped
//! `experiments/hybrid-flux.yaml` (`examples/hybrid-stencil`, built with Debian's MPICH) is
//! submitted to the daemon and decided; every launched task ran inside `optgate step`, so
//! each run's manifest must name two tasks on two distinct Flux nodes (broker ranks), MPI
//! must still have initialised through the wrapper, and System Impact must be measured.
//!
//! The 4 "nodes" are 4 brokers on one machine and share its cores: timings here are
//! functional, not performance (the 2-thread variant is oversubscribed and slower).
//!
//! Without a 4-broker Flux or `mpicc` this test FAILS with instructions; it never skips.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// A guard against hanging forever; nothing is asserted about how long anything took.
const DEADLINE: Duration = Duration::from_secs(600);

/// The shipped experiment, its workdir pointed at a private copy of the example (so its
/// runs land in the test's temporary directory, not in the checkout).
fn hybrid_experiment(dir: &Path) -> PathBuf {
    let root = support::repo_root();
    let work = dir.join("hybrid-stencil");
    std::fs::create_dir(&work).unwrap();
    std::fs::copy(
        root.join("examples/hybrid-stencil/stencil.c"),
        work.join("stencil.c"),
    )
    .unwrap();
    let yaml = std::fs::read_to_string(root.join("experiments/hybrid-flux.yaml")).unwrap();
    let from = "workdir: ../examples/hybrid-stencil";
    assert!(
        yaml.contains(from),
        "experiments/hybrid-flux.yaml changed its workdir"
    );
    let yaml = yaml.replace(from, &format!("workdir: {}", work.display()));
    support::write_experiment(dir, &yaml)
}

/// Checks one run: two task records on two distinct nodes, each with CPU time and the two
/// cores its `flux run -c 2` gave it; both MPI ranks saw a world of 2.
fn check_run(run: &Path) {
    let name = run.display();
    let m: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["outcome"], "completed", "{name}: {m:#}");
    let tasks = m["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no tasks in the manifest"));
    assert_eq!(tasks.len(), 2, "{name}: {tasks:#?}");
    let nodes: BTreeSet<&str> = tasks.iter().filter_map(|t| t["node"].as_str()).collect();
    assert_eq!(
        nodes.len(),
        2,
        "{name}: tasks not on 2 distinct nodes: {tasks:#?}"
    );
    let ranks: BTreeSet<u64> = tasks.iter().filter_map(|t| t["rank"].as_u64()).collect();
    assert_eq!(ranks, BTreeSet::from([0, 1]), "{name}");
    for t in tasks {
        let cpu = t["cpu_s"].as_f64().unwrap_or(0.0);
        assert!(cpu > 0.0, "{name}: a task with no CPU time: {t:#}");
        assert_eq!(
            t["cpus_allowed"], 2,
            "{name}: `-c 2` did not reach the task: {t:#}"
        );
        assert_eq!(t["end"], "exited", "{name}: {t:#}");
    }
    // MPI_Init found its peer through the wrapper (PMI passed through): each rank says so.
    let out = std::fs::read_to_string(run.join("stdout")).unwrap();
    for rank in 0..2 {
        assert!(
            out.contains(&format!("hybrid: rank {rank} of 2 on ")),
            "{name}: rank {rank} did not see a world of 2:\n{out}"
        );
    }
}

#[test]
fn a_two_node_hybrid_mpi_openmp_experiment_is_decided_with_every_task_measured() {
    let uri = support::require_four_brokers();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    let exp = hybrid_experiment(dir.path());
    // The daemon `submit` starts inherits this FLUX_URI: all its jobs go to the 4 brokers.
    let o = support::optgate()
        .args(["submit", exp.to_str().unwrap()])
        .env("OPTGATE_HOME", &home)
        .env("FLUX_URI", &uri)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let id = support::stdout(&o).trim().to_string();

    let s = support::wait_for("the hybrid experiment to end", DEADLINE, || {
        let s = support::status(&home, &id);
        support::ended(&s).then_some(s)
    });
    assert_eq!(s["state"], "decided", "{s:#}");
    assert_eq!(s["scheduler"], "flux");
    let runs = PathBuf::from(s["root"].as_str().unwrap()).join("runs");
    let mut checked = 0;
    for run in std::fs::read_dir(&runs).unwrap() {
        check_run(&run.unwrap().path());
        checked += 1;
    }
    assert_eq!(checked, s["runs"]["total"].as_u64().unwrap(), "{s:#}");
    assert!(checked >= 10, "5 blocks of 2 arms: {s:#}");

    let o = support::cli(&home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &report["variants"][0];
    assert!(
        v["system_impact_pct"].is_number(),
        "System Impact not measured under `flux run`: {v:#}"
    );
    assert_eq!(report["provenance"]["scheduler"], "flux");
}

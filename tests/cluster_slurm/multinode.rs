//! optgate's Slurm backend on a real two-node Slurm: `schedulers/slurm/setup.sh --nodes 2`
//! run with its own `slurm.conf` (`$OPTGATE_SLURM2_CONF`, default
//! `/etc/optgate-slurm2/slurm.conf`; `tests/run-all.sh` starts it). A step across the nodes
//! (`srun -N2 -n2`) puts one task on each, and the run's manifest says so: two `tasks` on two
//! distinct `node`s (Slurm's `SLURMD_NODENAME`), `resources.cpu_*` their sum. MPI (Debian's
//! MPICH, `srun --mpi=pmi2` or the cluster's `MpiDefault=pmi2`) spans both nodes through the
//! wrapper, and the hybrid experiment of `experiments/hybrid-flux.yaml`, on Slurm, is decided.
//!
//! The two "nodes" are two slurmd in their own network and UTS namespaces on ONE machine:
//! they share its cores, so timings here are functional, not performance.
//! Without the two-node cluster these tests FAIL with instructions; they never skip.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::*;

/// A few hundred ms of shell arithmetic: CPU time well above the clock's tick.
const BURN: &str = "i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done";

/// Where `tests/run-all.sh` writes the two-node cluster's configuration.
const DEFAULT_CONF: &str = "/etc/optgate-slurm2/slurm.conf";

/// The two-node cluster's `slurm.conf`, checked to answer with at least two nodes; their
/// names, as `sinfo` lists them.
pub(crate) fn two_node_cluster() -> (String, BTreeSet<String>) {
    let conf = std::env::var("OPTGATE_SLURM2_CONF").unwrap_or_else(|_| DEFAULT_CONF.into());
    let o = Command::new("sinfo")
        .args(["-h", "-N", "-o", "%N"])
        .env("SLURM_CONF", &conf)
        .output();
    let nodes: BTreeSet<String> = match &o {
        Ok(o) if o.status.success() => stdout(o).lines().map(str::to_string).collect(),
        _ => BTreeSet::new(),
    };
    assert!(
        nodes.len() >= 2,
        "these tests need a two-node Slurm with its configuration at {conf}: run \
         `sudo env OPTGATE_SLURM_CONF={conf} OPTGATE_SLURM_DIR=/var/lib/optgate-slurm2 \
         OPTGATE_SLURMCTLD_PORT=6917 OPTGATE_SLURMD_PORT=6918 OPTGATE_SLURM_NET=10.212 \
         schedulers/slurm/setup.sh --nodes 2` (tests/run-all.sh does); sinfo said {o:?}"
    );
    (conf, nodes)
}

/// `optgate ARGS` against the two-node cluster, with a private home.
fn cli2(conf: &str, home: &Path, args: &[&str]) -> Output {
    optgate()
        .args(args)
        .env("OPTGATE_HOME", home)
        .env("SLURM_CONF", conf)
        .output()
        .unwrap()
}

/// A run directory as `optgate-sched` renders one: `run.json` and `run.sh` burning CPU.
fn run_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("b001-baseline");
    std::fs::create_dir_all(&dir).unwrap();
    let record = serde_json::json!({
        "experiment": "e", "run_id": "b001-baseline", "arm": "baseline", "block": 1,
        "replicate": 1, "env_set": {}, "env_unset": [], "time_limit_s": 120.0,
    });
    std::fs::write(dir.join("run.json"), record.to_string()).unwrap();
    std::fs::write(
        dir.join("run.sh"),
        format!("{BURN}\necho epoch 1 took 1.0 s\n"),
    )
    .unwrap();
    dir
}

/// A manifest of a step across two nodes: two tasks, one on each node of `nodes`, ranks 0
/// and 1, and `resources` their CPU time summed. Planted bugs caught: `node` taken from the
/// batch host instead of `SLURMD_NODENAME` (both tasks on one node), the records of the
/// other node's task not gathered (one task), one task's CPU taken for the run's.
fn check_two_nodes(m: &Value, nodes: &BTreeSet<String>) {
    let tasks = m["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("no tasks: {m:#}"));
    assert_eq!(tasks.len(), 2, "{m:#}");
    let seen: BTreeSet<String> = tasks
        .iter()
        .map(|t| t["node"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(seen.len(), 2, "both tasks on one node: {m:#}");
    assert!(seen.is_subset(nodes), "{seen:?} not among {nodes:?}");
    let ranks: BTreeSet<u64> = tasks.iter().filter_map(|t| t["rank"].as_u64()).collect();
    assert_eq!(ranks, BTreeSet::from([0, 1]), "{m:#}");
    let cpu: Vec<f64> = tasks.iter().map(|t| t["cpu_s"].as_f64().unwrap()).collect();
    assert!(cpu.iter().all(|c| *c > 0.0), "{m:#}");
    let r = &m["resources"];
    let total = r["cpu_user_s"].as_f64().unwrap() + r["cpu_system_s"].as_f64().unwrap();
    assert!((total - cpu.iter().sum::<f64>()).abs() < 1e-6, "{m:#}");
}

/// `optgate exec-run DIR -- srun -N2 -n2` (as a job script calls it, here from the host):
/// one task on each node.
#[test]
fn a_step_across_two_nodes_has_one_task_on_each_in_its_manifest() {
    let (conf, nodes) = two_node_cluster();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let dir = run_dir(tmp.path());
    let o = cli2(
        &conf,
        &home,
        &[
            "exec-run",
            dir.to_str().unwrap(),
            "--attempt",
            "1",
            "--",
            "srun",
            "-N2",
            "-n2",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["outcome"], "completed", "{m:#}");
    check_two_nodes(&m, &nodes);
}

/// Two arms with `nodes: 2, tasks_per_node: 1`: each block is an `sbatch -N2` job whose
/// script runs on the first node and launches `srun -N 2 -n 2` across both.
fn two_node_experiment() -> String {
    format!(
        r#"name: slurm-two-nodes
app:
  command: [bash, -c, '{BURN}; [ "$SLURM_PROCID" = 0 ] || exit 0; if [ "${{X:-0}}" = 1 ]; then b=700; else b=1000; fi; for e in 1 2 3; do echo "epoch $e took $((b + OPTGATE_BLOCK + e)).0 s"; done']
  time_limit: 2m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler: {{ kind: slurm, time_limit: 10m, nodes: 2, tasks_per_node: 1 }}
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#
    )
}

/// The daemon runs a two-node experiment to its decision; every run's manifest has one
/// task on each node. Planted bugs caught: `nodes` not passed to sbatch/srun (both tasks
/// on one node, or one task), SLURM_CONF dropped from the job's environment (the daemon
/// talks to the one-node cluster, or the step's srun cannot find its controller).
#[test]
fn the_daemon_decides_a_two_node_experiment_with_every_task_on_its_own_node() {
    let (conf, nodes) = two_node_cluster();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), &two_node_experiment());
    let o = cli2(&conf, &home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let s = wait_for("the experiment to end", Duration::from_secs(600), || {
        let s = status(&home, &id);
        ["decided", "failed", "budget_exhausted", "cancelled"]
            .contains(&s["state"].as_str().unwrap_or(""))
            .then_some(s)
    });
    assert_eq!(s["state"], "decided", "{s:#}");
    let root = PathBuf::from(s["root"].as_str().unwrap());
    for b in 1..=5 {
        for arm in ["baseline", "v1"] {
            let path = root.join(format!("runs/b{b:03}-{arm}/manifest.json"));
            let m: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            check_two_nodes(&m, &nodes);
        }
    }
}

/// One MPI program: each rank prints the world's size, its processor name and an
/// `MPI_Allreduce` of 1 over the world.
const ALLREDUCE_C: &str = r#"#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, size, one = 1, sum = 0, len;
    char name[MPI_MAX_PROCESSOR_NAME];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_processor_name(name, &len);
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("mpi rank %d of %d on %s sum %d\n", rank, size, name, sum);
    MPI_Finalize();
    return 0;
}
"#;

/// `srun --mpi=pmi2 -N2 -n2 optgate step … -- MPI_APP`: MPI initialises through the wrapper
/// across the two nodes (each rank sees a world of 2 and the Allreduce sums 2), and each
/// rank's record names its own node. Planted bugs caught: the PMI2 descriptor closed by the
/// wrapper (each rank its own world of 1, sum 1, or MPI_Init fails), records of one node only.
#[test]
fn an_mpi_program_across_two_nodes_initialises_through_the_wrapper() {
    let (conf, nodes) = two_node_cluster();
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("allreduce.c");
    let bin = tmp.path().join("allreduce");
    std::fs::write(&src, ALLREDUCE_C).unwrap();
    let cc = Command::new("mpicc").arg(&src).arg("-o").arg(&bin).output();
    assert!(
        cc.as_ref().is_ok_and(|o| o.status.success()),
        "`mpicc` failed or is missing (apt-get install mpich libmpich-dev; tests/run-all.sh \
         does): {cc:?}"
    );
    let dir = tmp.path().join("step");
    std::fs::create_dir(&dir).unwrap();
    let o = Command::new("srun")
        .args([
            "--mpi=pmi2",
            "-N2",
            "-n2",
            env!("CARGO_BIN_EXE_optgate"),
            "step",
        ])
        .arg(&dir)
        .args(["--attempt", "1", "--"])
        .arg(&bin)
        .env("SLURM_CONF", &conf)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for (rank, node) in nodes.iter().take(2).enumerate() {
        assert!(
            out.contains(&format!("mpi rank {rank} of 2 on {node} sum 2")),
            "rank {rank} not one of a world of 2 on {node}:\n{out}"
        );
    }
    let seen: BTreeSet<String> = std::fs::read_dir(dir.join("tasks.attempt-1"))
        .unwrap()
        .map(|e| {
            let v: Value =
                serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
            v["node"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(seen.len(), 2, "records not on two nodes: {seen:?}");
}

/// The shipped hybrid MPI+OpenMP experiment (`experiments/hybrid-flux.yaml`, the stencil of
/// `examples/hybrid-stencil`) with `kind: slurm`: 2 nodes × 1 rank × 2 cores. Its workdir is a
/// private copy of the example. The two-node cluster's `MpiDefault=pmi2` lets the ranks of
/// optgate's `srun` line find each other.
fn hybrid_on_slurm(dir: &Path) -> PathBuf {
    let root = repo_root();
    let work = dir.join("hybrid-stencil");
    std::fs::create_dir(&work).unwrap();
    std::fs::copy(
        root.join("examples/hybrid-stencil/stencil.c"),
        work.join("stencil.c"),
    )
    .unwrap();
    let yaml = std::fs::read_to_string(root.join("experiments/hybrid-flux.yaml")).unwrap();
    let (workdir, kind) = ("workdir: ../examples/hybrid-stencil", "kind: flux");
    assert!(yaml.contains(workdir) && yaml.contains(kind), "{yaml}");
    let yaml = yaml
        .replace(workdir, &format!("workdir: {}", work.display()))
        .replace(kind, "kind: slurm");
    write_experiment(dir, &yaml)
}

/// The hybrid experiment on two Slurm nodes is decided; in every run both MPI ranks saw a
/// world of 2 and ran on distinct nodes. Planted bugs caught: PMI not reaching the app
/// through `optgate step` (each rank a world of 1), both ranks on one node, System Impact
/// "not measured" under `srun`.
#[test]
fn the_hybrid_mpi_openmp_experiment_is_decided_on_two_slurm_nodes() {
    let (conf, nodes) = two_node_cluster();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = hybrid_on_slurm(dir.path());
    let o = cli2(&conf, &home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    let s = wait_for(
        "the hybrid experiment to end",
        Duration::from_secs(600),
        || {
            let s = status(&home, &id);
            ["decided", "failed", "budget_exhausted", "cancelled"]
                .contains(&s["state"].as_str().unwrap_or(""))
                .then_some(s)
        },
    );
    assert_eq!(s["state"], "decided", "{s:#}");
    let runs = PathBuf::from(s["root"].as_str().unwrap()).join("runs");
    let mut checked = 0;
    for run in std::fs::read_dir(&runs).unwrap() {
        let run = run.unwrap().path();
        let m: Value =
            serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
        check_two_nodes(&m, &nodes);
        let out = std::fs::read_to_string(run.join("stdout")).unwrap();
        for rank in 0..2 {
            let line = format!("hybrid: rank {rank} of 2 on ");
            assert!(
                out.contains(&line),
                "{}: no `{line}`:\n{out}",
                run.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 10, "5 blocks of 2 arms: {s:#}");
    let o = cli2(&conf, &home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &report["variants"][0];
    assert!(v["system_impact_pct"].is_number(), "{v:#}");
}

/// `setup.sh --print-conf` with `--nodes` at its limit (`MAX_NODES`, 32) and past it: 32
/// nodes each with its own address, one partition over all of them; 33, 0 and a word
/// refused before anything is written. Needs no cluster and no root. Planted bugs caught:
/// the limit not checked (33 accepted), an address shared by two nodes, a node left out of
/// the partition.
#[test]
fn the_setup_script_takes_up_to_32_nodes_and_refuses_more() {
    let script = repo_root().join("schedulers/slurm/setup.sh");
    let print = |nodes: &str| {
        Command::new(&script)
            .args(["--nodes", nodes, "--print-conf"])
            .env("OPTGATE_SLURM_NODE_PREFIX", "n")
            .output()
            .unwrap()
    };
    let o = print("32");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let conf = stdout(&o);
    let addrs: BTreeSet<&str> = conf
        .lines()
        .filter(|l| l.starts_with("NodeName="))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("NodeAddr=")))
        .collect();
    assert_eq!(addrs.len(), 32, "{conf}");
    assert!(
        conf.contains("PartitionName=debug Nodes=n[1-32] "),
        "{conf}"
    );
    for bad in ["33", "0", "two"] {
        let o = print(bad);
        assert_eq!(o.status.code(), Some(1), "--nodes {bad}: {}", stdout(&o));
        assert!(stderr(&o).contains("--nodes"), "{}", stderr(&o));
    }
}

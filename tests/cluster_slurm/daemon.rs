//! The daemon driving a real Slurm end to end: `optgate submit` of a `scheduler: slurm`
//! experiment → one sbatch job per block → polled → runs collected from their manifests →
//! analysed → decided; and the same with the daemon SIGKILLed while its jobs are queued,
//! which must end with every block submitted exactly once and every run counted once.
//! Needs the one-node Slurm of `schedulers/slurm/setup-one-node.sh` (CI starts it).

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::*;

const DEADLINE: Duration = Duration::from_secs(600);

/// Two arms on Slurm; the variant is ~30 % faster in every block, so it must be accepted.
fn experiment(name: &str, sleep: &str) -> String {
    two_arm_experiment(name, "slurm", sleep, "")
}

/// The states `squeue` shows for these job ids (jobs it no longer lists are left out).
fn slurm_states(ids: &[&str]) -> Vec<String> {
    let o = std::process::Command::new("squeue")
        .args(["-h", "-o", "%T", "-j", &ids.join(",")])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// Every job of the experiment: one per block, first attempt, a Slurm job id, its
/// script submitted once (one job-id file).
fn check_jobs_once(s: &Value, blocks: usize) {
    let jobs = s["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), blocks, "{s:#}");
    let mut seen = std::collections::BTreeSet::new();
    for j in jobs {
        assert_eq!(j["attempt"], 1, "resubmitted: {j}");
        let id = j["scheduler_job_id"].as_str().unwrap();
        assert!(id.parse::<u64>().is_ok(), "not a Slurm id: {id}");
        assert!(
            seen.insert(j["block"].as_u64().unwrap()),
            "block twice: {s:#}"
        );
    }
}

/// Every planned run has exactly one manifest, written inside its Slurm job.
fn check_runs_once(root: &Path, blocks: u32) {
    for b in 1..=blocks {
        for arm in ["baseline", "v1"] {
            let m: Value = serde_json::from_str(
                &std::fs::read_to_string(root.join(format!("runs/b{b:03}-{arm}/manifest.json")))
                    .unwrap(),
            )
            .unwrap();
            assert_eq!(m["outcome"], "completed", "{m}");
            assert!(
                m["scheduler_job_id"]
                    .as_str()
                    .is_some_and(|j| j.parse::<u64>().is_ok()),
                "{m}"
            );
        }
    }
    let samples = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    let rows: Vec<&str> = samples.lines().skip(1).collect();
    assert_eq!(rows.len(), 2 * blocks as usize * 3, "{samples}");
    let unique: std::collections::BTreeSet<_> = rows
        .iter()
        .map(|r| {
            let f: Vec<&str> = r.split(',').collect();
            (f[0].to_string(), f[1].to_string(), f[3].to_string())
        })
        .collect();
    assert_eq!(unique.len(), rows.len(), "a sample was counted twice");
    // Per planned run (`b<block>-<arm>`: the columns variant and block), its three epochs:
    // every run counted, none twice.
    let mut per_run = std::collections::BTreeMap::<String, usize>::new();
    for r in &rows {
        let f: Vec<&str> = r.split(',').collect();
        let block: u32 = f[2].parse().unwrap();
        *per_run.entry(format!("b{block:03}-{}", f[0])).or_default() += 1;
    }
    let planned: std::collections::BTreeMap<String, usize> = (1..=blocks)
        .flat_map(|b| ["baseline", "v1"].map(|arm| (format!("b{b:03}-{arm}"), 3)))
        .collect();
    assert_eq!(per_run, planned, "{samples}");
}

#[test]
fn the_daemon_runs_a_slurm_experiment_to_a_decision() {
    require_slurm();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(dir.path(), &experiment("slurm-daemon", "0.2"));
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();

    let s = wait_until(&home, &id, "a decision", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    assert_eq!(s["scheduler"], "slurm");
    assert_eq!(s["decisions"][0]["decision"], "accept", "{s:#}");
    check_jobs_once(&s, 5);
    check_runs_once(Path::new(s["root"].as_str().unwrap()), 5);
    // Each job probed its compute node first.
    let root = PathBuf::from(s["root"].as_str().unwrap());
    let probes = std::fs::read_dir(root.join("jobs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().join("probe.json").exists())
        .count();
    assert_eq!(probes, 5);

    let o = cli(&home, &["gate", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let o = cli(&home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["variants"][0]["n_variant"], 5);
    assert_eq!(report["provenance"]["scheduler"], "slurm");
}

#[test]
fn a_daemon_killed_while_its_slurm_jobs_are_queued_finishes_without_duplicates() {
    require_slurm();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    // Runs of 1.5 s keep jobs queued and running for a while after submission (the daemon
    // polls every second).
    let exp = write_experiment(dir.path(), &experiment("slurm-kill", "1.5"));
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();
    // The daemon `submit` started, recorded now so that only it is signalled below.
    let daemon = CheckedProcess::daemon_of(&home);

    // As soon as Slurm itself shows one of the experiment's jobs PENDING (queued behind
    // the others on the one node) and the daemon's status says so too (B8: it said only
    // "submitted" until a job ended), kill the daemon hard.
    wait_until(&home, &id, "a job Slurm and status show as pending", |s| {
        let status_says_pending = s["jobs"].as_array().is_some_and(|j| {
            j.iter()
                .any(|j| j["state"] == "submitted" && j["scheduler_state"] == "pending")
        });
        let ids: Vec<&str> = s["jobs"]
            .as_array()
            .map(|j| {
                j.iter()
                    .filter_map(|j| j["scheduler_job_id"].as_str())
                    .collect()
            })
            .unwrap_or_default();
        status_says_pending && slurm_states(&ids).iter().any(|st| st == "PENDING")
    });
    assert!(
        daemon.signal(nix::sys::signal::Signal::SIGKILL),
        "the daemon {daemon:?} is gone before the kill"
    );
    daemon.wait_gone("the killed daemon to end");

    let o = cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = wait_until(&home, &id, "a decision after the restart", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    check_jobs_once(&s, 5);
    check_runs_once(Path::new(s["root"].as_str().unwrap()), 5);
}

/// A job lost mid-way is resubmitted by the engine (`jobplan::outcomes` puts its unfinished
/// runs back to pending, `plan_jobs` names the new job for its attempt): `scancel` of one
/// of the experiment's jobs (found by its name) while one of its runs is in progress and
/// its last run has not finished. The experiment must still be decided, with exactly one
/// retry of that block, named `og-<id>-b<block>+r2`, every planned run counted exactly
/// once and no manifest left non-final.
#[test]
fn a_job_cancelled_mid_way_is_resubmitted_once_and_every_run_counted_once() {
    require_slurm();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let exp = write_experiment(
        dir.path(),
        &two_arm_experiment("slurm-lost", "slurm", "1.5", ", max_resubmits: 1"),
    );
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();

    // A first-attempt job of this experiment whose first run has started and whose last
    // run has no manifest yet: cancel it by its name (unique: `og-<id>-b<block>`).
    let (block, name) = wait_for(
        "a job of the experiment with a run in progress",
        DEADLINE,
        || {
            let s = status(&home, &id);
            let runs = PathBuf::from(s["root"].as_str()?).join("runs");
            let busy = s["jobs"].as_array()?.iter().find(|j| {
                let ids: Vec<&str> = j["run_ids"]
                    .as_array()
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                j["attempt"] == 1
                    && j["scheduler_job_id"].is_string()
                    && ids
                        .first()
                        .is_some_and(|r| runs.join(r).join("stdout").exists())
                    && ids
                        .last()
                        .is_some_and(|r| !runs.join(r).join("manifest.json").exists())
            })?;
            let name = busy["name"].as_str()?.to_string();
            let block = busy["block"].as_u64()?;
            assert_eq!(name, format!("og-{id}-b{block:03}"), "{busy}");
            // Slurm's own record of that job: ours by name, still running.
            let o = std::process::Command::new("squeue")
                .args(["-h", "-o", "%j %T", "-n", &name])
                .output()
                .unwrap();
            let listed = String::from_utf8_lossy(&o.stdout).trim().to_string();
            (listed == format!("{name} RUNNING")).then_some((block, name))
        },
    );
    let o = std::process::Command::new("scancel")
        .args(["-n", &name])
        .output()
        .unwrap();
    assert!(o.status.success(), "scancel: {}", stderr(&o));

    let s = wait_until(&home, &id, "a decision after the lost job", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    let jobs = s["jobs"].as_array().unwrap();
    let first = jobs.iter().find(|j| j["name"] == name.as_str()).unwrap();
    let detail = first["detail"].as_str().unwrap_or("");
    assert!(detail.contains("cancelled"), "{first}\n{s:#}");
    let retries: Vec<&Value> = jobs.iter().filter(|j| j["attempt"] != 1).collect();
    assert_eq!(retries.len(), 1, "resubmitted once: {s:#}");
    assert_eq!(retries[0]["block"], block, "{s:#}");
    assert_eq!(retries[0]["attempt"], 2, "{s:#}");
    assert_eq!(retries[0]["name"], format!("{name}+r2"), "{s:#}");
    assert!(retries[0]["scheduler_job_id"].is_string(), "{s:#}");
    assert_eq!(jobs.len(), 6, "five blocks and one retry: {s:#}");
    // Every manifest final (completed), every planned run counted exactly once.
    check_runs_once(Path::new(s["root"].as_str().unwrap()), 5);
}

/// A governor variant on Slurm: its launch line asks `srun --cpu-freq`, its
/// step records the governor actually in force, and on this machine (no cpufreq) the
/// variant ends `not_applicable` with that fact, while the baseline's runs are measured.
#[test]
fn a_governor_variant_on_a_node_without_cpufreq_is_not_applicable() {
    require_slurm();
    assert!(
        !Path::new("/sys/devices/system/cpu/cpu0/cpufreq").exists(),
        "this test expects a node without cpufreq"
    );
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = StopOnDrop(home.clone());
    let yaml = r#"name: slurm-governor
app:
  command: [bash, -c, 'sleep 0.1; for e in 1 2 3; do echo "epoch $e took 1$e.0 s"; done']
  time_limit: 2m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler: { kind: slurm, time_limit: 10m }
replicates: 5
variants:
  - { name: perf, dimension: l3_frequency_power, governor: performance }
"#;
    let exp = write_experiment(dir.path(), yaml);
    let o = cli(&home, &["submit", exp.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = stdout(&o).trim().to_string();

    let s = wait_until(&home, &id, "the end", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    let d = &s["decisions"][0];
    assert_eq!(d["variant"], "perf", "{s:#}");
    assert_eq!(d["decision"], "not_applicable", "{s:#}");
    assert!(
        d["reason"].as_str().unwrap_or("").contains(
            "requested governor performance via srun --cpu-freq, but the compute node has no cpufreq (the step ran under: none)"
        ),
        "{s:#}"
    );
    let root = PathBuf::from(s["root"].as_str().unwrap());
    // The variant's launch line asked Slurm for the governor; the baseline's did not.
    let script = std::fs::read_to_string(root.join(format!("jobs/og-{id}-b001/job.sh"))).unwrap();
    let launch = |arm: &str| {
        script
            .lines()
            .find(|l| l.contains(&format!("runs/b001-{arm}")))
            .unwrap_or_else(|| panic!("no launch line for {arm}:\n{script}"))
            .to_string()
    };
    assert!(
        launch("perf").contains(" -- srun -N 1 -n 1 -c 1 --cpu-freq=performance --export=ALL; "),
        "{script}"
    );
    assert!(!launch("baseline").contains("--cpu-freq"), "{script}");
    // The variant's first block ran, and its step said what it ran under.
    let m: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("runs/b001-perf/manifest.json")).unwrap(),
    )
    .unwrap();
    let host = m["host"].as_str().unwrap().to_string();
    assert_eq!(
        m["step_governors"],
        serde_json::json!({ host: "none" }),
        "{m}"
    );
    // The baseline was measured in every block; the variant's samples are not counted.
    for b in 1..=5 {
        let m: Value = serde_json::from_str(
            &std::fs::read_to_string(root.join(format!("runs/b{b:03}-baseline/manifest.json")))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(m["outcome"], "completed", "{m}");
    }
    let samples = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    let rows = |arm: &str| {
        samples
            .lines()
            .filter(|l| l.starts_with(&format!("{arm},")))
            .count()
    };
    assert_eq!(rows("baseline"), 5 * 3, "{samples}");
    assert_eq!(rows("perf"), 0, "{samples}");
}

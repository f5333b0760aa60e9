//! The daemon's Slurm and Flux paths in the fast tier: submit, poll, cancel, a lost
//! submission found by its name, a job lost with its node resubmitted. The schedulers are
//! the fakes of `tests/fake-schedulers/` (first on the daemon's PATH): they run each job
//! script here at once and answer `squeue`/`sacct`/`flux jobs` from files, so these tests
//! need no Slurm or Flux. Queueing, allocations and real nodes are the cluster tier's
//! (`tests/cluster_slurm/daemon.rs`, `tests/cluster_flux/backend.rs`).

mod support;

// These tests mostly wait on the daemons and runs they start:
// [`support::WAITING_TESTS_PER_CPU`] run at once.
support::waiting_tests_at_once!();

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::*;

const DEADLINE: Duration = Duration::from_secs(300);

/// A fake cluster of one test: its state directory and the daemon's state directory.
struct FakeCluster {
    _dir: tempfile::TempDir,
    state: PathBuf,
    home: PathBuf,
}

impl FakeCluster {
    fn new() -> FakeCluster {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("fake-scheduler");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&state).unwrap();
        FakeCluster {
            state,
            home,
            _dir: dir,
        }
    }

    /// `optgate ARGS` with the fake schedulers first on PATH and a 1 s cluster poll (a daemon
    /// it starts keeps both).
    fn cli(&self, args: &[&str]) -> Output {
        let fakes = repo_root().join("tests/fake-schedulers");
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![fakes];
        dirs.extend(std::env::split_paths(&path));
        optgate()
            .args(args)
            .env("OPTGATE_HOME", &self.home)
            .env("PATH", std::env::join_paths(dirs).unwrap())
            .env("OPTGATE_FAKE_SCHED_DIR", &self.state)
            .output()
            .unwrap()
    }

    /// Submits `yaml` (written beside the state) and returns the experiment's id.
    fn submit(&self, yaml: &str) -> String {
        let exp = write_experiment(self.state.parent().unwrap(), yaml);
        let o = self.cli(&["submit", exp.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o).trim().to_string()
    }

    /// Waits until the experiment's status satisfies `done`.
    fn wait(&self, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_for(what, DEADLINE, || {
            Some(status(&self.home, id)).filter(&done)
        })
    }

    /// The commands the fakes were called with, one line each (`sbatch --parsable job.sh`).
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.state.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    /// The state the fake scheduler recorded for job `id` (RUNNING, COMPLETED, CANCELLED…).
    fn job_state(&self, id: &str) -> String {
        std::fs::read_to_string(self.state.join("jobs").join(id).join("state"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// How many jobs the fake scheduler was given.
    fn jobs_made(&self) -> usize {
        std::fs::read_dir(self.state.join("jobs")).map_or(0, |d| d.count())
    }
}

impl Drop for FakeCluster {
    fn drop(&mut self) {
        let _ = self.cli(&["daemon", "stop"]);
    }
}

fn jobs(s: &Value) -> &Vec<Value> {
    s["jobs"].as_array().unwrap()
}

/// Every planned run completed once, inside the job the fake scheduler ran: the run's
/// manifest carries that job's id (the scheduler's variable reached the run).
fn check_runs_in_their_jobs(s: &Value) {
    let root = Path::new(s["root"].as_str().unwrap());
    for j in jobs(s).iter().filter(|j| j["state"] == "completed") {
        for run in j["run_ids"].as_array().unwrap() {
            let text = std::fs::read_to_string(
                root.join("runs")
                    .join(run.as_str().unwrap())
                    .join("manifest.json"),
            )
            .unwrap();
            let m: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(m["outcome"], "completed", "{m}");
            assert_eq!(m["scheduler_job_id"], j["scheduler_job_id"], "{m}\n{j}");
        }
    }
    let samples = std::fs::read_to_string(root.join("samples.csv")).unwrap();
    assert_eq!(samples.lines().count(), 1 + 2 * 5 * 3, "{samples}");
}

fn decided_through(kind: &str, submit: &str, poll: &str) {
    let c = FakeCluster::new();
    let id = c.submit(&two_arm_experiment(&format!("fake-{kind}"), kind, "0", ""));
    let s = c.wait(&id, "a decision", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    assert_eq!(s["scheduler"], kind);
    assert_eq!(s["decisions"][0]["decision"], "accept", "{s:#}");
    assert_eq!(jobs(&s).len(), 5, "one job per block: {s:#}");
    for j in jobs(&s) {
        assert_eq!(j["attempt"], 1, "{j}");
        let job = j["scheduler_job_id"].as_str().unwrap();
        assert_eq!(c.job_state(job), "COMPLETED", "{j}");
    }
    check_runs_in_their_jobs(&s);
    let calls = c.calls();
    let submits = calls.iter().filter(|l| l.starts_with(submit)).count();
    assert_eq!(submits, 5, "{calls:#?}");
    assert!(calls.iter().any(|l| l.starts_with(poll)), "{calls:#?}");
}

#[test]
fn the_daemon_decides_a_slurm_experiment_through_sbatch_squeue_and_sacct() {
    decided_through("slurm", "sbatch --parsable", "squeue --me -t all");
}

#[test]
fn the_daemon_decides_a_flux_experiment_through_flux_batch_and_flux_jobs() {
    decided_through("flux", "flux batch", "flux jobs");
}

/// `sbatch` times out after slurmctld took the job (the fake's `sbatch-times-out`): the
/// daemon finds the job by its name instead of submitting the block twice.
#[test]
fn a_submission_that_timed_out_is_found_by_its_name_not_made_twice() {
    let c = FakeCluster::new();
    std::fs::write(c.state.join("sbatch-times-out"), "").unwrap();
    let id = c.submit(&two_arm_experiment("fake-lost-submit", "slurm", "1", ""));
    let s = c.wait(&id, "a decision", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    assert!(
        !c.state.join("sbatch-times-out").exists(),
        "the timeout never happened"
    );
    assert_eq!(
        c.jobs_made(),
        5,
        "a block was submitted twice: {:#?}",
        c.calls()
    );
    assert!(jobs(&s).iter().all(|j| j["attempt"] == 1), "{s:#}");
    assert!(
        c.calls().iter().any(|l| l.ends_with("-o %i %j")),
        "no lookup by name: {:#?}",
        c.calls()
    );
    check_runs_in_their_jobs(&s);
}

/// A job whose node is lost at its first launch (Slurm NODE_FAIL, Flux's node-failure
/// exception) is resubmitted once as `+r2`, and every planned run is counted once.
fn lost_job_resubmitted(kind: &str) {
    let c = FakeCluster::new();
    std::fs::write(c.state.join("lose-job-b002"), "").unwrap();
    let id = c.submit(&two_arm_experiment(
        &format!("fake-lost-{kind}"),
        kind,
        "0",
        ", max_resubmits: 1",
    ));
    let s = c.wait(&id, "a decision", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    let lost = jobs(&s)
        .iter()
        .find(|j| j["name"] == format!("og-{id}-b002"))
        .unwrap();
    assert_eq!(
        c.job_state(lost["scheduler_job_id"].as_str().unwrap()),
        "NODE_FAIL"
    );
    let retries: Vec<&Value> = jobs(&s).iter().filter(|j| j["attempt"] != 1).collect();
    assert_eq!(retries.len(), 1, "resubmitted once: {s:#}");
    assert_eq!(retries[0]["name"], format!("og-{id}-b002+r2"), "{s:#}");
    assert_eq!(c.jobs_made(), 6, "{:#?}", c.calls());
    check_runs_in_their_jobs(&s);
}

#[test]
fn a_slurm_job_lost_with_its_node_is_resubmitted_once() {
    lost_job_resubmitted("slurm");
}

#[test]
fn a_flux_job_lost_with_its_node_is_resubmitted_once() {
    lost_job_resubmitted("flux");
}

/// `optgate cancel` of a running Slurm experiment: `scancel` of its jobs, which the fake
/// scheduler then records CANCELLED (their process groups ended).
#[test]
fn cancelling_an_experiment_cancels_its_slurm_jobs() {
    let c = FakeCluster::new();
    let id = c.submit(&two_arm_experiment("fake-cancel", "slurm", "300", ""));
    c.wait(&id, "a job running", |s| {
        jobs(s).iter().any(|j| {
            j["scheduler_job_id"]
                .as_str()
                .is_some_and(|j| c.job_state(j) == "RUNNING")
        })
    });
    let o = c.cli(&["cancel", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = c.wait(&id, "the experiment cancelled", ended);
    assert_eq!(s["state"], "cancelled", "{s:#}");
    // The engine stops the live jobs on its next pass, after the state is recorded: every
    // job leaves `submitting`/`submitted`, those still running by `scancel`.
    let s = c.wait(&id, "every job of the experiment stopped", |s| {
        jobs(s)
            .iter()
            .all(|j| !matches!(j["state"].as_str(), Some("submitting" | "submitted")))
    });
    let cancelled: Vec<&str> = jobs(&s)
        .iter()
        .filter(|j| j["state"] == "cancelled")
        .filter_map(|j| j["scheduler_job_id"].as_str())
        .collect();
    assert!(!cancelled.is_empty(), "{s:#}");
    for job in cancelled {
        assert_eq!(c.job_state(job), "CANCELLED", "job {job}: {:#?}", c.calls());
    }
    assert_eq!(c.jobs_made(), jobs(&s).len(), "{s:#}");
    assert!(
        c.calls().iter().any(|l| l.starts_with("scancel --quiet")),
        "{:#?}",
        c.calls()
    );
}

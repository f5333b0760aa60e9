//! The Slurm backend against a real Slurm: the one-node cluster that
//! `schedulers/slurm/setup-one-node.sh` installs and starts (CI runs it as root first).
//! Jobs are planned as the engine plans them (`support::first_block_jobs`) from small
//! experiments whose app is a bash one-liner printing epoch lines; they run the real
//! `optgate exec-run` on the node, so every check reads what the runs left on disk:
//! manifests, outputs, the job directory.
//!
//! Without Slurm these tests FAIL with instructions; they never pass by skipping.
//!
//! Every backend here starts from an environment holding `SBATCH_PARTITION` and
//! `SBATCH_TIMELIMIT` values that would break or change every submission: each job that
//! runs proves those variables were cleared.

use crate::support;
use support::*;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use optgate_evidence::{Layout, RunStatus};
use optgate_experiment::{Experiment, Plan};
use optgate_sched::batch::{JOB_ID_FILE, JOB_SCRIPT, PROBE_FILE};
use optgate_sched::slurm::{SlurmBackend, render_script};
use optgate_sched::{JobId, JobSpec, JobState, Scheduler};
use optgate_wrapper::manifest::{Outcome, RunManifest};

/// A backend whose commands start from this process's environment plus variables that
/// would change every job if they reached `sbatch`.
fn backend() -> SlurmBackend {
    backend_from(std::env::vars_os().collect())
}

/// [`backend`] on the two-node cluster (`slurm.conf` of [`crate::multinode`]): a test
/// that holds its node for a minute runs there, beside the one-node cluster's tests
/// instead of ahead of them in its queue.
fn backend_on_two_nodes() -> SlurmBackend {
    let (conf, _) = crate::multinode::two_node_cluster();
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    env.insert("SLURM_CONF".into(), conf.into());
    backend_from(env)
}

fn backend_from(mut env: BTreeMap<OsString, OsString>) -> SlurmBackend {
    env.insert("SBATCH_PARTITION".into(), "no-such-partition".into());
    env.insert("SBATCH_TIMELIMIT".into(), "1".into());
    env.insert("SQUEUE_FORMAT".into(), "%all".into());
    SlurmBackend::new().with_base_env(env)
}

/// Cancels the jobs it holds when a test ends, passed or failed, so nothing lingers.
struct CancelOnDrop<'a>(&'a SlurmBackend, Vec<JobId>);

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.cancel(&self.1);
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    exp: Experiment,
    plan: Plan,
    layout: Layout,
    jobs: Vec<JobSpec>,
}

/// Loads `yaml`, plans it into a fresh directory, and makes block 1's jobs. The experiment
/// id carries the test's tag and this process's id so job names never clash.
fn setup(tag: &str, yaml: &str) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let path = support::write_experiment(tmp.path(), yaml);
    setup_from(tmp, &path, tag)
}

fn setup_from(tmp: tempfile::TempDir, path: &Path, tag: &str) -> Setup {
    let exp = optgate_experiment::load(path)
        .unwrap_or_else(|e| panic!("{e}"))
        .experiment;
    let plan = Plan::for_experiment(&exp);
    let layout = Layout::new(tmp.path().join("exec"));
    optgate_evidence::root::prepare(&exp, &plan, &layout).unwrap();
    let id = format!("{tag}{}", std::process::id());
    let jobs = support::first_block_jobs(&exp, &plan, &layout, &id);
    Setup {
        _tmp: tmp,
        exp,
        plan,
        layout,
        jobs,
    }
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

const HOSTILE_BASE: &str =
    "it's \"quoted\" $HOME `touch /tmp/og-pwned` $(id) a  b\nsecond line\ttab \\ end\n";
const HOSTILE_TWO: &str = "'; exit 9; echo '$PATH' && $((1+1)) * ~ \u{e9}\n\n";

/// A two-arm block whose app records what it saw: the hostile value, the CPUs per task its
/// `srun` step was given, and the job id.
fn recording_experiment(name: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'printf "%s" "$HOSTILE" > hostile.out; printf "%s" "$SLURM_CPUS_PER_TASK" > cpus.out; printf "%s" "$SLURM_JOB_ID" > jobid.out; for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done']
  time_limit: 5m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: slurm
  cpus_per_task: 1
  time_limit: 10m
replicates: 5
baseline:
  env: {{ HOSTILE: {base} }}
variants:
  - name: two
    dimension: l2_threading_model
    launcher: {{ cpus_per_task: 2 }}
    env: {{ OMP_NUM_THREADS: "2", HOSTILE: {two} }}
"#,
        base = yaml_str(HOSTILE_BASE),
        two = yaml_str(HOSTILE_TWO)
    )
}

#[test]
fn a_block_runs_every_arm_in_order_on_one_allocation_with_its_own_launch_line() {
    require_slurm();
    let s = setup("blk", &recording_experiment("slurm-e2e"));
    assert_eq!(s.jobs.len(), 1, "blocked design: one job per block");
    let job = &s.jobs[0];
    assert_eq!(job.runs.len(), 2);
    assert_eq!(job.cpus_per_task, 2, "the allocation fits the largest arm");
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);

    // Idempotency: the job is found by its name.
    let found = b.find_by_name(std::slice::from_ref(&job.name)).unwrap();
    assert_eq!(found.get(&job.name), Some(&id));

    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    assert_eq!(end, JobState::Completed);

    let mut ends = Vec::new();
    for run in &job.runs {
        let m = run_manifest(&run.run_dir);
        assert_eq!(m.outcome, Outcome::Completed, "{}", run.run_id);
        assert_eq!(m.scheduler_job_id.as_deref(), Some(id.0.as_str()));
        let want = if run.arm == "two" {
            (HOSTILE_TWO, "2")
        } else {
            (HOSTILE_BASE, "1")
        };
        // The value reached the app's environment byte for byte, through sbatch, exec-run
        // and `srun --export=ALL`.
        let got = std::fs::read(run.run_dir.join("hostile.out")).unwrap();
        assert_eq!(got, want.0.as_bytes(), "{}", run.run_id);
        assert_eq!(m.environment["HOSTILE"], want.0);
        // Each arm's launch line asked for its own CPUs per task (`srun -c`).
        let cpus = std::fs::read_to_string(run.run_dir.join("cpus.out")).unwrap();
        assert_eq!(cpus, want.1, "{}", run.run_id);
        let jid = std::fs::read_to_string(run.run_dir.join("jobid.out")).unwrap();
        assert_eq!(jid, id.0, "every run ran inside the same allocation");
        let out = std::fs::read_to_string(run.run_dir.join("stdout")).unwrap();
        assert!(out.contains("epoch 3 took 0.03 s"), "{out}");
        ends.push((m.started_at, m.ended_at));
    }
    // Back to back, in the block's recorded order.
    assert!(
        ends[0].1 <= ends[1].0,
        "runs overlapped or ran out of order: {ends:?}"
    );
    assert_eq!(
        job.runs.iter().map(|r| r.arm.clone()).collect::<Vec<_>>(),
        s.plan.blocks[0].order
    );
    assert!(
        !Path::new("/tmp/og-pwned").exists(),
        "a hostile value was executed"
    );

    // The job directory holds exactly the script that was submitted, the id, the probe
    // output and the job's own output.
    assert_eq!(
        std::fs::read_to_string(job.dir.join(JOB_SCRIPT)).unwrap(),
        render_script(job).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(job.dir.join(JOB_ID_FILE)).unwrap(),
        format!("{id}\n")
    );
    assert!(job.dir.join(PROBE_FILE).exists());
    assert!(job.dir.join(format!("slurm-{id}.out")).exists());

    // Nothing left to run again; the runs collect into samples like local runs do.
    assert_eq!(support::runs_left_to_run(job), Vec::<String>::new());
    let collected = optgate_evidence::collect(&s.exp, &s.plan, &s.layout, &BTreeMap::new());
    let done: Vec<_> = collected
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Complete)
        .collect();
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|r| r.epochs.len() == 3));
}

/// An app that prints its first epoch, then waits far longer than any test.
fn sleeping_experiment(name: &str, allocation: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'echo "epoch 1 took 0.01 s"; sleep 900; echo "epoch 2 took 0.01 s"']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: slurm
  time_limit: {allocation}
replicates: 5
variants:
  - {{ name: v, dimension: l2_threading_model, env: {{ X: "1" }} }}
"#
    )
}

#[test]
fn a_job_cancelled_mid_way_keeps_nothing_false_and_leaves_the_rest_to_run_again() {
    require_slurm();
    let s = setup("cxl", &sleeping_experiment("slurm-cancel", "10m"));
    let job = &s.jobs[0];
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    // Mid-way: the first run has started and printed its first epoch (into its attempt's
    // own output file while it runs).
    let first = &job.runs[0];
    let live = first.run_dir.join(optgate_wrapper::run::attempt_file(
        optgate_wrapper::run::STDOUT_FILE,
        1,
    ));
    wait_for_job(&b, &id, "running", |st| *st == JobState::Running);
    wait_for_file(&live);
    let give_up = Instant::now() + Duration::from_secs(300);
    while !std::fs::read_to_string(&live)
        .unwrap_or_default()
        .contains("epoch 1")
    {
        assert!(Instant::now() < give_up, "the first run never printed");
        std::thread::sleep(Duration::from_millis(200));
    }
    b.cancel(std::slice::from_ref(&id)).unwrap();
    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    assert_eq!(end, JobState::Cancelled);

    // The run in progress says it was interrupted (so it is never counted); the one that
    // never started has no manifest. Neither outcome is final, so the engine puts both
    // back to pending for the block's next attempt (`og-…+r2`, tested through the daemon).
    // (The job may be gone from the queue before the run has written its manifest.)
    assert_eq!(
        run_manifest(&job.runs[0].run_dir).outcome,
        Outcome::Interrupted
    );
    let ids: Vec<String> = job.runs.iter().map(|r| r.run_id.clone()).collect();
    assert_eq!(
        support::run_outcomes(job),
        [
            (ids[0].clone(), Some(Outcome::Interrupted)),
            (ids[1].clone(), None)
        ]
    );
    assert_eq!(support::runs_left_to_run(job), ids);
}

#[test]
fn a_job_past_its_time_limit_times_out_and_leaves_its_unfinished_runs_to_run_again() {
    require_slurm();
    // A one-minute allocation (Slurm's shortest); the app sleeps for fifteen.
    let s = setup("tmo", &sleeping_experiment("slurm-timeout", "1m"));
    let job = &s.jobs[0];
    assert_eq!(job.time_limit, Duration::from_secs(60));
    let b = backend_on_two_nodes();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    assert_eq!(end, JobState::Timeout);
    // Slurm's SIGTERM reached exec-run, which stopped the run and said so.
    assert_eq!(
        run_manifest(&job.runs[0].run_dir).outcome,
        Outcome::Interrupted
    );
    assert!(RunManifest::read(&job.runs[1].run_dir).unwrap().is_none());
    assert_eq!(
        support::runs_left_to_run(job),
        job.runs
            .iter()
            .map(|r| r.run_id.clone())
            .collect::<Vec<_>>(),
        "both runs must run again"
    );
}

#[test]
fn an_app_that_exits_non_zero_fails_its_run_not_the_rest_of_the_block() {
    require_slurm();
    let yaml = r#"name: slurm-fail
app:
  command: [bash, -c, 'echo "epoch 1 took 0.01 s"; if [ "$OPTGATE_ARM" = baseline ]; then echo broken >&2; exit 3; fi']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: slurm
  time_limit: 10m
replicates: 5
variants:
  - { name: v, dimension: l2_threading_model, env: { X: "1" } }
"#;
    let s = setup("fail", yaml);
    let job = &s.jobs[0];
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    // The job says something failed; the manifests say what.
    assert!(matches!(end, JobState::Failed(_)), "{end:?}");
    for run in &job.runs {
        let m = run_manifest(&run.run_dir);
        if run.arm == "baseline" {
            assert_eq!(m.outcome, Outcome::Failed);
            assert_eq!(m.exit_code, Some(3));
            let err = std::fs::read_to_string(run.run_dir.join("stderr")).unwrap();
            assert!(err.contains("broken"), "{err}");
        } else {
            assert_eq!(m.outcome, Outcome::Completed, "the block went on");
        }
    }
    // A failed run is data, not something to run again.
    assert_eq!(support::runs_left_to_run(job), Vec::<String>::new());
}

#[test]
fn independent_design_is_one_job_per_run_polled_in_one_query() {
    require_slurm();
    let yaml = r#"name: slurm-indep
app:
  command: [bash, -c, 'echo "epoch 1 took 0.01 s"']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: slurm
  time_limit: 10m
design: independent
replicates: 5
variants:
  - { name: v, dimension: l2_threading_model, env: { X: "1" } }
"#;
    let s = setup("ind", yaml);
    assert_eq!(s.jobs.len(), 2, "one job per run");
    let b = backend();
    let ids: Vec<JobId> = s.jobs.iter().map(|j| b.submit(j).unwrap()).collect();
    let _guard = CancelOnDrop(&b, ids.clone());
    let give_up = Instant::now() + Duration::from_secs(600);
    let states = loop {
        let states = b.poll(&ids).unwrap();
        assert_eq!(states.len(), 2);
        if states.values().all(JobState::is_finished) {
            break states;
        }
        assert!(Instant::now() < give_up, "{states:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        states.values().all(|s| *s == JobState::Completed),
        "{states:?}"
    );
    for job in &s.jobs {
        assert_eq!(
            run_manifest(&job.runs[0].run_dir).outcome,
            Outcome::Completed
        );
    }
}

#[test]
fn the_slurm_quickstart_runs_a_block_on_this_cluster() {
    require_slurm();
    let tmp = tempfile::tempdir().unwrap();
    let path: PathBuf = support::repo_root().join("experiments/quickstart-slurm.yaml");
    let s = setup_from(tmp, &path, "qs");
    // Builds happen on the login node before anything is submitted.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for build in &s.exp.builds {
        let record = runtime
            .block_on(optgate_sched::prepare::execute_build(
                &s.exp,
                build,
                &s.layout.build_dir(&build.id),
                &tokio_util::sync::CancellationToken::new(),
            ))
            .unwrap();
        assert!(record.succeeded, "build {} failed", build.id);
    }
    let job = &s.jobs[0];
    assert_eq!(job.runs.len(), 4);
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    assert_eq!(end, JobState::Completed);
    let collected = optgate_evidence::collect(&s.exp, &s.plan, &s.layout, &BTreeMap::new());
    let block1: Vec<_> = collected.runs.iter().filter(|r| r.block == 1).collect();
    assert_eq!(block1.len(), 4);
    for r in block1 {
        assert_eq!(r.status, RunStatus::Complete, "{}", r.id);
        assert_eq!(r.epochs.len(), 5, "{}", r.id);
    }
}

//! The Flux backend and the daemon against a real Flux: the one-node flux-core 0.88.0
//! instance that `schedulers/flux/setup-one-node.sh` builds and starts (`tests/run-all.sh`
//! runs it and exports its `FLUX_URI`). Jobs are planned as the engine plans them
//! (`support::first_block_jobs`) from small experiments whose app is a bash one-liner
//! printing epoch lines; they run the real `optgate exec-run` inside real `flux batch` jobs,
//! so every check reads what the runs left on disk: manifests, outputs, the job directory,
//! `probe.json`.
//!
//! Without a reachable Flux these tests FAIL with instructions; they never pass by skipping.
//!
//! The backends here start from an environment in which Flux prints its ids in ASCII
//! (`FLUX_F58_FORCE_ASCII`) under the C locale: each submission that works proves those
//! answers are read as well as the default ones.

use crate::support;
use support::*;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use optgate_evidence::{Layout, RunStatus};
use optgate_experiment::{Experiment, Plan};
use optgate_sched::batch::{JOB_ID_FILE, JOB_SCRIPT, PROBE_FILE};
use optgate_sched::flux::{FluxBackend, f58_encode, render_script};
use optgate_sched::{JobId, JobSpec, JobState, Scheduler};
use optgate_wrapper::manifest::{Outcome, RunManifest};

/// A guard against hanging forever; nothing is asserted about how long anything took.
const DEADLINE: Duration = Duration::from_secs(600);

/// The cores of the instance (one node; 2 on the test machines): `flux resource info`
/// says `1 Nodes, 2 Cores, 0 GPUs`, whatever is running.
fn node_cores() -> u32 {
    let out = Command::new("flux")
        .args(["resource", "info"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split(',')
        .find_map(|part| part.trim().strip_suffix(" Cores")?.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the cores from `flux resource info`: {text:?}"))
}

/// A backend whose commands start from this process's environment plus ASCII ids and the
/// C locale.
fn backend() -> FluxBackend {
    let mut env: BTreeMap<OsString, OsString> = std::env::vars_os().collect();
    env.insert("FLUX_F58_FORCE_ASCII".into(), "1".into());
    env.insert("LC_ALL".into(), "C".into());
    FluxBackend::new().with_base_env(env)
}

/// Cancels the jobs it holds when a test ends, passed or failed, so nothing lingers.
struct CancelOnDrop<'a>(&'a FluxBackend, Vec<JobId>);

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
    let exp = optgate_experiment::load(&path)
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

/// Waits until the first run of `job` has printed its first epoch (into its attempt's own
/// output file while it runs).
fn wait_for_first_epoch(job: &JobSpec) {
    let stdout: PathBuf = job.runs[0].run_dir.join("stdout.attempt-1");
    let give_up = Instant::now() + DEADLINE;
    while !std::fs::read_to_string(&stdout)
        .unwrap_or_default()
        .contains("epoch 1")
    {
        assert!(Instant::now() < give_up, "the first run never printed");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

const HOSTILE_BASE: &str =
    "it's \"quoted\" $HOME `touch /tmp/og-flux-pwned` $(id) a  b\nsecond line\ttab \\ end\n";
const HOSTILE_TWO: &str = "'; exit 9; echo '$PATH' && $((1+1)) * ~ {{id}} \u{e9}\n\n";

/// A two-arm block whose app records what it saw: the hostile value, the cores its
/// `flux run` gave it, and the inner job's id.
fn recording_experiment(name: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'printf "%s" "$HOSTILE" > hostile.out; nproc > cores.out; printf "%s" "${{FLUX_JOB_ID-}}" > task-jobid.out; for e in 1 2 3; do echo "epoch $e took 0.0$e s"; done']
  time_limit: 5m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: flux
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
    require_flux();
    let s = setup("blk", &recording_experiment("flux-e2e"));
    assert_eq!(s.jobs.len(), 1, "blocked design: one job per block");
    let job = &s.jobs[0];
    assert_eq!(job.runs.len(), 2);
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    assert!(id.0.bytes().all(|c| c.is_ascii_digit()), "decimal id: {id}");

    // Idempotency: the job is found by its name.
    let found = b.find_by_name(std::slice::from_ref(&job.name)).unwrap();
    assert_eq!(found.get(&job.name), Some(&id));

    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    assert_eq!(end, JobState::Completed);

    let mut ends = Vec::new();
    for run in &job.runs {
        let m = run_manifest(&run.run_dir);
        assert_eq!(m.outcome, Outcome::Completed, "{}", run.run_id);
        let want = if run.arm == "two" {
            (HOSTILE_TWO, "2")
        } else {
            (HOSTILE_BASE, "1")
        };
        // The value reached the app's environment byte for byte, through `flux batch`,
        // exec-run and `flux run`.
        let got = std::fs::read(run.run_dir.join("hostile.out")).unwrap();
        assert_eq!(got, want.0.as_bytes(), "{}", run.run_id);
        assert_eq!(m.environment["HOSTILE"], want.0);
        // Each arm's launch line asked for its own cores per task (`flux run -c`).
        let cores = std::fs::read_to_string(run.run_dir.join("cores.out")).unwrap();
        assert_eq!(cores.trim(), want.1, "{}", run.run_id);
        // The app ran as a task of an inner `flux run` job, which has its own id.
        let task_id = std::fs::read_to_string(run.run_dir.join("task-jobid.out")).unwrap();
        assert!(
            task_id.starts_with('ƒ') || task_id.starts_with('f'),
            "{task_id:?}"
        );
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
        !Path::new("/tmp/og-flux-pwned").exists(),
        "a hostile value was executed"
    );

    // The job directory holds exactly the script that was submitted, the id, the probe
    // output and the job's own output, named by the F58 id (Flux writes `ƒ` there even when
    // the submitter asked for ASCII).
    assert_eq!(
        std::fs::read_to_string(job.dir.join(JOB_SCRIPT)).unwrap(),
        render_script(job).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(job.dir.join(JOB_ID_FILE)).unwrap(),
        format!("{id}\n")
    );
    assert!(job.dir.join(PROBE_FILE).exists());
    let n: u64 = id.0.parse().unwrap();
    assert!(
        job.dir
            .join(format!("flux-{}.out", f58_encode(n, false)))
            .exists()
            || job
                .dir
                .join(format!("flux-{}.out", f58_encode(n, true)))
                .exists()
    );

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

/// a `flux batch` script has no `FLUX_JOB_ID`, only `FLUX_ENCLOSING_ID`
/// (F58). The manifests and the probe must still name the job, in the decimal form the
/// submission recorded.
#[test]
fn the_batch_jobs_id_reaches_manifests_and_probe_from_flux_enclosing_id() {
    require_flux();
    let s = setup("eid", &sleeping_experiment("flux-enclosing", "0", "10m"));
    let job = &s.jobs[0];
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    assert_eq!(
        wait_for_job(&b, &id, "finished", JobState::is_finished),
        JobState::Completed
    );
    for run in &job.runs {
        let m = run_manifest(&run.run_dir);
        assert_eq!(m.outcome, Outcome::Completed);
        assert_eq!(
            m.scheduler_job_id.as_deref(),
            Some(id.0.as_str()),
            "{}: the manifest does not name the Flux job",
            run.run_id
        );
    }
    let probe: Value =
        serde_json::from_str(&std::fs::read_to_string(job.dir.join(PROBE_FILE)).unwrap()).unwrap();
    let alloc = &probe["allocation"];
    assert_eq!(alloc["scheduler"], "flux", "{alloc:#}");
    assert_eq!(alloc["job_id"], id.0.as_str(), "{alloc:#}");
    assert!(
        alloc["env"]["FLUX_JOB_ID"].is_null(),
        "Flux now sets FLUX_JOB_ID in batch scripts; this test no longer covers item 3"
    );
}

/// a 2-task × 1-core baseline and a 1-task × 2-core variant each need two
/// cores; the allocation must ask for two, not 2 × 2 = 4 (which a 2-core node refuses).
#[test]
fn an_allocation_is_sized_by_the_largest_arm_not_by_separate_maxima() {
    require_flux();
    let cores = node_cores();
    assert!(cores >= 2, "this test needs a node with 2 cores or more");
    let yaml = format!(
        r#"name: flux-shape
app:
  command: [bash, -c, 'echo "epoch 1 took 0.01 s"']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: flux
  tasks_per_node: {cores}
  cpus_per_task: 1
  time_limit: 10m
replicates: 5
variants:
  - name: wide
    dimension: l2_threading_model
    launcher: {{ tasks_per_node: 1, cpus_per_task: {cores} }}
    env: {{ X: "1" }}
"#
    );
    let s = setup("shp", &yaml);
    let job = &s.jobs[0];
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    assert_eq!(end, JobState::Completed, "{}", render_script(job).unwrap());
    for run in &job.runs {
        assert_eq!(run_manifest(&run.run_dir).outcome, Outcome::Completed);
    }
}

/// An app that prints its first epoch, then sleeps `sleep` seconds, then its second.
fn sleeping_experiment(name: &str, sleep: &str, allocation: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'echo "epoch 1 took 0.01 s"; sleep {sleep}; echo "epoch 2 took 0.01 s"']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: flux
  time_limit: {allocation}
replicates: 5
variants:
  - {{ name: v, dimension: l2_threading_model, env: {{ X: "1" }} }}
"#
    )
}

#[test]
fn a_job_cancelled_mid_way_keeps_nothing_false_and_leaves_the_rest_to_run_again() {
    require_flux();
    let s = setup("cxl", &sleeping_experiment("flux-cancel", "900", "10m"));
    let job = &s.jobs[0];
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    wait_for_first_epoch(job);
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
    // Cancelling an inactive job again is not an error.
    b.cancel(std::slice::from_ref(&id)).unwrap();
}

#[test]
fn a_pending_job_cancelled_never_runs() {
    require_flux();
    // Urgency 0 holds the job: it stays pending until cancelled, whatever else runs.
    let yaml = sleeping_experiment("flux-held", "0", "10m").replace(
        "  time_limit: 10m\n",
        "  time_limit: 10m\n  extra_directives: ['--urgency=0']\n",
    );
    let s = setup("pnd", &yaml);
    let job = &s.jobs[0];
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    assert_eq!(
        wait_for_job(&b, &id, "pending", |st| *st != JobState::Unknown),
        JobState::Pending
    );
    b.cancel(std::slice::from_ref(&id)).unwrap();
    assert_eq!(
        wait_for_job(&b, &id, "finished", JobState::is_finished),
        JobState::Cancelled
    );
    for run in &job.runs {
        assert!(RunManifest::read(&run.run_dir).unwrap().is_none());
    }
    assert_eq!(
        support::run_outcomes(job)
            .iter()
            .filter(|(_, o)| o.is_none())
            .count(),
        2
    );
    assert!(!job.dir.join(PROBE_FILE).exists(), "a held job started");
}

/// at its time limit Flux sends SIGALRM, then SIGHUP, then SIGKILL (not
/// SIGTERM). exec-run must stop the app and say `interrupted`, so both runs run again.
#[test]
fn a_job_past_its_time_limit_times_out_and_leaves_its_unfinished_runs_to_run_again() {
    require_flux();
    // A 10-second allocation (time for the batch instance and the first run to start); the app sleeps for fifteen minutes.
    let s = setup("tmo", &sleeping_experiment("flux-timeout", "900", "10s"));
    let job = &s.jobs[0];
    assert_eq!(job.time_limit, Duration::from_secs(10));
    let b = backend();
    let id = b.submit(job).unwrap();
    let _guard = CancelOnDrop(&b, vec![id.clone()]);
    let end = wait_for_job(&b, &id, "finished", JobState::is_finished);
    assert_eq!(end, JobState::Timeout);
    let m = run_manifest(&job.runs[0].run_dir);
    assert_eq!(m.outcome, Outcome::Interrupted, "{m:?}");
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
    require_flux();
    let yaml = r#"name: flux-fail
app:
  command: [bash, -c, 'echo "epoch 1 took 0.01 s"; if [ "$OPTGATE_ARM" = baseline ]; then echo broken >&2; exit 3; fi']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: flux
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
    assert_eq!(end, JobState::Failed("exit code 1".into()));
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
    require_flux();
    let yaml = r#"name: flux-indep
app:
  command: [bash, -c, 'echo "epoch 1 took 0.01 s"']
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler:
  kind: flux
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
    let give_up = Instant::now() + DEADLINE;
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

/// Ids Flux never knew (or forgot): `flux jobs` exits 1 and reports each on stderr; that is
/// an answer (`Unknown`), not a failed poll.
#[test]
fn ids_flux_does_not_know_are_unknown_even_when_all_are() {
    require_flux();
    let b = backend();
    let ids = [JobId("1".into()), JobId("2".into())];
    let states = b.poll(&ids).unwrap();
    assert_eq!(states.len(), 2);
    assert!(
        states.values().all(|s| *s == JobState::Unknown),
        "{states:?}"
    );
}

/// Flux has no `--constraint` (its option is `--requires`); validate says
/// so with the entry's place instead of letting `flux batch` fail on the compute side.
#[test]
fn validate_refuses_directives_the_backend_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let flux = sleeping_experiment("flux-directive", "0", "10m").replace(
        "  time_limit: 10m\n",
        "  time_limit: 10m\n  extra_directives: ['--setattr=user.x=1', '--constraint=cpu']\n",
    );
    let line = 1 + flux
        .lines()
        .position(|l| l.contains("--constraint"))
        .unwrap();
    let path = support::write_experiment(dir.path(), &flux);
    let o = support::run(&["validate", path.to_str().unwrap()]);
    let err = support::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--constraint"), "{err}");
    assert!(err.contains("--requires"), "{err}");
    assert!(
        err.contains(&format!("{}:{line}:", path.display())),
        "no file:line:col: {err}"
    );
    assert!(
        !err.contains("--setattr"),
        "a known option was refused: {err}"
    );

    // The same option is Slurm's own.
    let slurm = flux
        .replace("kind: flux", "kind: slurm")
        .replace("'--setattr=user.x=1', ", "");
    let path = support::write_experiment(dir.path(), &slurm);
    let o = support::run(&["validate", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
}

// ----- the daemon on Flux ---------------------------------------------------------------

/// Two arms on Flux; the variant is ~30 % faster in every block, so it must be accepted.
fn daemon_experiment(name: &str, sleep: &str, extra: &str) -> String {
    format!(
        r#"name: {name}
app:
  command: [bash, -c, 'sleep {sleep}; if [ "${{X:-0}}" = 1 ]; then b=$((700 + OPTGATE_BLOCK * 7)); else b=$((1000 + OPTGATE_BLOCK * 3)); fi; for e in 1 2 3; do echo "epoch $e took $((b + e * 11)).0 s"; done']
  time_limit: 2m
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler: {{ kind: flux, time_limit: 10m{extra} }}
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: {{ X: "1" }}
"#
    )
}

/// `flux jobs` states of these (decimal) ids; ids Flux does not know are left out.
fn flux_states(ids: &[&str]) -> Vec<String> {
    let mut args = vec!["jobs", "-n", "-o", "{state}"];
    args.extend_from_slice(ids);
    let o = Command::new("flux").args(&args).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

fn job_ids(s: &Value) -> Vec<String> {
    s["jobs"]
        .as_array()
        .map(|j| {
            j.iter()
                .filter_map(|j| j["scheduler_job_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Every job of the experiment: one per block, first attempt, a Flux id, submitted once.
fn check_jobs_once(s: &Value, blocks: usize) {
    let jobs = s["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), blocks, "{s:#}");
    let mut seen = std::collections::BTreeSet::new();
    for j in jobs {
        assert_eq!(j["attempt"], 1, "resubmitted: {j}");
        let id = j["scheduler_job_id"].as_str().unwrap();
        assert!(id.parse::<u64>().is_ok(), "not a decimal Flux id: {id}");
        assert!(
            seen.insert(j["block"].as_u64().unwrap()),
            "block twice: {s:#}"
        );
    }
}

/// Every planned run has exactly one completed manifest, naming its Flux job; every sample
/// is counted once.
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
}

#[test]
fn the_daemon_runs_a_flux_experiment_to_a_decision() {
    require_flux();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    let exp = support::write_experiment(dir.path(), &daemon_experiment("flux-daemon", "0.2", ""));
    let id = submit(&home, &exp);

    let s = wait_until(&home, &id, "a decision", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    assert_eq!(s["scheduler"], "flux");
    assert_eq!(s["decisions"][0]["decision"], "accept", "{s:#}");
    check_jobs_once(&s, 5);
    let root = PathBuf::from(s["root"].as_str().unwrap());
    check_runs_once(&root, 5);
    // Each job probed its node first, and the probe names the job.
    for j in s["jobs"].as_array().unwrap() {
        let probe: Value = serde_json::from_str(
            &std::fs::read_to_string(
                root.join("jobs")
                    .join(j["name"].as_str().unwrap())
                    .join(PROBE_FILE),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(probe["allocation"]["job_id"], j["scheduler_job_id"], "{j}");
    }

    let o = support::cli(&home, &["gate", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stdout(&o));
    let o = support::cli(&home, &["report", &id, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["variants"][0]["n_variant"], 5);
    assert_eq!(report["provenance"]["scheduler"], "flux");
}

#[test]
fn a_daemon_killed_while_its_flux_jobs_are_queued_finishes_without_duplicates() {
    require_flux();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    // Runs of 1.5 s keep jobs queued and running for a while after submission (the daemon
    // polls every second).
    let exp = support::write_experiment(dir.path(), &daemon_experiment("flux-kill", "1.5", ""));
    let id = submit(&home, &exp);
    // The daemon `submit` started, recorded now so that only it is signalled below.
    let daemon = support::CheckedProcess::daemon_of(&home);

    // As soon as Flux itself shows one of the experiment's jobs waiting (queued behind the
    // others on the one node), kill the daemon hard.
    wait_until(&home, &id, "a job Flux shows as pending", |s| {
        let ids = job_ids(s);
        let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
        !ids.is_empty()
            && flux_states(&ids)
                .iter()
                .any(|st| matches!(st.as_str(), "DEPEND" | "PRIORITY" | "SCHED"))
    });
    assert!(
        daemon.signal(nix::sys::signal::Signal::SIGKILL),
        "the daemon {daemon:?} is gone before the kill"
    );
    daemon.wait_gone("the killed daemon to end");

    let o = support::cli(&home, &["daemon"]);
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let s = wait_until(&home, &id, "a decision after the restart", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    check_jobs_once(&s, 5);
    check_runs_once(Path::new(s["root"].as_str().unwrap()), 5);
}

/// A request no node can grant is accepted by `flux batch`, then ends with exception
/// `alloc`: every block is submitted once, its runs fail at once (resubmitting would ask
/// for the same thing), and the reason Flux gave is in `optgate status --json`.
#[test]
fn an_unsatisfiable_request_fails_at_once_with_flux_alloc_reason_and_no_resubmission() {
    require_flux();
    let too_many = node_cores() * 32;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    // Shared nodes: the request itself must be one no node can grant. (An exclusive job,
    // the blocked default, gets a whole node first and fails inside it instead.)
    let yaml = daemon_experiment("flux-alloc", "0", ", exclusive: false").replace(
        "    env: { X: \"1\" }\n",
        &format!("    launcher: {{ cpus_per_task: {too_many} }}\n    env: {{ X: \"1\" }}\n"),
    );
    let exp = support::write_experiment(dir.path(), &yaml);
    let id = submit(&home, &exp);
    let s = wait_until(&home, &id, "the end", ended);
    assert_ne!(s["state"], "decided", "{s:#}");
    check_jobs_once(&s, 5);
    for j in s["jobs"].as_array().unwrap() {
        let detail = j["detail"].as_str().unwrap_or("");
        assert!(
            detail.contains("alloc") && detail.contains("unsatisfiable"),
            "the Flux reason is not shown: {j}"
        );
    }
    assert_eq!(s["runs"]["completed"], 0, "{s:#}");
}

/// A job lost to a node failure (`flux job raise --type=node-failure`) is resubmitted, at
/// most `max_resubmits` times, and the experiment still reaches its decision.
#[test]
fn a_node_failure_is_lost_and_resubmitted_within_max_resubmits() {
    require_flux();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    let exp = support::write_experiment(
        dir.path(),
        &daemon_experiment("flux-node", "1.5", ", max_resubmits: 1"),
    );
    let id = submit(&home, &exp);

    // Raise a node failure on a job while one of its runs is in progress (its first run
    // has started, its last has no manifest yet), so some of its work must run again.
    let give_up = Instant::now() + DEADLINE;
    let lost = loop {
        let s = support::status(&home, &id);
        let runs = PathBuf::from(s["root"].as_str().unwrap_or("/nonexistent")).join("runs");
        let busy = s["jobs"].as_array().into_iter().flatten().find(|j| {
            let ids: Vec<&str> = j["run_ids"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            j["scheduler_job_id"].is_string()
                && ids
                    .first()
                    .is_some_and(|r| runs.join(r).join("stdout.attempt-1").exists())
                && ids
                    .last()
                    .is_some_and(|r| !runs.join(r).join("manifest.json").exists())
        });
        if let Some(j) = busy.and_then(|j| j["scheduler_job_id"].as_str()) {
            let o = Command::new("flux")
                .args(["job", "raise", "--type=node-failure", "-m", "node died", j])
                .output()
                .unwrap();
            if o.status.success() {
                break j.to_string();
            }
        }
        assert!(Instant::now() < give_up, "no job ever ran: {s:#}");
        std::thread::sleep(Duration::from_millis(200));
    };

    let s = wait_until(&home, &id, "a decision", ended);
    assert_eq!(s["state"], "decided", "{s:#}");
    let jobs = s["jobs"].as_array().unwrap();
    let first = jobs
        .iter()
        .find(|j| j["scheduler_job_id"] == lost.as_str())
        .unwrap();
    let detail = first["detail"].as_str().unwrap_or("");
    assert!(
        detail.contains("lost") && detail.contains("node-failure") && detail.contains("node died"),
        "{first}\n{s:#}"
    );
    let block = first["block"].as_u64().unwrap();
    let again: Vec<&Value> = jobs
        .iter()
        .filter(|j| j["block"].as_u64() == Some(block) && j["attempt"] != 1)
        .collect();
    assert_eq!(again.len(), 1, "resubmitted once: {s:#}");
    assert_eq!(again[0]["attempt"], 2);
    // Named for its attempt (`og-<id>-b<block>+r<attempt>`), so it is found by name too.
    assert!(
        again[0]["name"].as_str().unwrap().ends_with("+r2"),
        "{}",
        again[0]
    );
    assert!(
        jobs.iter().all(|j| j["attempt"].as_u64() <= Some(2)),
        "more than max_resubmits: {s:#}"
    );
    assert_eq!(jobs.len(), 6, "{s:#}");
    check_runs_once(Path::new(s["root"].as_str().unwrap()), 5);
}

/// with no broker to talk to, every `flux` command fails at once. That is
/// not a transient error: the daemon says so in `optgate status` and `daemon stop` is not
/// held up by retries.
#[test]
fn an_unreachable_flux_is_reported_and_does_not_hold_up_daemon_stop() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    let nowhere = format!("local://{}/no-broker/local-0", dir.path().display());
    let exp = support::write_experiment(dir.path(), &daemon_experiment("flux-nowhere", "0", ""));
    // The daemon `submit` starts inherits this FLUX_URI.
    let o = support::optgate()
        .args(["submit", exp.to_str().unwrap()])
        .env("OPTGATE_HOME", &home)
        .env("FLUX_URI", &nowhere)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let id = support::stdout(&o).trim().to_string();

    let start = Instant::now();
    let s = loop {
        let s = support::status(&home, &id);
        let text = s.to_string();
        if text.contains("cannot reach the flux scheduler") {
            break s;
        }
        // Generous: the first submission fails at once; retries may not hold it up.
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the unreachable scheduler is not shown: {s:#}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        s["reason"]
            .as_str()
            .is_some_and(|r| r.contains("Unable to connect to Flux")),
        "{s:#}"
    );
    assert_eq!(s["state"], "running", "{s:#}");

    let mut stop = support::optgate()
        .args(["daemon", "stop"])
        .env("OPTGATE_HOME", &home)
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(st) = stop.try_wait().unwrap() {
            break st;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "`optgate daemon stop` is still waiting"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(status.success(), "daemon stop failed: {status}");
}

/// An unreachable scheduler does not hold an experiment for ever: past
/// the daemon's give-up limit (`OPTGATE_UNREACHABLE_GIVE_UP`, 3 s here; an hour by
/// default) the experiment ends `failed`, quoting the last "cannot reach" error.
#[test]
fn an_experiment_gives_up_on_a_scheduler_unreachable_past_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let _guard = support::StopOnDrop(home.clone());
    let nowhere = format!("local://{}/no-broker/local-0", dir.path().display());
    let exp = support::write_experiment(dir.path(), &daemon_experiment("flux-gone", "0", ""));
    // The daemon `submit` starts inherits both variables.
    let o = support::optgate()
        .args(["submit", exp.to_str().unwrap()])
        .env("OPTGATE_HOME", &home)
        .env("FLUX_URI", &nowhere)
        .env("OPTGATE_UNREACHABLE_GIVE_UP", "3s")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", support::stderr(&o));
    let id = support::stdout(&o).trim().to_string();

    let s = wait_until(&home, &id, "the experiment to end", |s| {
        s["state"] != "running" && s["state"] != "planned" && s["state"] != "building"
    });
    assert_eq!(s["state"], "failed", "{s:#}");
    let reason = s["reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("gave up after 3s without reaching the scheduler")
            && reason.contains("the last error: cannot reach the flux scheduler: ")
            && reason.contains("Unable to connect to Flux"),
        "{s:#}"
    );
    let o = support::optgate()
        .args(["daemon", "stop"])
        .env("OPTGATE_HOME", &home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", support::stderr(&o));
}

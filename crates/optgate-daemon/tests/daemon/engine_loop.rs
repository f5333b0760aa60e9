//! The engine's control loop against an in-process fake scheduler, through the seam the
//! daemon receives its backends by (`Backends::with_factory`): submission, polling, the
//! outcomes of runs, looks and decisions, a refused submission, a lost job resubmitted,
//! a recorded run whose manifest changed before the look run again,
//! and each crash window (an armed failpoint ends the engine's task there; a new engine on
//! the same database repairs what it left).
//! Runs in seconds; the real-scheduler tests (`tests/cluster_slurm/daemon.rs`, `flux_real.rs`)
//! stay as they are.
//!
//! Test double: `FakeScheduler` stands in for Slurm. It "runs" a job by writing what
//! `optgate exec-run` would write on a compute node (each run's stdout and manifest), so
//! the engine sees exactly the files of a real job; what it cannot produce on one node is
//! a scheduler that refuses a job or loses one to a node failure, which it scripts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use optgate_client::StatePaths;
use optgate_client::protocol::{Request, Response, SubmitRequest};
use optgate_daemon::context::{Backends, Daemon, Db};
use optgate_daemon::engine::{EngineSettings, run_with};
use optgate_daemon::handlers;
use optgate_experiment::SchedulerKind;
use optgate_sched::poll::PollSchedule;
use optgate_sched::{JobId, JobSpec, JobState, SchedError, Scheduler};
use optgate_store::{ExperimentState, JobRecordState, NewJob, RunState, Store};
use optgate_wrapper::manifest::{Outcome, RunManifest, fixture_manifest};

/// What the fake does with submissions.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Every job runs and completes.
    Normal,
    /// Every submission is refused, as `sbatch` refuses an unknown partition.
    Refuse,
    /// The first attempt of block 2's job is lost (node failure) before it runs anything.
    LoseBlock2Once,
    /// Every submission fails the way a busy controller fails it (transient).
    Busy,
    /// The first submission goes through but does not return until released: the window
    /// in which a daemon dies after the scheduler took the job and before it was recorded.
    HoldFirstSubmit,
}

#[derive(Default)]
struct FakeState {
    jobs: BTreeMap<String, (JobSpec, JobState, u32)>,
    submitted: Vec<String>,
    lost_once: bool,
    /// Submissions that failed (`Script::Busy`).
    attempts: u32,
}

struct FakeScheduler {
    script: Script,
    state: Mutex<FakeState>,
    released: std::sync::atomic::AtomicBool,
}

impl FakeScheduler {
    fn new(script: Script) -> Arc<FakeScheduler> {
        Arc::new(FakeScheduler {
            script,
            state: Mutex::default(),
            released: std::sync::atomic::AtomicBool::new(false),
        })
    }

    fn submitted(&self) -> Vec<String> {
        self.state.lock().unwrap().submitted.clone()
    }

    /// The run ids of the jobs submitted under `name`.
    fn runs_of(&self, name: &str) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.jobs
            .values()
            .filter(|(spec, _, _)| spec.name == name)
            .flat_map(|(spec, _, _)| spec.runs.iter().map(|r| r.run_id.clone()))
            .collect()
    }
}

/// The block whose baseline run prints `check FAILED` (every other run `check PASSED`):
/// only an experiment that declares `correctness.expect` reads that line.
const BASELINE_FAILS_ITS_CHECK_IN_BLOCK: u32 = 5;

/// What `exec-run` leaves in a run directory for a completed run: the app's output (the
/// variant twice as fast, then a verdict line) and the manifest.
fn run_the_job(spec: &JobSpec, id: &str) {
    for run in &spec.runs {
        let secs = if run.arm == "baseline" { 1.0 } else { 0.5 };
        let mut stdout: String = (1..=3)
            .map(|e| format!("epoch {e} took {} s\n", secs + 0.01 * f64::from(run.block)))
            .collect();
        let fails = run.arm == "baseline" && run.block == BASELINE_FAILS_ITS_CHECK_IN_BLOCK;
        stdout += if fails {
            "check FAILED\n"
        } else {
            "check PASSED\n"
        };
        std::fs::create_dir_all(&run.run_dir).unwrap();
        std::fs::write(run.run_dir.join("stdout"), stdout).unwrap();
        RunManifest {
            experiment: "loop".into(),
            run_id: run.run_id.clone(),
            arm: run.arm.clone(),
            block: run.block,
            replicate: run.replicate,
            host: "fake-node".into(),
            script: run.run_dir.join("run.sh"),
            scheduler_job_id: Some(id.to_string()),
            optgate_version: "test".into(),
            attempt: Some(spec.attempt),
            ..fixture_manifest(Outcome::Completed)
        }
        .write(&run.run_dir)
        .unwrap();
    }
}

impl Scheduler for FakeScheduler {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Slurm
    }

    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError> {
        if self.script == Script::Busy {
            let mut st = self.state.lock().unwrap();
            st.attempts += 1;
            st.submitted.push(job.name.clone());
            return Err(SchedError::Command {
                command: "sbatch job.sh".into(),
                status: "1".into(),
                stdout: String::new(),
                stderr: "sbatch: error: Socket timed out on send/recv operation".into(),
            });
        }
        if self.script == Script::Refuse {
            return Err(SchedError::Command {
                command: "sbatch job.sh".into(),
                status: "1".into(),
                stdout: String::new(),
                stderr: "sbatch: error: invalid partition specified: nope".into(),
            });
        }
        let (id, first) = {
            let mut s = self.state.lock().unwrap();
            let id = format!("{}", 1000 + s.submitted.len());
            s.submitted.push(job.name.clone());
            s.jobs
                .insert(id.clone(), (job.clone(), JobState::Pending, 0));
            (id, s.submitted.len() == 1)
        };
        if first && self.script == Script::HoldFirstSubmit {
            while !self.released.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(JobId(id))
    }

    /// Each poll moves a job on: pending → running → (its runs written) completed, or
    /// lost when the script says so.
    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError> {
        let mut s = self.state.lock().unwrap();
        let mut out = BTreeMap::new();
        let lose = self.script == Script::LoseBlock2Once && !s.lost_once;
        let mut lost_now = false;
        for id in ids {
            let Some((spec, state, polls)) = s.jobs.get_mut(&id.0) else {
                out.insert(id.clone(), JobState::Unknown);
                continue;
            };
            *polls += 1;
            let block2 = spec.runs.iter().any(|r| r.block == 2);
            *state = match (state.clone(), *polls) {
                (JobState::Pending, _) if lose && block2 => {
                    lost_now = true;
                    JobState::Lost("node fake-node failed".into())
                }
                (JobState::Pending, _) => JobState::Running,
                (JobState::Running, _) => {
                    run_the_job(spec, &id.0);
                    JobState::Completed
                }
                (other, _) => other,
            };
            out.insert(id.clone(), state.clone());
        }
        s.lost_once |= lost_now;
        Ok(out)
    }

    fn find_by_name(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError> {
        let s = self.state.lock().unwrap();
        Ok(s.jobs
            .iter()
            .filter(|(_, (spec, _, _))| names.contains(&spec.name))
            .map(|(id, (spec, _, _))| (spec.name.clone(), JobId(id.clone())))
            .collect())
    }

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError> {
        let mut s = self.state.lock().unwrap();
        for id in ids {
            if let Some((_, state, _)) = s.jobs.get_mut(&id.0) {
                *state = JobState::Cancelled;
            }
        }
        Ok(())
    }
}

const EXPERIMENT: &str = r#"name: loop
app:
  command: [./app]
metric:
  pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s'
scheduler: { kind: slurm, time_limit: 10m }
replicates: 5
variants:
  - name: v1
    dimension: l2_threading_model
    env: { X: "1" }
"#;

/// A daemon context whose every backend is `fake`, polled every few milliseconds.
fn daemon(state: &Path, fake: Arc<FakeScheduler>) -> Arc<Daemon> {
    daemon_with(
        state,
        Backends::with_factory(Arc::new(move |_, _| fake.clone())),
    )
}

fn daemon_with(state: &Path, backends: Backends) -> Arc<Daemon> {
    let paths = StatePaths::new(state);
    paths.prepare().unwrap();
    Arc::new(Daemon {
        db: Db::new(Store::open(&paths.db()).unwrap()),
        paths,
        wake: tokio::sync::Notify::new(),
        backends,
        optgate_bin: "/nonexistent/optgate".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        shutdown: CancellationToken::new(),
        unreachable_give_up: optgate_daemon::context::UNREACHABLE_GIVE_UP,
        failpoints: Default::default(),
        space: Default::default(),
    })
}

fn fast() -> EngineSettings {
    let quick = PollSchedule::new(Duration::from_millis(5), Duration::from_millis(20));
    EngineSettings {
        local: quick.clone(),
        cluster: quick,
    }
}

/// Submits the experiment, runs the engine until it ends (at most a minute), and returns
/// its final row.
async fn run_to_the_end(dir: &Path, fake: Arc<FakeScheduler>) -> optgate_store::ExperimentRow {
    let ctx = daemon(&dir.join("state"), fake);
    let id = submit(dir, &ctx).await;
    run_engine_until_ended(&ctx, &id).await
}

async fn submit(dir: &Path, ctx: &Daemon) -> String {
    submit_text(dir, ctx, EXPERIMENT).await
}

async fn submit_text(dir: &Path, ctx: &Daemon, text: &str) -> String {
    let source_path: PathBuf = dir.join("exp.yaml");
    std::fs::write(&source_path, text).unwrap();
    let reply = handlers::dispatch(
        ctx,
        Request::Submit(SubmitRequest {
            source_path,
            source_text: text.into(),
            every: None,
        }),
    )
    .await;
    let Response::Submitted(r) = reply else {
        panic!("{reply:?}")
    };
    r.id
}

async fn run_engine_until_ended(ctx: &Arc<Daemon>, id: &str) -> optgate_store::ExperimentRow {
    let shutdown = CancellationToken::new();
    let engine = tokio::spawn(run_with(ctx.clone(), shutdown.clone(), fast()));
    let start = std::time::Instant::now();
    let row = loop {
        let id = id.to_string();
        let row = ctx
            .db
            .call(move |s| s.experiment(&id))
            .await
            .unwrap()
            .unwrap();
        if row.state.is_terminal() {
            break row;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{row:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    shutdown.cancel();
    engine.await.unwrap();
    row
}

/// Runs an engine until the failpoint armed on `ctx` (named `armed` in the message) fires
/// (at most a minute), then drops it as a crash would: whatever it was doing, it is gone.
async fn crash_at_the_failpoint(ctx: &Arc<Daemon>, armed: &str) {
    let first = tokio::spawn(run_with(ctx.clone(), CancellationToken::new(), fast()));
    let start = std::time::Instant::now();
    while !ctx.failpoints.fired() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{armed} never reached"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    first.abort();
    let _ = first.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_experiment_is_submitted_polled_looked_at_and_decided() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeScheduler::new(Script::Normal);
    let row = run_to_the_end(dir.path(), fake.clone()).await;
    assert_eq!(row.state, ExperimentState::Decided, "{row:?}");
    // One job per block, each submitted once.
    let submitted = fake.submitted();
    assert_eq!(submitted.len(), 5, "{submitted:?}");
    let unique: std::collections::BTreeSet<_> = submitted.iter().collect();
    assert_eq!(unique.len(), 5, "{submitted:?}");
    let report: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&row.root).join("report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["variants"][0]["decision"], "accept");
    assert_eq!(report["variants"][0]["n_variant"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_submission_fails_the_experiment_with_the_scheduler_s_words() {
    let dir = tempfile::tempdir().unwrap();
    let row = run_to_the_end(dir.path(), FakeScheduler::new(Script::Refuse)).await;
    assert_eq!(row.state, ExperimentState::Failed);
    let reason = row.state_reason.unwrap_or_default();
    assert!(
        reason.contains("refused") && reason.contains("invalid partition specified: nope"),
        "{reason}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_job_is_resubmitted_and_its_runs_counted_once() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeScheduler::new(Script::LoseBlock2Once);
    let row = run_to_the_end(dir.path(), fake.clone()).await;
    assert_eq!(row.state, ExperimentState::Decided, "{row:?}");
    let submitted = fake.submitted();
    // Five blocks and one resubmission of block 2 under its retry name.
    assert_eq!(submitted.len(), 6, "{submitted:?}");
    let csv = std::fs::read_to_string(Path::new(&row.root).join("samples.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 10 * 3, "{csv}");
}

/// The daemon dies after the scheduler took a job and before the job's id was recorded
/// (the engine task is dropped mid-`submit`). The next engine reconciles: it finds the job
/// by name instead of submitting it again, and every block is submitted exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_submit_and_record_never_submits_twice() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeScheduler::new(Script::HoldFirstSubmit);
    let ctx = daemon(&dir.path().join("state"), fake.clone());
    let id = submit(dir.path(), &ctx).await;
    let first = tokio::spawn(run_with(ctx.clone(), CancellationToken::new(), fast()));
    let start = std::time::Instant::now();
    while fake.submitted().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nothing submitted"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The "crash": the engine is gone while the scheduler holds the job.
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    fake.released
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let row = run_engine_until_ended(&ctx, &id).await;
    assert_eq!(row.state, ExperimentState::Decided, "{row:?}");
    let submitted = fake.submitted();
    let unique: std::collections::BTreeSet<_> = submitted.iter().collect();
    assert_eq!(unique.len(), 5, "{submitted:?}");
    assert_eq!(submitted.len(), 5, "submitted twice: {submitted:?}");
}

/// A submission that keeps failing transiently is tried a bounded number of times (each
/// after looking the job up by name), then the experiment ends `failed` with the last
/// error quoted — never retried at every pass for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_that_keeps_failing_ends_failed_after_bounded_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeScheduler::new(Script::Busy);
    let row = run_to_the_end(dir.path(), fake.clone()).await;
    assert_eq!(row.state, ExperimentState::Failed, "{row:?}");
    let reason = row.state_reason.unwrap_or_default();
    assert!(
        reason.contains("after 5 submissions") && reason.contains("Socket timed out"),
        "{reason}"
    );
    // Each block's job was tried exactly 5 times (every pass tries every pending job).
    let mut per_job = BTreeMap::<String, u32>::new();
    for name in fake.submitted() {
        *per_job.entry(name).or_default() += 1;
    }
    assert!(!per_job.is_empty());
    assert!(per_job.values().all(|n| *n == 5), "{per_job:?}");
    assert_eq!(
        fake.state.lock().unwrap().attempts as usize,
        5 * per_job.len()
    );
}

/// Each window a crash leaves in doubt, hit exactly: the failpoint armed on the context
/// panics there, ending that engine's task (or build task) as a crash would end the
/// daemon, with the database as it was committed. A new engine on the same database
/// repairs what it left, and the experiment ends as if nothing had happened: every block's
/// job at the scheduler once, every run counted once, one look.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_crash_window_is_repaired_by_the_next_engine() {
    for (point, at) in [
        ("building", 1),
        ("before-submit", 1),
        ("before-submit", 3),
        ("after-submit", 2),
        ("after-job-end", 1),
        ("after-job-end", 5),
        ("before-look-commit", 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let fake = FakeScheduler::new(Script::Normal);
        let ctx = daemon(&dir.path().join("state"), fake.clone());
        ctx.failpoints.arm(point, at);
        let id = submit(dir.path(), &ctx).await;
        crash_at_the_failpoint(&ctx, &format!("{point}:{at}")).await;
        let row = run_engine_until_ended(&ctx, &id).await;
        assert_eq!(row.state, ExperimentState::Decided, "{point}:{at}: {row:?}");
        let submitted = fake.submitted();
        let unique: std::collections::BTreeSet<_> = submitted.iter().collect();
        assert_eq!(unique.len(), 5, "{point}:{at}: {submitted:?}");
        assert_eq!(
            submitted.len(),
            5,
            "{point}:{at}: a job submitted twice: {submitted:?}"
        );
        let csv = std::fs::read_to_string(Path::new(&row.root).join("samples.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + 10 * 3, "{point}:{at}: {csv}");
        let i = id.clone();
        let looks = ctx.db.call(move |s| s.looks(&i)).await.unwrap();
        assert_eq!(looks.len(), 1, "{point}:{at}: {looks:?}");
    }
}

/// A baseline run that fails its own `correctness.expect` is an error of the experiment
/// at the look too, not only in fail fast: here the engine dies right after recording the
/// last block's job end (before fail fast judged it), and the next engine's look ends the
/// experiment `failed` naming the baseline's output line. Catches a look that decides
/// anyway (the variant accepted against the other four baselines).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_look_that_finds_a_baseline_failing_its_check_fails_the_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeScheduler::new(Script::Normal);
    let ctx = daemon(&dir.path().join("state"), fake.clone());
    ctx.failpoints.arm("after-job-end", 5);
    let text = format!(
        "{EXPERIMENT}correctness:\n  values: {{ pattern: 'check (?P<value>\\w+)' }}\n  expect: PASSED\n"
    );
    let id = submit_text(dir.path(), &ctx, &text).await;
    crash_at_the_failpoint(&ctx, "after-job-end:5").await;
    let row = run_engine_until_ended(&ctx, &id).await;
    assert_eq!(row.state, ExperimentState::Failed, "{row:?}");
    let reason = row.state_reason.unwrap_or_default();
    let b = BASELINE_FAILS_ITS_CHECK_IN_BLOCK;
    assert!(
        reason.starts_with(&format!(
            "baseline run b{b:03}-baseline does not print the expected verdict: "
        )),
        "{reason}"
    );
    assert!(
        reason.contains("/stdout:4: `FAILED` where `PASSED` is expected"),
        "{reason}"
    );
    assert!(reason.contains("exp.yaml:12)"), "{reason}");
}

/// A run the store recorded completed whose manifest no longer says so when the look reads
/// it (here replaced by an interrupted one, as a stale attempt's late write would leave
/// it; `LookError::RecordedRunChanged`) is neither counted nor lost nor run twice: the
/// experiment goes back to running, the run to pending, it is submitted again on its own
/// under its block job's retry name, and the experiment is decided with every run counted
/// once. Catches a look that counts the changed run (or drops it: 27 sample rows), and a
/// `run_again` that loses the run (never resubmitted: 5 submissions) or resubmits the
/// whole block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_run_whose_manifest_changed_runs_again_and_counts_once() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeScheduler::new(Script::Normal);
    let ctx = daemon(&dir.path().join("state"), fake.clone());
    // Stop the engine once the last job's end and its runs' outcomes are recorded, before
    // the look: the window in which a manifest can change under a recorded run.
    ctx.failpoints.arm("after-job-end", 5);
    let id = submit(dir.path(), &ctx).await;
    crash_at_the_failpoint(&ctx, "after-job-end:5").await;
    let i = id.clone();
    let (row, runs) = ctx
        .db
        .call(move |s| Ok((s.experiment(&i)?.unwrap(), s.runs(&i)?)))
        .await
        .unwrap();
    assert_eq!(runs.len(), 10);
    assert!(
        runs.iter().all(|r| r.state == RunState::Completed),
        "{runs:?}"
    );
    let changed = optgate_evidence::Layout::new(&row.root).run_dir("b001-baseline");
    let mut manifest = RunManifest::read(&changed).unwrap().unwrap();
    manifest.outcome = Outcome::Interrupted;
    manifest.exit_code = None;
    manifest.write(&changed).unwrap();

    let row = run_engine_until_ended(&ctx, &id).await;
    assert_eq!(row.state, ExperimentState::Decided, "{row:?}");
    let submitted = fake.submitted();
    assert_eq!(submitted.len(), 6, "{submitted:?}");
    let block1 = submitted
        .iter()
        .find(|n| n.ends_with("-b001"))
        .expect("block 1's job");
    assert_eq!(submitted[5], format!("{block1}+r2"), "{submitted:?}");
    assert_eq!(
        fake.runs_of(&submitted[5]),
        ["b001-baseline"],
        "only the changed run runs again"
    );
    let manifest = RunManifest::read(&changed).unwrap().unwrap();
    assert_eq!(manifest.outcome, Outcome::Completed);
    assert_eq!(
        manifest.attempt,
        Some(2),
        "the retry's record, not the old one"
    );
    let csv = std::fs::read_to_string(Path::new(&row.root).join("samples.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 10 * 3, "{csv}");
    assert_eq!(
        csv.lines()
            .filter(|l| l.starts_with("baseline,1,1,"))
            .count(),
        3,
        "{csv}"
    );
    let i = id.clone();
    let (looks, runs) = ctx
        .db
        .call(move |s| Ok((s.looks(&i)?, s.runs(&i)?)))
        .await
        .unwrap();
    assert_eq!(looks.len(), 1, "{looks:?}");
    assert!(
        runs.iter().all(|r| r.state == RunState::Completed),
        "{runs:?}"
    );
}

/// A backend that does nothing but record every call that reaches it.
struct Recorder {
    kind: SchedulerKind,
    calls: Mutex<Vec<String>>,
}

impl Recorder {
    fn new(kind: SchedulerKind) -> Arc<Recorder> {
        Arc::new(Recorder {
            kind,
            calls: Mutex::default(),
        })
    }

    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }

    fn note(&self, call: String) {
        self.calls.lock().unwrap().push(call);
    }
}

impl Scheduler for Recorder {
    fn kind(&self) -> SchedulerKind {
        self.kind
    }

    fn submit(&self, job: &JobSpec) -> Result<JobId, SchedError> {
        self.note(format!("submit {}", job.name));
        Ok(JobId("1".into()))
    }

    fn poll(&self, ids: &[JobId]) -> Result<BTreeMap<JobId, JobState>, SchedError> {
        self.note(format!("poll {ids:?}"));
        Ok(ids.iter().map(|i| (i.clone(), JobState::Running)).collect())
    }

    fn find_by_name(&self, names: &[String]) -> Result<BTreeMap<String, JobId>, SchedError> {
        self.note(format!("find_by_name {names:?}"));
        Ok(BTreeMap::new())
    }

    fn cancel(&self, ids: &[JobId]) -> Result<(), SchedError> {
        self.note(format!("cancel {ids:?}"));
        Ok(())
    }
}

/// Backends that hand out `local` for the local kind and `slurm` for every other.
fn local_or_slurm(local: &Arc<Recorder>, slurm: &Arc<Recorder>) -> Backends {
    let (local, slurm) = (local.clone(), slurm.clone());
    Backends::with_factory(Arc::new(move |kind, _| -> Arc<dyn Scheduler> {
        match kind {
            SchedulerKind::Local => local.clone(),
            _ => slurm.clone(),
        }
    }))
}

/// Leaves experiment `id` running, with block 1's job at the scheduler and block 2's in
/// doubt (`submitting`), as a daemon stopped in the middle of a pass leaves it.
async fn stopped_mid_pass(ctx: &Daemon, id: &str) {
    let i = id.to_string();
    ctx.db
        .call(move |s| {
            s.set_state(&i, ExperimentState::Running, None)?;
            let runs = s.runs(&i)?;
            let job = |block: u32| NewJob {
                block,
                name: format!("og-{i}-b{block}"),
                attempt: 1,
                run_ids: runs
                    .iter()
                    .filter(|r| r.block == block)
                    .map(|r| r.run_id.clone())
                    .collect(),
            };
            let jobs = s.create_jobs(&i, &[job(1), job(2)])?;
            assert_eq!(jobs.len(), 2);
            s.job_submitted(jobs[0].id, "1000")
        })
        .await
        .unwrap();
}

/// A stored scheduler kind that is none optgate knows (a damaged row, written here behind
/// the store's back) is never read as `local`: the experiment ends `failed` with the value
/// quoted, its job at the scheduler and its job in doubt are closed, and no backend — the
/// local one least of all — is asked to poll, look up, submit or cancel anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_scheduler_kind_fails_the_experiment_and_reaches_no_backend() {
    let dir = tempfile::tempdir().unwrap();
    let (local, slurm) = (
        Recorder::new(SchedulerKind::Local),
        Recorder::new(SchedulerKind::Slurm),
    );
    let ctx = daemon_with(&dir.path().join("state"), local_or_slurm(&local, &slurm));
    let id = submit(dir.path(), &ctx).await;
    stopped_mid_pass(&ctx, &id).await;
    let db = rusqlite::Connection::open(ctx.paths.db()).unwrap();
    db.execute_batch("PRAGMA ignore_check_constraints = ON")
        .unwrap();
    let damaged = db
        .execute(
            "UPDATE experiments SET scheduler = 'lcoal' WHERE id = ?1",
            [&id],
        )
        .unwrap();
    assert_eq!(damaged, 1);

    let shutdown = CancellationToken::new();
    let engine = tokio::spawn(run_with(ctx.clone(), shutdown.clone(), fast()));
    let state_of = || -> (String, Option<String>) {
        db.query_row(
            "SELECT state, state_reason FROM experiments WHERE id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    };
    let start = std::time::Instant::now();
    // Until the experiment ends or any backend is asked anything (the bug).
    let (state, reason) = loop {
        let (state, reason) = state_of();
        if state == "failed" || !local.calls().is_empty() || !slurm.calls().is_empty() {
            break (state, reason);
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "still {state}: {reason:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    // Closed before any pass polls: no job is left live for a later pass to ask about.
    shutdown.cancel();
    engine.await.unwrap();
    assert_eq!(
        local.calls(),
        Vec::<String>::new(),
        "the local backend was asked"
    );
    assert_eq!(
        slurm.calls(),
        Vec::<String>::new(),
        "the slurm backend was asked"
    );
    assert_eq!(state, "failed", "{reason:?}");
    let reason = reason.unwrap_or_default();
    assert!(
        reason.contains("`lcoal`") && reason.contains("neither polled nor cancelled"),
        "{reason}"
    );
    let i = id.clone();
    let jobs = ctx.db.call(move |s| s.jobs(&i)).await.unwrap();
    assert!(
        jobs.iter().all(|j| j.state == JobRecordState::Cancelled),
        "{jobs:?}"
    );
}

/// A recurrence submitted again is started by the next pass at once, not after the longest
/// poll interval: here that interval is an hour, so without the wake the second execution
/// would sit `planned` past the minute this test waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resubmitted_recurrence_starts_without_waiting_out_the_idle_interval() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = daemon(
        &dir.path().join("state"),
        FakeScheduler::new(Script::Normal),
    );
    let source_path: PathBuf = dir.path().join("exp.yaml");
    std::fs::write(&source_path, EXPERIMENT).unwrap();
    let reply = handlers::dispatch(
        &ctx,
        Request::Submit(SubmitRequest {
            source_path,
            source_text: EXPERIMENT.into(),
            every: Some("1s".into()),
        }),
    )
    .await;
    let Response::Submitted(first) = reply else {
        panic!("{reply:?}")
    };
    let slow = PollSchedule::new(Duration::from_millis(5), Duration::from_secs(3600));
    let settings = EngineSettings {
        local: slow.clone(),
        cluster: slow,
    };
    let shutdown = CancellationToken::new();
    let engine = tokio::spawn(run_with(ctx.clone(), shutdown.clone(), settings));
    let start = std::time::Instant::now();
    let second = loop {
        let rows = ctx.db.call(|s| s.experiments()).await.unwrap();
        let ended: Vec<_> = rows.iter().filter(|r| r.state.is_terminal()).collect();
        if let Some(second) = ended.iter().find(|r| r.id != first.id) {
            break second.id.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the second execution did not end: {rows:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    shutdown.cancel();
    engine.await.unwrap();
    assert_ne!(second, first.id);
}

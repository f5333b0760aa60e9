//! One run, executed where its job landed: the plain run spec (`run.json`, [`RunRecord`])
//! read, the run claimed for the job's attempt, isolation and governor set up, the app timed
//! in its own process group, then the manifest ([`execute_prepared`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::claim::{self, Claim, ClaimError};
use crate::isolation::{apply_page_cache, warm_up_once};
use crate::manifest::{CacheMode, PageCacheMode};
use crate::manifest::{
    CoreUse, EnergySource, IsolationRecord, MANIFEST_FILE, MANIFEST_SCHEMA, ManifestError, Outcome,
    PageCacheRecord, Resources, RunManifest, write_atomic,
};
use crate::process::{Finished, ProcessEnd, ProcessError, run_command};

pub const RUN_SCRIPT: &str = "run.sh";
pub const STDOUT_FILE: &str = "stdout";
pub const STDERR_FILE: &str = "stderr";

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    #[error(transparent)]
    Governor(#[from] optgate_probe::governor::GovernorError),
    #[error("the CPU governor cannot be changed: {0}")]
    GovernorNotTunable(String),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RunError + 'a {
    move |source| RunError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// This machine's host name, for manifests.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".to_string())
}

pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// What `run.json` holds: everything needed to execute a rendered run and write its
/// manifest, on this machine or on a compute node (`optgate exec-run`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub experiment: String,
    pub run_id: String,
    pub arm: String,
    pub block: u32,
    pub replicate: u32,
    pub env_set: BTreeMap<String, String>,
    pub env_unset: Vec<String>,
    pub time_limit_s: Option<f64>,
    /// The arm's compile caches and where they are (absent in records of older optgates:
    /// cold, no directory).
    #[serde(default)]
    pub caches: CacheMode,
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// What to do with the page cache of `inputs` before the run.
    #[serde(default)]
    pub page_cache: PageCacheMode,
    #[serde(default)]
    pub inputs: Vec<PathBuf>,
    /// The governor this arm's runs need (set around the run when it executes without a
    /// launcher; under Slurm `srun --cpu-freq` sets it), and the privileged helper to set
    /// it with, when the user has one.
    #[serde(default)]
    pub governor: Option<String>,
    #[serde(default)]
    pub governor_helper: Option<Vec<String>>,
    /// Where a changed governor's previous state is kept while the run runs; a leftover
    /// (the wrapper was killed) is restored before the next run of the execution starts.
    #[serde(default)]
    pub governor_restore_file: Option<PathBuf>,
}

pub const RUN_RECORD: &str = "run.json";

/// Files `step-governor.<host>` in a run directory: the governor in force inside the run's
/// step on that host, written by `optgate step` and gathered into the manifest's
/// `step_governors`.
pub const STEP_GOVERNOR_PREFIX: &str = "step-governor.";

/// Which job attempt runs a run (from its job script: 1 for a block's first job, 2 for its
/// first resubmission, …) and the scheduler's id of that job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub number: u32,
    pub scheduler_job_id: Option<String>,
}

/// What [`execute_prepared`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Executed {
    /// The run ran; its manifest, stdout and stderr are in place.
    Recorded(Box<RunManifest>),
    /// Nothing ran: a final manifest is there ([`Claim::Finished`]) or a newer attempt
    /// holds the run ([`Claim::Superseded`]).
    NotStarted(Claim),
    /// The run ran, but meanwhile a newer attempt claimed it or another instance of this
    /// attempt finished it: this attempt's manifest, stdout and stderr are kept under its
    /// own names (`manifest`, and [`attempt_file`] of stdout and stderr), nothing of the
    /// run's record was replaced.
    Stale { found: Claim, manifest: PathBuf },
}

pub use crate::files::attempt_file;

/// Runs a rendered run directory: `launcher... bash run.sh` (a bare `bash run.sh` when
/// `launcher` is empty), output to `stdout`/`stderr`, then the manifest. The single code
/// path that writes manifests, for every backend. With a launcher, `step_probe` (`optgate
/// step RUN_DIR --attempt N --`) goes between it and `bash run.sh`, so it wraps every task
/// inside the launcher's step; the task records it leaves in `tasks.attempt-N/` become the
/// manifest's `tasks` and `resources`, its `step-governor.<host>` files the manifest's
/// `step_governors`.
///
/// The attempt claims the run first ([`claim::claim`]): a run already finished or held by
/// a newer attempt does not start. The app writes to the attempt's own output files, which
/// become `stdout`/`stderr` just before the manifest, and only while the attempt still
/// holds the run ([`claim::commit_if_held`]): a stale attempt never replaces a newer one's
/// record.
pub async fn execute_prepared(
    run_dir: &Path,
    launcher: &[String],
    step_probe: &[String],
    attempt: &Attempt,
    cancel: &CancellationToken,
) -> Result<Executed, RunError> {
    let executed = execute_attempt(run_dir, launcher, step_probe, attempt, cancel).await;
    if let Err(e) = &executed
        && error_is_no_space(e)
    {
        // Best effort: the engine reads it as "hit by ENOSPC" (`NO_SPACE_MARK`).
        let _ = std::fs::File::create(run_dir.join(crate::manifest::NO_SPACE_MARK));
    }
    executed
}

/// [`execute_prepared`] but for the mark a lack of space leaves.
async fn execute_attempt(
    run_dir: &Path,
    launcher: &[String],
    step_probe: &[String],
    attempt: &Attempt,
    cancel: &CancellationToken,
) -> Result<Executed, RunError> {
    let (record, time_limit) = read_record(run_dir)?;
    match claim::claim(run_dir, attempt.number)? {
        Claim::Held => {}
        refused => return Ok(Executed::NotStarted(refused)),
    }
    // An earlier attempt's mark says nothing of this one.
    let _ = std::fs::remove_file(run_dir.join(crate::manifest::NO_SPACE_MARK));
    // What an interrupted attempt recorded is not this attempt's.
    for (path, _) in step_governor_files(run_dir) {
        std::fs::remove_file(&path).map_err(io("remove", &path))?;
    }
    let tasks_dir = crate::tasks::tasks_dir(run_dir, attempt.number);
    let nodes_dir = crate::nodes::nodes_dir(run_dir, attempt.number);
    for dir in [&tasks_dir, &nodes_dir] {
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io("remove", dir)(e));
            }
            _ => {}
        }
    }
    let (environment, environment_withheld) = crate::manifest::recordable_environment(
        std::env::vars(),
        &record.env_set,
        &record.env_unset,
    );
    // A governor left changed by a killed run of this execution goes back first, then
    // this run's own governor (local execution only) is set for the run's duration.
    restore_leftover_governor(record.governor_restore_file.as_deref())?;
    let mut governor = match (&record.governor, launcher.is_empty()) {
        (Some(target), true) => Some(set_governor(run_dir, target, &record)?),
        _ => None,
    };
    let isolation = isolate(run_dir, &record, launcher, time_limit, cancel).await;
    let argv = run_argv(run_dir, launcher, step_probe);
    let timed = timed_run(run_dir, &argv, attempt.number, time_limit, cancel).await?;
    if let Some(g) = governor.as_mut() {
        g.restore()?;
    }
    let step = StepRecords::read(run_dir, attempt.number, !launcher.is_empty());
    let step_totals = step
        .tasks
        .as_ref()
        .ok()
        .and_then(|tasks| match &step.nodes {
            Ok(nodes) => crate::tasks::totals(tasks, &hostname(), timed.energy_j, nodes),
            // Node records not believed: the CPU figures stand, no energy from them.
            Err(_) => crate::tasks::totals(tasks, &hostname(), None, &[]).map(|r| Resources {
                energy_j: None,
                energy_source: None,
                ..r
            }),
        });
    let manifest = timed.manifest(record, launcher.is_empty());
    let manifest = RunManifest {
        environment,
        environment_withheld,
        isolation: Some(isolation),
        attempt: Some(attempt.number),
        scheduler_job_id: attempt.scheduler_job_id.clone(),
        script: run_dir.join(RUN_SCRIPT),
        step_governors: step_governors(run_dir),
        resources: manifest.resources.or(step_totals),
        not_measured: step.problems(),
        tasks: step.tasks.unwrap_or_default(),
        nodes: step.nodes.unwrap_or_default(),
        ..manifest
    };
    commit(run_dir, attempt.number, manifest)
}

/// What each task's and each node's `optgate step` recorded inside the run's step, or the
/// first record not believed ([`crate::tasks::read_records`], [`crate::nodes::read_records`]).
struct StepRecords {
    tasks: Result<Vec<crate::tasks::TaskRecord>, crate::untrusted::RecordProblem>,
    nodes: Result<Vec<crate::nodes::NodeRecord>, crate::untrusted::RecordProblem>,
}

impl StepRecords {
    /// The attempt's records; none at all without a launcher (a local run has no step, so
    /// a record there was planted, not measured, and is never read).
    fn read(run_dir: &Path, attempt: u32, under_launcher: bool) -> StepRecords {
        if !under_launcher {
            return StepRecords {
                tasks: Ok(Vec::new()),
                nodes: Ok(Vec::new()),
            };
        }
        StepRecords {
            tasks: crate::tasks::read_records(run_dir, attempt),
            nodes: crate::nodes::read_records(run_dir, attempt),
        }
    }

    /// Each record not believed, as `FILE: why`.
    fn problems(&self) -> Vec<String> {
        let task = self.tasks.as_ref().err().map(|p| p.to_string());
        let node = self.nodes.as_ref().err().map(|p| p.to_string());
        task.into_iter().chain(node).collect()
    }
}

/// Reads `run.json` and its time limit.
fn read_record(run_dir: &Path) -> Result<(RunRecord, Option<Duration>), RunError> {
    let record_path = run_dir.join(RUN_RECORD);
    let invalid = |e: String| RunError::Io {
        op: "parse",
        path: record_path.clone(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    };
    let bytes = crate::untrusted::read_bytes(
        run_dir,
        Path::new(RUN_RECORD),
        crate::untrusted::MAX_RECORD_BYTES,
    )
    .map_err(|e| io("read", &record_path)(e.into_io()))?;
    let record: RunRecord = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
    // The record is optgate's own file, but a person may have edited it: a limit no
    // `Duration` holds (negative, NaN, past u64 seconds) is an error, not a panic.
    let time_limit = match record.time_limit_s {
        None => None,
        Some(s) => Some(
            Duration::try_from_secs_f64(s)
                .map_err(|e| invalid(format!("time_limit_s {s} is not a time limit: {e}")))?,
        ),
    };
    Ok((record, time_limit))
}

/// `launcher... [step_probe...] bash run.sh`.
fn run_argv(run_dir: &Path, launcher: &[String], step_probe: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = launcher.to_vec();
    if !launcher.is_empty() {
        argv.extend(step_probe.iter().cloned());
    }
    argv.push("bash".into());
    argv.push(run_dir.join(RUN_SCRIPT).display().to_string());
    argv
}

/// Isolation first, untimed: the arm's warm-up (once per arm), then the inputs' page
/// cache, so that the timed run starts right after.
async fn isolate(
    run_dir: &Path,
    record: &RunRecord,
    launcher: &[String],
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> IsolationRecord {
    let cache_dir = record
        .cache_dir
        .clone()
        .unwrap_or_else(|| run_dir.join("caches"));
    // Created for the app, which may expect it to exist; a failure shows in the app's own
    // error, not here.
    let _ = std::fs::create_dir_all(&cache_dir);
    let warmup = match record.caches {
        CacheMode::Warm => warm_up_once(run_dir, &cache_dir, launcher, time_limit, cancel).await,
        CacheMode::Cold => None,
    };
    let page_cache = {
        let (mode, inputs) = (record.page_cache, record.inputs.clone());
        tokio::task::spawn_blocking(move || apply_page_cache(mode, &inputs))
            .await
            .unwrap_or_else(|e| PageCacheRecord {
                mode: record.page_cache,
                files: 0,
                bytes: 0,
                note: Some(format!("page-cache handling failed: {e}")),
            })
    };
    IsolationRecord {
        caches: record.caches,
        cache_dir,
        warmup,
        page_cache,
    }
}

/// What the timed run did and the node around it.
struct TimedRun {
    finished: Finished,
    started_at: String,
    ended_at: String,
    elapsed_s: f64,
    energy_j: Option<f64>,
    conditions: crate::manifest::NodeConditions,
}

/// The timed run, in its own process group, its output to the attempt's own files.
async fn timed_run(
    run_dir: &Path,
    argv: &[String],
    attempt: u32,
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<TimedRun, RunError> {
    let before = crate::manifest::NodeSnapshot::take();
    let energy_root = optgate_probe::sysfs_root();
    let energy_before = crate::energy::take(&energy_root);
    let started_at = now_rfc3339();
    let t0 = std::time::Instant::now();
    // Stopped during the warm-up: the timed run does not start.
    let finished = if cancel.is_cancelled() {
        Finished {
            end: ProcessEnd::Cancelled,
            usage: None,
            threads: None,
        }
    } else {
        run_command(
            argv,
            run_dir,
            &run_dir.join(attempt_file(STDOUT_FILE, attempt)),
            &run_dir.join(attempt_file(STDERR_FILE, attempt)),
            time_limit,
            cancel,
        )
        .await?
    };
    let elapsed_s = t0.elapsed().as_secs_f64();
    let energy_j = energy_before
        .zip(crate::energy::take(&energy_root))
        .and_then(|(b, a)| crate::energy::joules_between(&b, &a));
    let conditions = before.until(
        &crate::manifest::NodeSnapshot::take(),
        std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok()),
    );
    Ok(TimedRun {
        finished,
        started_at,
        ended_at: now_rfc3339(),
        elapsed_s,
        energy_j,
        conditions,
    })
}

impl TimedRun {
    /// The manifest of this run of `record` (environment, isolation, attempt and the step's
    /// files are the caller's to fill in). `measured`: the app was this process's
    /// descendant (no launcher), so `wait4` measured its resources.
    fn manifest(self, record: RunRecord, measured: bool) -> RunManifest {
        // Under a launcher (`srun`, `flux run`) the app runs in the scheduler's step, not
        // as a descendant of this process: `wait4` would count the launcher alone. Those
        // runs' resources come from their tasks' records (`optgate step`), or are not
        // recorded (System Impact then says "not measured") rather than a wrong figure.
        let energy_j = self.energy_j;
        let resources = self.finished.usage.filter(|_| measured).map(|u| Resources {
            cpu_user_s: u.user_s,
            cpu_system_s: u.system_s,
            max_rss_kib: u.max_rss_kib,
            energy_j,
            energy_source: energy_j.map(|_| EnergySource::Rapl),
        });
        let core_use = self.finished.usage.filter(|_| measured).map(|u| {
            CoreUse::of(
                &crate::threads::allowed_cpus(),
                &u,
                self.finished.threads,
                self.elapsed_s,
            )
        });
        let (outcome, exit_code, signal) = match self.finished.end {
            ProcessEnd::Exited(0) => (Outcome::Completed, Some(0), None),
            ProcessEnd::Exited(c) => (Outcome::Failed, Some(c), None),
            ProcessEnd::Signaled(s) => (Outcome::Failed, None, Some(s)),
            ProcessEnd::TimedOut => (Outcome::TimedOut, None, None),
            ProcessEnd::Cancelled => (Outcome::Interrupted, None, None),
        };
        RunManifest {
            schema: MANIFEST_SCHEMA,
            experiment: record.experiment,
            run_id: record.run_id,
            arm: record.arm,
            block: record.block,
            replicate: record.replicate,
            host: hostname(),
            started_at: self.started_at,
            ended_at: self.ended_at,
            elapsed_s: self.elapsed_s,
            outcome,
            exit_code,
            signal,
            env_set: record.env_set,
            env_unset: record.env_unset,
            environment: BTreeMap::new(),
            environment_withheld: Vec::new(),
            conditions: Some(self.conditions),
            script: PathBuf::new(),
            scheduler_job_id: None,
            optgate_version: env!("CARGO_PKG_VERSION").to_string(),
            attempt: None,
            step_governors: BTreeMap::new(),
            nodes: Vec::new(),
            tasks: Vec::new(),
            core_use,
            not_measured: Vec::new(),
            resources,
            isolation: None,
        }
    }
}

/// The governors the step's probe recorded, per host.
fn step_governors(run_dir: &Path) -> BTreeMap<String, String> {
    step_governor_files(run_dir)
        .into_iter()
        .filter_map(|(path, host)| {
            let g = std::fs::read_to_string(&path).ok()?;
            Some((host, g.trim().to_string()))
        })
        .collect()
}

/// Whether any error in `e`'s chain is a lack of space.
fn error_is_no_space(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err
            .downcast_ref::<std::io::Error>()
            .is_some_and(crate::manifest::is_no_space)
        {
            return true;
        }
        next = err.source();
    }
    false
}

/// Puts the attempt's output and `manifest` in place if the attempt still holds the run;
/// otherwise keeps them under the attempt's own names.
fn commit(run_dir: &Path, attempt: u32, manifest: RunManifest) -> Result<Executed, RunError> {
    let found = claim::commit_if_held(run_dir, attempt, || {
        for name in [STDOUT_FILE, STDERR_FILE] {
            let own = run_dir.join(attempt_file(name, attempt));
            let shared = run_dir.join(name);
            match std::fs::rename(&own, &shared) {
                // Stopped before the app started: it wrote nothing.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                r => r.map_err(io("rename into place", &own))?,
            }
        }
        manifest.write(run_dir).map_err(RunError::from)
    })??;
    if found == Claim::Held {
        return Ok(Executed::Recorded(Box::new(manifest)));
    }
    let path = run_dir.join(attempt_file(MANIFEST_FILE, attempt));
    write_atomic(
        &path,
        &serde_json::to_vec_pretty(&manifest).expect("manifest serialises"),
    )
    .map_err(io("write", &path))?;
    Ok(Executed::Stale {
        found,
        manifest: path,
    })
}

/// The governor file the run writes: which CPUs' governors it changed, from what to what.
pub const GOVERNOR_CHANGES_FILE: &str = "governor.json";

/// Restores the governors a killed run of this execution left changed (its restore file
/// is still there).
fn restore_leftover_governor(restore_file: Option<&Path>) -> Result<(), RunError> {
    let Some(file) = restore_file.filter(|f| f.exists()) else {
        return Ok(());
    };
    let undone = optgate_probe::governor::restore_from_file(file)?;
    tracing::warn!(
        "restored {} cpufreq policies left changed by a killed run",
        undone.len()
    );
    Ok(())
}

/// Sets the run's governor on every online CPU of this node (`$OPTGATE_SYSFS_ROOT` in
/// tests), directly or through the user's helper, and records the changes in the run's
/// `governor.json`. The guard restores them when the run ends (or when it is dropped).
fn set_governor(
    run_dir: &Path,
    target: &str,
    record: &RunRecord,
) -> Result<optgate_probe::governor::GovernorGuard, RunError> {
    use optgate_probe::governor::{CpuSelection, GovernorGuard, Tunability, tunability};
    let root = optgate_probe::sysfs_root();
    let via = match tunability(&root, record.governor_helper.as_deref()) {
        Tunability::Tunable { via } => via,
        Tunability::NotTunable { reason } => return Err(RunError::GovernorNotTunable(reason)),
    };
    let restore = record
        .governor_restore_file
        .clone()
        .unwrap_or_else(|| run_dir.join("governor-restore.json"));
    let guard = GovernorGuard::set_via(&root, target, &CpuSelection::AllOnline, &restore, &via)?;
    let path = run_dir.join(GOVERNOR_CHANGES_FILE);
    write_atomic(
        &path,
        &serde_json::to_vec_pretty(guard.changes()).expect("serialises"),
    )
    .map_err(io("write", &path))?;
    Ok(guard)
}

/// The `step-governor.<host>` files of a run directory, with their host names.
fn step_governor_files(run_dir: &Path) -> Vec<(PathBuf, String)> {
    let Ok(entries) = std::fs::read_dir(run_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let host = name.strip_prefix(STEP_GOVERNOR_PREFIX)?;
            (!host.is_empty() && !host.starts_with('.') && e.path().is_file())
                .then(|| (e.path(), host.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_dir(tmp: &Path) -> PathBuf {
        let dir = tmp.join("b001-v");
        std::fs::create_dir_all(&dir).unwrap();
        let record = RunRecord {
            experiment: "e".into(),
            run_id: "b001-v".into(),
            arm: "v".into(),
            block: 1,
            replicate: 1,
            env_set: BTreeMap::new(),
            env_unset: vec![],
            time_limit_s: Some(60.0),
            caches: CacheMode::Cold,
            cache_dir: None,
            page_cache: PageCacheMode::Leave,
            inputs: vec![],
            governor: None,
            governor_helper: None,
            governor_restore_file: None,
        };
        std::fs::write(dir.join(RUN_RECORD), serde_json::to_vec(&record).unwrap()).unwrap();
        std::fs::write(dir.join(RUN_SCRIPT), "echo ran\n").unwrap();
        dir
    }

    fn first() -> Attempt {
        Attempt {
            number: 1,
            scheduler_job_id: None,
        }
    }

    fn recorded(r: Result<Executed, RunError>) -> RunManifest {
        match r.unwrap() {
            Executed::Recorded(m) => *m,
            other => panic!("the run was not recorded: {other:?}"),
        }
    }

    #[tokio::test]
    async fn the_step_probe_runs_inside_the_launcher_and_its_files_reach_the_manifest() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run_dir(tmp.path());
        // Left by an interrupted attempt: not this attempt's.
        std::fs::write(dir.join("step-governor.stale"), "powersave\n").unwrap();
        let launcher = vec!["env".to_string(), "X=1".to_string()];
        let probe: Vec<String> = [
            "bash",
            "-c",
            r#"echo "performance" > step-governor.n1; echo "none" > step-governor.n2; exec "$@""#,
            "probe",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let cancel = CancellationToken::new();
        let m = recorded(execute_prepared(&dir, &launcher, &probe, &first(), &cancel).await);
        assert_eq!(m.outcome, Outcome::Completed);
        // Under a launcher the app runs outside this process's tree: no resources rather
        // than the launcher's own CPU time.
        assert_eq!(m.resources, None);
        assert_eq!(
            std::fs::read_to_string(dir.join(STDOUT_FILE)).unwrap(),
            "ran\n"
        );
        let want: BTreeMap<String, String> = [("n1", "performance"), ("n2", "none")]
            .iter()
            .map(|(h, g)| (h.to_string(), g.to_string()))
            .collect();
        assert_eq!(m.step_governors, want);
        let back = RunManifest::read(&dir).unwrap().unwrap();
        assert_eq!(back.step_governors, want);
    }

    /// A task record as `optgate step` writes it, for a step of `size` tasks.
    fn task_json(rank: u32, size: u32, cpu: f64, rss: u64) -> String {
        let host = hostname();
        format!(
            r#"{{"rank":{rank},"node":"n1","host":"{host}","step_size":{size},"cpus_allowed":4,"cpus_allowed_list":"0-3","threads_max":1,"cpu_user_s":{cpu},"cpu_system_s":0.25,"cpu_s":{cpu},"max_rss_kib":{rss},"wall_s":1.0,"end":"exited","exit_code":0,"signal":null}}"#
        )
    }

    /// Planted bugs caught: the records not gathered (no tasks, no resources), a leftover
    /// of an earlier try of the same attempt counted (3 tasks, not 2), one task's CPU taken
    /// for the run's, RSS summed.
    #[tokio::test]
    async fn under_a_launcher_the_tasks_records_become_the_manifests_tasks_and_totals() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run_dir(tmp.path());
        let tasks = crate::tasks::tasks_dir(&dir, 1);
        std::fs::create_dir_all(&tasks).unwrap();
        std::fs::write(tasks.join("rank-7.json"), task_json(7, 2, 50.0, 1)).unwrap();
        let script = format!(
            "mkdir -p tasks.attempt-1; echo '{}' > tasks.attempt-1/rank-0.json; echo '{}' > tasks.attempt-1/rank-1.json; exec \"$@\"",
            task_json(0, 2, 1.5, 100),
            task_json(1, 2, 2.5, 300)
        );
        let probe: Vec<String> = ["bash", "-c", &script, "step"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let launcher = vec!["env".to_string()];
        let cancel = CancellationToken::new();
        let m = recorded(execute_prepared(&dir, &launcher, &probe, &first(), &cancel).await);
        let ranks: Vec<Option<u32>> = m.tasks.iter().map(|t| t.rank).collect();
        assert_eq!(ranks, vec![Some(0), Some(1)]);
        let r = m.resources.expect("the tasks' totals");
        assert_eq!(
            (r.cpu_user_s, r.cpu_system_s, r.max_rss_kib),
            (4.0, 0.5, 300)
        );
        let back = RunManifest::read(&dir).unwrap().unwrap();
        assert_eq!(back.tasks, m.tasks);
    }

    /// A planted record (rank 1 of a step of 2 using 50 CPU seconds in 1 s on 4 cores)
    /// beside a true one: no tasks, no resources, the file and the rule named; a node
    /// record planted as a pipe does not block the wrapper. Planted bugs caught: records
    /// believed without their checks (resources 51.5 s), a pipe opened (the test hangs).
    #[tokio::test]
    async fn a_planted_task_record_is_not_measured_and_names_its_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run_dir(tmp.path());
        let script = format!(
            "mkdir -p tasks.attempt-1 nodes.attempt-1; mkfifo nodes.attempt-1/h.json; echo '{}' > tasks.attempt-1/rank-0.json; echo '{}' > tasks.attempt-1/rank-1.json; exec \"$@\"",
            task_json(0, 2, 1.5, 100),
            task_json(1, 2, 50.0, 300)
        );
        let probe: Vec<String> = ["bash", "-c", &script, "step"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let launcher = vec!["env".to_string()];
        let cancel = CancellationToken::new();
        let m = recorded(execute_prepared(&dir, &launcher, &probe, &first(), &cancel).await);
        assert!(m.tasks.is_empty() && m.nodes.is_empty(), "{m:?}");
        assert_eq!(m.resources, None);
        assert_eq!(m.not_measured.len(), 2, "{:?}", m.not_measured);
        assert!(
            m.not_measured[0].starts_with("tasks.attempt-1/rank-1.json: 50.25 CPU seconds in 1 s"),
            "{:?}",
            m.not_measured
        );
        assert_eq!(
            m.not_measured[1],
            "nodes.attempt-1/h.json: a pipe, not a regular file"
        );
    }

    /// A local run has no step: a task record its app leaves is never read. Planted bug
    /// caught: records read whatever the launcher (the run's tasks would hold rank 0).
    #[tokio::test]
    async fn a_local_run_ignores_task_records_its_app_leaves() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run_dir(tmp.path());
        let script = format!(
            "mkdir -p tasks.attempt-1; echo '{}' > tasks.attempt-1/rank-0.json",
            task_json(0, 1, 0.5, 100)
        );
        std::fs::write(dir.join(RUN_SCRIPT), script).unwrap();
        let cancel = CancellationToken::new();
        let m = recorded(execute_prepared(&dir, &[], &[], &first(), &cancel).await);
        assert!(dir.join("tasks.attempt-1/rank-0.json").exists());
        assert!(m.tasks.is_empty() && m.not_measured.is_empty(), "{m:?}");
        // The wrapper's own measure of its child stands.
        assert!(m.resources.is_some());
    }

    #[tokio::test]
    async fn without_a_launcher_there_is_no_step_and_nothing_is_recorded() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run_dir(tmp.path());
        let probe = vec!["false".to_string()];
        let cancel = CancellationToken::new();
        let m = recorded(execute_prepared(&dir, &[], &probe, &first(), &cancel).await);
        assert_eq!(m.outcome, Outcome::Completed);
        assert!(m.step_governors.is_empty());
        let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        assert!(!text.contains("step_governors"), "{text}");
        // Without a launcher the run is this process's child: its resources are measured.
        assert!(m.resources.is_some_and(|r| r.cpu_s() >= 0.0));
    }

    /// A local run's `core_use`: the wrapper's mask, the tree's CPU over the run's wall
    /// time, its threads sampled as `optgate step` samples a task's — one busy loop asks
    /// for one core, two side by side for two, whatever the machine's load lets them have.
    /// Planted bugs caught: no record for a local run, the runnable threads of the tree
    /// not counted across its processes (two loops read as one), the run's bash counted
    /// as runnable while it waits.
    #[tokio::test]
    async fn a_local_run_records_the_cores_it_was_given_and_asked_for() {
        let busy = "end=$((SECONDS+2)); while [ $SECONDS -lt $end ]; do :; done";
        let mut asked = Vec::new();
        for loops in [1, 2] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = run_dir(tmp.path());
            let script: String = (0..loops).map(|_| format!("( {busy} ) &\n")).collect();
            std::fs::write(dir.join(RUN_SCRIPT), format!("{script}wait\n")).unwrap();
            let m = recorded(
                execute_prepared(&dir, &[], &[], &first(), &CancellationToken::new()).await,
            );
            let u = m.core_use.expect("a local run records its use of cores");
            let cpus = crate::threads::allowed_cpus();
            assert_eq!(u.cpus_allowed as usize, cpus.len());
            assert_eq!(u.cpus_allowed_list, crate::threads::format_cpu_list(&cpus));
            assert_eq!(u.threads_max, Some(1), "{u:?}");
            assert_eq!(u.wall_s, m.elapsed_s);
            assert!(
                u.cpu_s > 0.0 && u.cpu_s <= u.wall_s * f64::from(loops) + 0.5,
                "{u:?}"
            );
            asked.push(u.runnable_threads.expect("sampled"));
            let back = RunManifest::read(&dir).unwrap().unwrap().core_use.unwrap();
            assert_eq!(
                (back.cpus_allowed, back.runnable_threads),
                (u.cpus_allowed, u.runnable_threads)
            );
        }
        assert_eq!(asked, [1.0, 2.0]);
    }

    /// Waits (bounded) until `path` exists.
    async fn wait_for(path: &Path, what: &str) {
        for _ in 0..600 {
            if path.exists() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what}: {} never appeared", path.display());
    }

    /// A race seen on a real cluster: a lost job's wrapper (attempt 1) outlives its job while the
    /// resubmission (attempt 2) runs the same run to completion; then the old wrapper is
    /// stopped and writes late. Its record must not replace the newer one.
    #[tokio::test]
    async fn a_stale_attempt_writing_late_never_replaces_the_newer_record() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run_dir(tmp.path());
        // The first run to start (attempt 1) says so and blocks until it is stopped; the
        // next (attempt 2) prints its own line and ends.
        std::fs::write(
            dir.join(RUN_SCRIPT),
            "if mkdir first-started 2>/dev/null; then echo old; while :; do sleep 0.05; done; fi\necho new\n",
        )
        .unwrap();
        let old_cancel = CancellationToken::new();
        let old = {
            let (dir, cancel) = (dir.clone(), old_cancel.clone());
            tokio::spawn(async move {
                let lost = Attempt {
                    number: 1,
                    scheduler_job_id: Some("lost".into()),
                };
                execute_prepared(&dir, &[], &[], &lost, &cancel).await
            })
        };
        wait_for(&dir.join("first-started"), "attempt 1's app").await;
        let again = Attempt {
            number: 2,
            scheduler_job_id: Some("again".into()),
        };
        let newer =
            recorded(execute_prepared(&dir, &[], &[], &again, &CancellationToken::new()).await);
        assert_eq!(
            (newer.outcome, newer.attempt),
            (Outcome::Completed, Some(2))
        );
        // Now the lost attempt's wrapper is stopped, after the newer one finished.
        old_cancel.cancel();
        let late = old.await.unwrap().unwrap();
        let kept = dir.join(attempt_file(MANIFEST_FILE, 1));
        assert_eq!(
            late,
            Executed::Stale {
                found: Claim::Superseded { by: 2 },
                manifest: kept.clone(),
            }
        );
        let m = RunManifest::read(&dir).unwrap().unwrap();
        assert_eq!(
            (m.outcome, m.attempt, m.scheduler_job_id.as_deref()),
            (Outcome::Completed, Some(2), Some("again")),
            "the stale attempt replaced the newer manifest"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(STDOUT_FILE)).unwrap(),
            "new\n"
        );
        // The stale attempt's evidence stays under its own name.
        let stale: RunManifest = serde_json::from_slice(&std::fs::read(&kept).unwrap()).unwrap();
        assert_eq!(
            (stale.outcome, stale.attempt),
            (Outcome::Interrupted, Some(1))
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(attempt_file(STDOUT_FILE, 1))).unwrap(),
            "old\n"
        );
    }

    /// A lost job's script that goes on to its next run: a newer attempt holds that run, so
    /// the app never starts and nothing of the run's record changes.
    #[tokio::test]
    async fn a_superseded_attempt_does_not_start_the_run() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = run_dir(tmp.path());
        std::fs::write(dir.join(RUN_SCRIPT), "touch app-ran\n").unwrap();
        assert_eq!(claim::claim(&dir, 2).unwrap(), Claim::Held);
        let r = execute_prepared(&dir, &[], &[], &first(), &CancellationToken::new()).await;
        assert_eq!(
            r.unwrap(),
            Executed::NotStarted(Claim::Superseded { by: 2 })
        );
        assert!(
            !dir.join("app-ran").exists(),
            "a superseded attempt ran the app"
        );
        assert!(RunManifest::read(&dir).unwrap().is_none());
        // A final manifest ends the run for every attempt.
        let done = recorded(
            execute_prepared(
                &dir,
                &[],
                &[],
                &Attempt {
                    number: 2,
                    scheduler_job_id: None,
                },
                &CancellationToken::new(),
            )
            .await,
        );
        assert_eq!(done.outcome, Outcome::Completed);
        std::fs::remove_file(dir.join("app-ran")).unwrap();
        let r = execute_prepared(
            &dir,
            &[],
            &[],
            &Attempt {
                number: 3,
                scheduler_job_id: None,
            },
            &CancellationToken::new(),
        )
        .await;
        assert_eq!(r.unwrap(), Executed::NotStarted(Claim::Finished));
        assert!(!dir.join("app-ran").exists(), "a finished run ran again");
    }
}

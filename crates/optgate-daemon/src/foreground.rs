//! `optgate run`'s engine: the daemon's own engine ([`crate::engine::run_with`]) run in this
//! process for one experiment, under the daemon's supervisor ([`crate::supervise`]), with
//! the local backend, its database kept beside the runs (`<root>/.optgate/state.db`).
//! There is no second execution loop: builds, jobs, the run wrapper, fail-fast, looks,
//! added blocks, the report and the cancel are the daemon's.
//!
//! What this module adds is what a foreground command needs around the engine: watching
//! the experiment's runs for progress, Ctrl-C as the daemon's `cancel` (reason
//! [`INTERRUPTED`]: the engine stops the running job, whose run writes an `interrupted`
//! manifest, and records its runs; the finished runs are kept), then bounded waits for the
//! engine's record and the job's end; and resuming from the same root (the interrupt's
//! cancellation reopened, then the engine's crash reconciliation picks up where it stopped).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use optgate_client::StatePaths;
use optgate_experiment::{Experiment, SchedulerKind};
use optgate_sched::local_backend::LocalBackend;
use optgate_sched::{JobId, Scheduler};
use optgate_store::{ExecutionKind, ExperimentRow, ExperimentState, RunRow, RunState, Store};
use optgate_wrapper::manifest::RunManifest;

use crate::context::{Backends, Daemon, Db, UNREACHABLE_GIVE_UP};
use crate::engine::{EngineSettings, run_with};
use crate::error::DaemonError;
use crate::supervise::{RESTART_DELAY, supervise};

/// The directory under a run root that holds the in-process engine's state (its database
/// and local-job registry).
pub const ENGINE_DIR: &str = ".optgate";

/// How often the experiment's runs are read for progress and its end.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// How long a Ctrl-C waits, twice at most: for the engine to record the cancelled jobs'
/// runs, then for those jobs to stop (each run's wrapper sends the app SIGTERM, then
/// SIGKILL after its 5 s grace, and writes the `interrupted` manifest). Past it `optgate
/// run` ends anyway; a resumed execution's reconciliation sees to what is left.
pub const CANCEL_WAIT: Duration = Duration::from_secs(15);

/// Where an execution's engine keeps its state.
pub fn engine_paths(root: &Path) -> StatePaths {
    StatePaths::new(root.join(ENGINE_DIR))
}

/// What the caller shows while the engine works.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The builds started.
    Building,
    /// An arm that will not run here, and why.
    NotApplicable { arm: String, reason: String },
    /// The runs this execution is to have done so far (it grows when a look adds blocks).
    Total { runs: usize, done: usize },
    /// A run's outcome is recorded: `failed` holds the reason of a run that does not count;
    /// `elapsed` is its wall time from its manifest (when it has one).
    RunFinished {
        run_id: String,
        block: u32,
        arm: String,
        failed: Option<String>,
        elapsed: Option<Duration>,
    },
}

/// How a foreground execution ended.
#[derive(Debug)]
pub enum End {
    /// The experiment reached a final state (decided, budget exhausted, failed), with the
    /// runs the engine recorded failed (id and reason; they are not counted) of the arms
    /// that run here.
    Finished {
        row: Box<ExperimentRow>,
        failed_runs: Vec<(String, String)>,
        /// Why the execution could not be added to the user's history (it ran all the
        /// same; its own database under the root keeps it).
        history_error: Option<String>,
    },
    /// Ctrl-C: the running job was stopped; `kept` runs had finished and count on resume.
    Interrupted { kept: usize },
}

/// What a foreground execution needs besides the experiment.
pub struct Options {
    /// The run root (`--out`, or a new directory under the experiment's workdir).
    pub root: PathBuf,
    /// The machine-wide lock every local run takes (the user's state directory's), so
    /// these runs never overlap the daemon's local jobs.
    pub machine_lock: PathBuf,
    /// The optgate binary the jobs call (`exec-run`).
    pub optgate_bin: PathBuf,
    pub settings: EngineSettings,
    /// Points where the engine panics (tests: the supervisor must start it again); none
    /// armed outside tests.
    pub failpoints: Arc<crate::failpoint::Failpoints>,
    /// How long the execution waits for a full file system to have space again before it
    /// gives up ([`crate::space::NO_SPACE_GIVE_UP`]).
    pub no_space_give_up: Duration,
    /// The user's state directory, whose database's history the ended execution joins
    /// (`crate::history::record_in_user_history`); none: it joins no history.
    pub history: Option<StatePaths>,
}

/// The reason an interrupted execution's experiment is cancelled with (Ctrl-C, or a
/// signal to `optgate run`). A resumed execution reopens exactly that cancellation
/// (`Store::reopen_cancelled`): the runs it stopped run again, the finished ones count.
pub const INTERRUPTED: &str =
    "interrupted (Ctrl-C or a signal to `optgate run`); `optgate run --out` of its root resumes it";

/// Runs `exp` to its end in this process: a new execution in `opts.root`, or the one
/// already there resumed. The engine runs under the daemon's supervisor; `interrupt`
/// (Ctrl-C) cancels the experiment through the engine's own cancel, keeping what finished.
pub async fn run(
    exp: &Experiment,
    opts: Options,
    mut on_event: impl FnMut(Event),
    interrupt: CancellationToken,
) -> Result<End, DaemonError> {
    let state_dir = engine_paths(&opts.root).dir;
    let ctx = open_engine(&opts)
        .await
        .map_err(|e| as_no_space(e, &state_dir))?;
    let id = the_execution(&ctx, exp, &opts.root)
        .await
        .map_err(|e| as_no_space(e, &state_dir))?;
    let (c, stop, settings) = (ctx.clone(), ctx.shutdown.clone(), opts.settings.clone());
    let mut engine = tokio::spawn(supervise(
        "the engine",
        move || run_with(c.clone(), stop.clone(), settings.clone()),
        ctx.shutdown.clone(),
        RESTART_DELAY,
    ));
    let mut watch = Watch::new(optgate_evidence::Layout::new(&opts.root));
    let end = loop {
        let (row, runs, na) = read_state(&ctx, &id).await?;
        watch.report(&row, &runs, &na, &mut on_event);
        if row.state.is_terminal() {
            break finished(row, &runs, &na);
        }
        if let Some((waited, lack)) = ctx.space.now()
            && waited >= opts.no_space_give_up
        {
            return Err(give_up_on_space(&ctx, &id, engine, waited, lack).await);
        }
        tokio::select! {
            _ = interrupt.cancelled() => break End::Interrupted { kept: 0 },
            ended = &mut engine => return Err(engine_ended(ended)),
            _ = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
    };
    let stop = match end {
        // On a full disk the cancel cannot be recorded: the error says so.
        End::Interrupted { .. } => stop_on_interrupt(&ctx, &id)
            .await
            .map_err(|e| as_no_space(e, &state_dir))?,
        finished => Stop::Ended(finished),
    };
    ctx.shutdown.cancel();
    engine.await.map_err(crate::error::join_error)??;
    match stop {
        Stop::Ended(finished) => Ok(join_history(&ctx, &id, opts.history.as_ref(), finished).await),
        Stop::Cancelled(jobs) => {
            wait_for_stopped_jobs(&ctx, &id, jobs).await?;
            Ok(End::Interrupted {
                kept: kept_runs(&ctx, &id).await?,
            })
        }
    }
}

/// Adds the ended execution to the user's history (its own database's record of it, as a
/// `run` row); a failure is noted on the end, never the execution's failure.
async fn join_history(ctx: &Daemon, id: &str, user: Option<&StatePaths>, end: End) -> End {
    let (
        Some(user),
        End::Finished {
            row, failed_runs, ..
        },
    ) = (user, &end)
    else {
        return end;
    };
    let i = id.to_string();
    let read = ctx
        .db
        .call(move |s| crate::history::read_execution(s, &i, ExecutionKind::Run))
        .await;
    let user = user.clone();
    let recorded = match read {
        Ok(Some(e)) => {
            tokio::task::spawn_blocking(move || crate::history::record_in_user_history(&user, &e))
                .await
                .map_err(crate::error::join_error)
                .and_then(|r| r)
        }
        Ok(None) => Ok(()),
        Err(e) => Err(e),
    };
    End::Finished {
        row: row.clone(),
        failed_runs: failed_runs.clone(),
        history_error: recorded.err().map(|e| e.to_string()),
    }
}

/// `e` as the lack of space it is ("no space left on the state directory's file system: N
/// bytes free"), if it is one; else `e`. For the writes before the engine starts (its
/// database, the experiment's record), which have nothing to wait on.
fn as_no_space(e: DaemonError, state_dir: &Path) -> DaemonError {
    match crate::space::no_space_in(&e, state_dir) {
        Some(lack) => DaemonError::NoSpace(lack),
        None => e,
    }
}

/// The file system stayed full past the limit: the engine stops and the error says what is
/// full. A job still running is left to end by itself (it cannot be recorded cancelled on a
/// full disk, and a run cancelled so would count as failed): each of its runs that cannot
/// write its manifest leaves its ENOSPC mark and runs again when `--out` resumes the
/// execution.
async fn give_up_on_space(
    ctx: &Daemon,
    id: &str,
    engine: tokio::task::JoinHandle<Result<(), DaemonError>>,
    waited: Duration,
    lack: optgate_client::space::NoSpace,
) -> DaemonError {
    tracing::error!(
        "experiment {id}: gave up after {waited:?}: {}",
        lack.reason()
    );
    ctx.shutdown.cancel();
    let _ = engine.await;
    DaemonError::GaveUpOnSpace { waited, lack }
}

/// The engine's context for an execution: its directory under the root (0700), its
/// database, and the local backend every job of it runs on.
async fn open_engine(opts: &Options) -> Result<Arc<Daemon>, DaemonError> {
    use std::os::unix::fs::DirBuilderExt;
    let paths = engine_paths(&opts.root);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&opts.root)
        .map_err(DaemonError::io("create", &opts.root))?;
    paths.prepare_dir()?;
    let store = {
        let db = paths.db();
        tokio::task::spawn_blocking(move || Store::open(&db))
            .await
            .map_err(crate::error::join_error)??
    };
    for file in paths.state_files() {
        optgate_client::paths::private_file(&file)?;
    }
    let (dir, lock) = (paths.dir.clone(), opts.machine_lock.clone());
    let backend: Arc<dyn Scheduler> = Arc::new(LocalBackend::with_lock(&dir, &lock));
    Ok(Arc::new(Daemon {
        paths,
        db: Db::new(store),
        wake: tokio::sync::Notify::new(),
        // Every job runs here, whatever scheduler the file names (`optgate run --here`).
        backends: Backends::with_factory(Arc::new(move |_, _| backend.clone())),
        optgate_bin: opts.optgate_bin.clone(),
        started_at: optgate_wrapper::run::now_rfc3339(),
        shutdown: CancellationToken::new(),
        unreachable_give_up: UNREACHABLE_GIVE_UP,
        failpoints: opts.failpoints.clone(),
        space: Default::default(),
    }))
}

/// The id of the execution's experiment: the one its database holds (reopened when an
/// interrupt cancelled it), or a new one recorded now.
async fn the_execution(ctx: &Daemon, exp: &Experiment, root: &Path) -> Result<String, DaemonError> {
    match the_experiment(ctx).await? {
        Some(row) => {
            let i = row.id.clone();
            if ctx
                .db
                .call(move |s| s.reopen_cancelled(&i, INTERRUPTED))
                .await?
            {
                tracing::info!("experiment {}: resumed after an interrupt", row.id);
            }
            Ok(row.id)
        }
        // A new execution (or one killed before its experiment was recorded).
        None => {
            let id = crate::ids::new_id();
            crate::handlers::submit::record_new(ctx, exp, &id, root, SchedulerKind::Local).await?;
            Ok(id)
        }
    }
}

/// The end of an execution whose experiment reached a final state.
fn finished(row: ExperimentRow, runs: &[RunRow], not_applicable: &BTreeMap<String, String>) -> End {
    let failed_runs = runs
        .iter()
        .filter(|r| r.state == RunState::Failed && !not_applicable.contains_key(&r.arm))
        .map(|r| (r.run_id.clone(), r.detail.clone().unwrap_or_default()))
        .collect();
    End::Finished {
        row: Box::new(row),
        failed_runs,
        history_error: None,
    }
}

/// The error of an engine supervisor that ended while the execution still watched: it
/// died more often than the supervisor restarts it.
fn engine_ended(ended: Result<Result<(), DaemonError>, tokio::task::JoinError>) -> DaemonError {
    match ended {
        Ok(Err(e)) => e,
        Err(e) => crate::error::join_error(e),
        Ok(Ok(())) => DaemonError::Experiment {
            id: "this execution".into(),
            message: "its engine stopped before the experiment ended".into(),
        },
    }
}

/// Ctrl-C: the daemon's cancel of the experiment
/// ([`crate::handlers::cancelling::cancel_experiment`], reason [`INTERRUPTED`]); the engine's
/// next pass stops its live jobs and builds and records their runs. Waits (at most [`CANCEL_WAIT`]) until the engine has.
/// An experiment that ended just before the interrupt ends as it ended (returned).
async fn stop_on_interrupt(ctx: &Daemon, id: &str) -> Result<Stop, DaemonError> {
    let jobs: Vec<JobId> = live_jobs(ctx, id)
        .await?
        .into_iter()
        .filter_map(|j| j.scheduler_job_id.map(JobId))
        .collect();
    let before = crate::handlers::cancelling::cancel_experiment(ctx, id, INTERRUPTED).await?;
    if before.is_some_and(|b| b.is_terminal()) {
        let (row, runs, na) = read_state(ctx, id).await?;
        return Ok(Stop::Ended(finished(row, &runs, &na)));
    }
    let recorded = wait_until(CANCEL_WAIT, || async {
        Ok(live_jobs(ctx, id).await?.is_empty())
    })
    .await?;
    if !recorded {
        tracing::warn!("experiment {id}: the engine did not stop its jobs within {CANCEL_WAIT:?}");
    }
    Ok(Stop::Cancelled(jobs))
}

/// What an interrupt did.
enum Stop {
    /// The experiment had already ended (just before the interrupt): this is its end.
    Ended(End),
    /// The engine cancelled it; these are the scheduler ids of the jobs it was running.
    Cancelled(Vec<JobId>),
}

/// Waits (at most [`CANCEL_WAIT`]) until the jobs the engine cancelled have ended at the
/// backend: their runs' wrappers have stopped the apps and written their `interrupted`
/// manifests, and the machine-wide lock is free again.
async fn wait_for_stopped_jobs(
    ctx: &Daemon,
    id: &str,
    stopped: Vec<JobId>,
) -> Result<(), DaemonError> {
    let backend = ctx.backend(SchedulerKind::Local);
    let ended = wait_until(CANCEL_WAIT, || {
        let (b, ids) = (backend.clone(), stopped.clone());
        async move {
            let asked = ids.clone();
            let states = tokio::task::spawn_blocking(move || b.poll(&asked))
                .await
                .map_err(crate::error::join_error)?
                .map_err(|e| DaemonError::Experiment {
                    id: id.to_string(),
                    message: format!("cannot poll its stopped local jobs: {e}"),
                })?;
            Ok(ids
                .iter()
                .all(|j| states.get(j).is_none_or(|s| s.is_finished())))
        }
    })
    .await?;
    if !ended {
        tracing::warn!("experiment {id}: its stopped jobs did not end within {CANCEL_WAIT:?}");
    }
    Ok(())
}

/// Calls `check` every [`WATCH_INTERVAL`] until it is true or `limit` has passed; returns
/// whether it became true.
async fn wait_until<F, Fut>(limit: Duration, mut check: F) -> Result<bool, DaemonError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, DaemonError>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await? {
            return Ok(true);
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(WATCH_INTERVAL).await;
    }
}

/// The experiment's jobs the engine has not yet recorded as ended.
async fn live_jobs(ctx: &Daemon, id: &str) -> Result<Vec<optgate_store::JobRow>, DaemonError> {
    let i = id.to_string();
    ctx.db
        .call(move |s| {
            Ok(s.jobs(&i)?
                .into_iter()
                .filter(|j| j.state.is_live())
                .collect())
        })
        .await
}

/// How many runs the engine has recorded completed (of the arms that run here): they count
/// when the execution resumes.
async fn kept_runs(ctx: &Daemon, id: &str) -> Result<usize, DaemonError> {
    let (_, runs, na) = read_state(ctx, id).await?;
    Ok(runs
        .iter()
        .filter(|r| r.state == RunState::Completed && !na.contains_key(&r.arm))
        .count())
}

/// The one experiment of an execution's database (none in a new one).
async fn the_experiment(ctx: &Daemon) -> Result<Option<ExperimentRow>, DaemonError> {
    let mut rows = ctx.db.call(|s| s.experiments()).await?;
    match rows.len() {
        0 | 1 => Ok(rows.pop()),
        _ => Err(DaemonError::Experiment {
            id: ctx.paths.dir.display().to_string(),
            message: format!(
                "an execution's database holds one experiment, this one holds {}",
                rows.len()
            ),
        }),
    }
}

type State = (ExperimentRow, Vec<RunRow>, BTreeMap<String, String>);

async fn read_state(ctx: &Daemon, id: &str) -> Result<State, DaemonError> {
    let id = id.to_string();
    let i = id.clone();
    ctx.db
        .call(move |s| {
            let id = i;
            Ok((s.experiment(&id)?, s.runs(&id)?, s.not_applicable(&id)?))
        })
        .await
        .and_then(|(row, runs, na)| match row {
            Some(row) => Ok((row, runs, na)),
            None => Err(DaemonError::Experiment {
                id: id.clone(),
                message: "is no longer in the execution's database".into(),
            }),
        })
}

/// What has been reported so far, so each fact is reported once.
struct Watch {
    started: bool,
    building: bool,
    not_applicable: BTreeSet<String>,
    total: Option<(usize, usize)>,
    finished: BTreeSet<String>,
    /// Where the runs' manifests are (their wall time).
    layout: optgate_evidence::Layout,
}

impl Watch {
    fn new(layout: optgate_evidence::Layout) -> Watch {
        Watch {
            started: false,
            building: false,
            not_applicable: BTreeSet::new(),
            total: None,
            finished: BTreeSet::new(),
            layout,
        }
    }

    /// Reports what changed since the last call (reading a finished run's manifest for its
    /// wall time).
    fn report(
        &mut self,
        row: &ExperimentRow,
        runs: &[RunRow],
        na: &BTreeMap<String, String>,
        on_event: &mut impl FnMut(Event),
    ) {
        if row.state == ExperimentState::Building && !self.building {
            self.building = true;
            on_event(Event::Building);
        }
        for (arm, reason) in na {
            if self.not_applicable.insert(arm.clone()) {
                on_event(Event::NotApplicable {
                    arm: arm.clone(),
                    reason: reason.clone(),
                });
            }
        }
        let counted: Vec<&RunRow> = runs.iter().filter(|r| !na.contains_key(&r.arm)).collect();
        let ended = |r: &RunRow| matches!(r.state, RunState::Completed | RunState::Failed);
        // Runs that had ended before this execution started are done, not news.
        if !self.started {
            self.started = true;
            self.finished = counted
                .iter()
                .filter(|r| ended(r))
                .map(|r| r.run_id.clone())
                .collect();
        }
        let total = (counted.len(), self.finished.len());
        if self.total != Some(total) {
            self.total = Some(total);
            on_event(Event::Total {
                runs: total.0,
                done: total.1,
            });
        }
        for r in counted.iter().filter(|r| ended(r)) {
            if self.finished.insert(r.run_id.clone()) {
                on_event(Event::RunFinished {
                    run_id: r.run_id.clone(),
                    block: r.block,
                    arm: r.arm.clone(),
                    failed: (r.state == RunState::Failed)
                        .then(|| r.detail.clone().unwrap_or_default()),
                    elapsed: RunManifest::read(&self.layout.run_dir(&r.run_id))
                        .ok()
                        .flatten()
                        .map(|m| Duration::from_secs_f64(m.elapsed_s.max(0.0))),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Ctrl-C's waits are bounded: a check that never comes true gives up at the limit
    /// (on tokio's paused clock), having asked again every [`WATCH_INTERVAL`]; one that
    /// comes true ends the wait at once. Catches an unbounded loop (this test would hang)
    /// and a wait that gives up before its limit.
    #[tokio::test(start_paused = true)]
    async fn a_wait_ends_at_its_limit_or_when_its_check_comes_true() {
        let start = tokio::time::Instant::now();
        let mut asked = 0u32;
        let ended = wait_until(CANCEL_WAIT, || {
            asked += 1;
            async { Ok(false) }
        })
        .await
        .unwrap();
        assert!(!ended);
        assert!(start.elapsed() >= CANCEL_WAIT, "{:?}", start.elapsed());
        assert!(start.elapsed() < CANCEL_WAIT + WATCH_INTERVAL * 2);
        let expected = (CANCEL_WAIT.as_millis() / WATCH_INTERVAL.as_millis()) as u32;
        assert!(asked >= expected, "{asked}");
        let start = tokio::time::Instant::now();
        assert!(
            wait_until(CANCEL_WAIT, || async { Ok(true) })
                .await
                .unwrap()
        );
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}

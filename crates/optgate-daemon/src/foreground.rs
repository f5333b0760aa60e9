//! `optgate run`'s engine: the daemon's own engine ([`crate::engine::run_with`]) run in this
//! process for one experiment, with the local backend, its database kept beside the runs
//! (`<root>/.optgate/state.db`). There is no second execution loop: builds, jobs, the run
//! wrapper, fail-fast, looks, added blocks and the report are the daemon's.
//!
//! What this module adds is what a foreground command needs around the engine: watching
//! the experiment's runs for progress, stopping on Ctrl-C (the running job is cancelled, so
//! its run writes an `interrupted` manifest; the finished runs are kept) and resuming from
//! the same root (the engine's crash reconciliation picks up where it stopped).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use optgate_experiment::{Experiment, SchedulerKind};
use optgate_sched::local_backend::LocalBackend;
use optgate_sched::{JobId, Scheduler};
use optgate_store::{
    ExperimentRow, ExperimentState, JobRecordState, RunRow, RunState, RunUpdate, Store,
};
use optgate_wrapper::manifest::{Outcome, RunManifest};

use crate::context::{Backends, Daemon, Db, UNREACHABLE_GIVE_UP};
use crate::engine::{EngineSettings, run_with};
use crate::error::DaemonError;
use crate::paths::StatePaths;

/// The directory under a run root that holds the in-process engine's state (its database
/// and local-job registry).
pub const ENGINE_DIR: &str = ".optgate";

/// How often the experiment's runs are read for progress and its end.
pub const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// How long a Ctrl-C waits for the cancelled job to stop (its run's wrapper sends the app
/// SIGTERM, then SIGKILL after its 5 s grace, and writes the `interrupted` manifest).
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
    /// arms that were not applicable here.
    Finished {
        row: Box<ExperimentRow>,
        not_applicable: BTreeMap<String, String>,
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
}

/// Runs `exp` to its end in this process: a new execution in `opts.root`, or the one
/// already there resumed. `interrupt` (Ctrl-C) stops it, keeping what finished.
pub async fn run(
    exp: &Experiment,
    opts: Options,
    mut on_event: impl FnMut(Event),
    interrupt: CancellationToken,
) -> Result<End, DaemonError> {
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
        crate::paths::private_file(&file)?;
    }
    let shutdown = CancellationToken::new();
    let (dir, lock) = (paths.dir.clone(), opts.machine_lock.clone());
    let backend: Arc<dyn Scheduler> = Arc::new(LocalBackend::with_lock(&dir, &lock));
    let ctx = Arc::new(Daemon {
        paths,
        db: Db::new(store),
        wake: tokio::sync::Notify::new(),
        // Every job runs here, whatever scheduler the file names (`optgate run --here`).
        backends: Backends::with_factory(Arc::new(move |_, _| backend.clone())),
        optgate_bin: opts.optgate_bin.clone(),
        started_at: optgate_wrapper::run::now_rfc3339(),
        shutdown: shutdown.clone(),
        unreachable_give_up: UNREACHABLE_GIVE_UP,
        failpoints: Default::default(),
    });
    let id = match the_experiment(&ctx).await? {
        Some(row) => row.id,
        // A new execution (or one killed before its experiment was recorded).
        None => {
            let id = crate::handlers::submit::new_id();
            crate::handlers::submit::record_new(&ctx, exp, &id, &opts.root, SchedulerKind::Local)
                .await?;
            id
        }
    };
    let engine = tokio::spawn(run_with(ctx.clone(), shutdown.clone(), opts.settings));
    let mut watch = Watch::new(optgate_runner::Layout::new(&opts.root));
    let end = loop {
        let (row, runs, na) = read_state(&ctx, &id).await?;
        watch.report(&row, &runs, &na, &mut on_event);
        if row.state.is_terminal() {
            break End::Finished {
                row: Box::new(row),
                not_applicable: na,
            };
        }
        tokio::select! {
            _ = interrupt.cancelled() => break End::Interrupted { kept: 0 },
            _ = tokio::time::sleep(WATCH_INTERVAL) => {}
        }
    };
    shutdown.cancel();
    engine.await.map_err(crate::error::join_error)?;
    match end {
        End::Interrupted { .. } => {
            let kept = stop_jobs(&ctx, &id, &opts.root).await?;
            Ok(End::Interrupted { kept })
        }
        finished => Ok(finished),
    }
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
    layout: optgate_runner::Layout,
}

impl Watch {
    fn new(layout: optgate_runner::Layout) -> Watch {
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

/// After Ctrl-C (the engine stopped): cancels the experiment's live jobs, waits for them to
/// stop, and records their ends — finished runs keep their outcome, the others go back to
/// pending so a resumed execution runs them (an interruption is not one of the job's
/// attempts failing). Returns how many runs have finished.
async fn stop_jobs(ctx: &Daemon, id: &str, root: &Path) -> Result<usize, DaemonError> {
    let i = id.to_string();
    let live: Vec<optgate_store::JobRow> = ctx
        .db
        .call(move |s| {
            Ok(s.jobs(&i)?
                .into_iter()
                .filter(|j| j.state.is_live())
                .collect())
        })
        .await?;
    let backend = ctx.backend(SchedulerKind::Local);
    let ids: Vec<JobId> = live
        .iter()
        .filter_map(|j| j.scheduler_job_id.clone().map(JobId))
        .collect();
    tokio::task::spawn_blocking(move || cancel_and_wait(backend.as_ref(), &ids))
        .await
        .map_err(crate::error::join_error)?
        .map_err(|e| DaemonError::Experiment {
            id: id.to_string(),
            message: format!("cannot stop its local jobs: {e}"),
        })?;
    // Every run of a stopped job goes back to pending: on resume the engine records the
    // ones whose manifest says they finished (and counts them as it counts any run), and
    // runs the others. An interruption is not one of the job's attempts failing.
    let jobs: Vec<optgate_store::JobRow> = live
        .into_iter()
        .filter(|j| j.state == JobRecordState::Submitted)
        .collect();
    let i = id.to_string();
    let runs = ctx
        .db
        .call(move |s| {
            let queued: BTreeSet<String> = s
                .runs(&i)?
                .into_iter()
                .filter(|r| r.state == RunState::Queued)
                .map(|r| r.run_id)
                .collect();
            for job in jobs {
                let updates: Vec<RunUpdate> = job
                    .run_ids
                    .iter()
                    .filter(|r| queued.contains(*r))
                    .map(|r| RunUpdate {
                        run_id: r.clone(),
                        state: RunState::Pending,
                        detail: Some("stopped by Ctrl-C; runs again when resumed".into()),
                    })
                    .collect();
                s.finish_job(
                    &job,
                    JobRecordState::Cancelled,
                    Some("stopped by Ctrl-C"),
                    &updates,
                )?;
            }
            s.runs(&i)
        })
        .await?;
    let layout = optgate_runner::Layout::new(root);
    Ok(runs
        .iter()
        .filter(|r| {
            RunManifest::read(&layout.run_dir(&r.run_id))
                .ok()
                .flatten()
                .is_some_and(|m| m.outcome == Outcome::Completed)
        })
        .count())
}

/// Cancels the jobs `ids` and waits (at most [`CANCEL_WAIT`]) until each has ended.
fn cancel_and_wait(
    backend: &dyn Scheduler,
    ids: &[JobId],
) -> Result<(), optgate_sched::SchedError> {
    backend.cancel(ids)?;
    let deadline = std::time::Instant::now() + CANCEL_WAIT;
    while std::time::Instant::now() < deadline {
        let states = backend.poll(ids)?;
        if ids
            .iter()
            .all(|j| states.get(j).is_none_or(|s| s.is_finished()))
        {
            break;
        }
        std::thread::sleep(WATCH_INTERVAL);
    }
    Ok(())
}

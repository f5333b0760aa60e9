//! The engine: one loop that moves every active experiment along its state machine
//! (planned → building → running → analysing → decided | budget_exhausted | failed |
//! cancelled), polling all live jobs in one query per backend, at an adaptive interval
//! with jitter (`optgate_sched::poll`).
//!
//! Rule: every state change is committed before it is acted on. A job is recorded as
//! `submitting` before `submit` is called and as `submitted` with its id after; a run's
//! outcome is read from its manifest and recorded with its job's end in one transaction; a
//! look is recorded with its consequence (more blocks, or the end) in one transaction.
//! What a crash leaves in doubt is repaired by [`crate::reconcile::reconcile`], run before
//! the first pass and after any pass that left a submission in doubt.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use optgate_experiment::{PlannedRun, SchedulerKind};
use optgate_probe::Probe;
use optgate_runner::RunStatus;
use optgate_runner::collect::collect_run;
use optgate_sched::local::{BUILD_RECORD, BuildRecord, execute_build};
use optgate_sched::manifest::write_atomic;
use optgate_sched::poll::{Activity, PollSchedule};
use optgate_sched::{JobId, JobSpec, JobState, Outcome, RunManifest};
use optgate_store::{
    AfterLook, BlockRow, ExperimentRow, ExperimentState, JobRecordState, JobRow, LookRow, NewJob,
    NewRun, RunRow, RunState, RunUpdate,
};

use crate::context::{Daemon, kind_of};
use crate::decide::{Next, next_step, next_step_staged};
use crate::error::DaemonError;
use crate::protocol::VariantDecision;
use crate::reconcile::reconcile;
use crate::work::Work;

/// How often each backend's jobs are polled. Each kind keeps its own clock, so an active
/// local experiment (whose job states are a few files away) never makes the daemon ask
/// `squeue` or `flux jobs` more often than their own schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineSettings {
    /// Local jobs: 100 ms while they change, growing to 2 s.
    pub local: PollSchedule,
    /// Slurm and Flux: 10 s while jobs change, growing to 3 minutes (±20 % jitter), so a
    /// shared controller sees at most one query per daemon every 10 s.
    pub cluster: PollSchedule,
}

impl Default for EngineSettings {
    fn default() -> Self {
        EngineSettings {
            local: PollSchedule::new(Duration::from_millis(100), Duration::from_secs(2)),
            cluster: PollSchedule::default(),
        }
    }
}

impl EngineSettings {
    /// The schedule of scheduler kind `kind` (as stored: `local`, `slurm`, `flux`).
    pub fn schedule_for(&self, kind: &str) -> PollSchedule {
        match kind {
            "local" => self.local.clone(),
            _ => self.cluster.clone(),
        }
    }
}

/// Each scheduler kind's poll schedule and when it is next due.
#[derive(Debug, Default)]
pub(crate) struct PollClocks {
    clocks: BTreeMap<String, (PollSchedule, tokio::time::Instant)>,
}

impl PollClocks {
    /// Keeps a clock for each kind in use (a new one is due at once), drops the others.
    fn track(&mut self, kinds: &BTreeSet<String>, settings: &EngineSettings) {
        self.clocks.retain(|k, _| kinds.contains(k));
        for k in kinds {
            self.clocks
                .entry(k.clone())
                .or_insert_with(|| (settings.schedule_for(k), tokio::time::Instant::now()));
        }
    }

    /// Whether kind `kind`'s jobs are due for a poll (an unknown kind is).
    fn is_due(&self, kind: &str, now: tokio::time::Instant) -> bool {
        self.clocks.get(kind).is_none_or(|(_, due)| *due <= now)
    }

    /// After a pass: every kind polled in it gets its next due time from what the pass
    /// found; a pass that changed something brings every clock back to its shortest wait.
    fn advance(&mut self, polled: &BTreeSet<String>, activity: Activity) {
        let now = tokio::time::Instant::now();
        for (kind, (schedule, due)) in &mut self.clocks {
            if polled.contains(kind) || activity == Activity::Changed {
                *due = now + schedule.next(activity, rand::random::<f64>());
            }
        }
    }

    /// How long until the next kind is due (None: no kind in use).
    fn next_due_in(&self) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        self.clocks
            .values()
            .map(|(_, due)| due.saturating_duration_since(now))
            .min()
    }
}

/// A build running on the login node for one experiment.
struct BuildTask {
    cancel: CancellationToken,
    handle: JoinHandle<()>,
}

pub struct Engine {
    pub(crate) ctx: Arc<Daemon>,
    work: HashMap<String, Arc<Work>>,
    builds: HashMap<String, BuildTask>,
    build_tasks: TaskTracker,
    /// This node's facts, probed once (reports, not-applicable arms of local experiments).
    node: Option<Arc<Probe>>,
    /// A submission ended with its outcome unknown: reconcile before the next pass.
    pub(crate) in_doubt: bool,
    /// A scheduler could not be reached in this pass: the next one waits the longest
    /// interval instead of asking again at once.
    pub(crate) unreachable: bool,
    /// Running experiments whose scheduler cannot be reached, since when (the first pass
    /// that could not reach it); past `Daemon::unreachable_give_up` they end `failed`.
    unreachable_since: HashMap<String, std::time::Instant>,
    /// Experiments whose last passes each ended in an error of their own (a look that
    /// cannot be taken, a stored file that no longer loads): how many in a row, and the
    /// last. Past [`MAX_EXPERIMENT_ERRORS`] the experiment ends `failed` with it.
    errors_in_a_row: HashMap<String, u32>,
    /// Submissions of a job that failed transiently so far (its outcome unknown, so it was
    /// looked for and submitted again); past [`MAX_SUBMIT_ATTEMPTS`] the experiment fails.
    submit_failures: HashMap<i64, u32>,
    /// Each scheduler kind's poll clock.
    clocks: PollClocks,
    /// The kinds polled in the current pass (their clocks advance after it).
    polled: BTreeSet<String>,
}

/// How many times one job's submission may fail transiently (a timed-out `sbatch`, a busy
/// controller; each already retried with back-off by the backend) before the experiment
/// ends `failed` with the last error: 5. Each failure is followed by a lookup by name, so
/// a submission that did go through is found, never repeated.
pub const MAX_SUBMIT_ATTEMPTS: u32 = 5;

/// How many passes in a row may end in an error of one experiment's own before it ends
/// `failed` with that error quoted: 5. Such an error (a look whose data cannot be read or
/// written, a stored experiment file that no longer validates) comes back at every pass;
/// retrying it for ever would leave the experiment `analysing` with no end.
pub const MAX_EXPERIMENT_ERRORS: u32 = 5;

/// Counts one more error of an experiment; the reason it ends with once the count reaches
/// [`MAX_EXPERIMENT_ERRORS`]. Pure.
pub(crate) fn count_error(
    errors: &mut HashMap<String, u32>,
    id: &str,
    message: &str,
) -> Option<String> {
    let n = errors.entry(id.to_string()).or_insert(0);
    *n += 1;
    (*n >= MAX_EXPERIMENT_ERRORS).then(|| {
        format!("gave up after {n} attempts in a row that failed the same way; the last error: {message}")
    })
}

/// How an experiment's reason starts while its scheduler cannot be reached; cleared when
/// the scheduler answers again.
pub(crate) const UNREACHABLE: &str = "cannot reach the";

/// How the reason shown while waiting for an unreachable scheduler ends.
const WAITING: &str = "; waiting for it (asked again at each pass, at the longest poll interval)";

/// The reason shown while `kind`'s scheduler cannot be reached.
pub(crate) fn unreachable_reason(kind: &str, e: &optgate_sched::SchedError) -> String {
    format!("{UNREACHABLE} {kind} scheduler: {e}{WAITING}")
}

/// The reason of an experiment that waited `limit` for its scheduler in vain; `reason` is
/// the last [`unreachable_reason`], quoted without its "waiting" part.
pub(crate) fn gave_up_reason(reason: &str, limit: Duration) -> String {
    let last = reason.strip_suffix(WAITING).unwrap_or(reason);
    let limit = match limit.as_secs() {
        _ if limit.subsec_nanos() != 0 => format!("{:.3}s", limit.as_secs_f64()),
        s if s >= 3600 && s % 3600 == 0 => format!("{}h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    };
    format!(
        "gave up after {limit} without reaching the scheduler (the daemon's UNREACHABLE_GIVE_UP); the last error: {last}"
    )
}

/// Runs the engine until `shutdown` is cancelled: reconcile, then passes.
pub async fn run(ctx: Arc<Daemon>, shutdown: CancellationToken) {
    run_with(ctx, shutdown, EngineSettings::default()).await
}

/// [`run`] with the given poll settings (tests poll an in-process fake every few ms).
pub async fn run_with(ctx: Arc<Daemon>, shutdown: CancellationToken, settings: EngineSettings) {
    let mut engine = Engine::new(ctx.clone());
    // The longest wait when no experiment is active (a submission wakes the engine).
    let idle = settings.cluster.max;
    match reconcile(&mut engine).await {
        Ok(r) => tracing::info!("reconciled after start: {r}"),
        Err(e) => {
            tracing::error!("reconciliation failed (retried before the next pass): {e}");
            engine.in_doubt = true;
        }
    }
    loop {
        if shutdown.is_cancelled() {
            break;
        }
        let activity = match engine.pass(&shutdown).await {
            Ok((activity, active_kinds)) => {
                engine.clocks.track(&active_kinds, &settings);
                activity
            }
            Err(e) => {
                tracing::error!("engine pass failed: {e}");
                Activity::Throttled
            }
        };
        let polled = std::mem::take(&mut engine.polled);
        engine.clocks.advance(&polled, activity);
        let wait = engine.clocks.next_due_in().unwrap_or(idle);
        // An experiment waiting for an unreachable scheduler is looked at again when its
        // give-up limit passes, not only at the next (longest) interval.
        let wait = engine
            .give_up_due_in()
            .map_or(wait, |due| wait.min(due.max(Duration::from_secs(1))));
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
            _ = ctx.wake.notified() => {}
        }
    }
    engine.stop().await;
}

impl Engine {
    pub fn new(ctx: Arc<Daemon>) -> Engine {
        Engine {
            ctx,
            work: HashMap::new(),
            builds: HashMap::new(),
            build_tasks: TaskTracker::new(),
            node: None,
            in_doubt: false,
            unreachable: false,
            unreachable_since: HashMap::new(),
            errors_in_a_row: HashMap::new(),
            submit_failures: HashMap::new(),
            clocks: PollClocks::default(),
            polled: BTreeSet::new(),
        }
    }

    /// Stops builds (their experiments stay `building`; the next start rebuilds) and
    /// waits for them.
    async fn stop(&mut self) {
        for b in self.builds.values() {
            b.cancel.cancel();
        }
        self.build_tasks.close();
        self.build_tasks.wait().await;
    }

    /// How long until the first experiment waiting for an unreachable scheduler reaches
    /// its give-up limit (zero when one already has).
    fn give_up_due_in(&self) -> Option<Duration> {
        let limit = self.ctx.unreachable_give_up;
        self.unreachable_since
            .values()
            .map(|since| limit.saturating_sub(since.elapsed()))
            .min()
    }

    pub(crate) fn build_in_flight(&self, id: &str) -> bool {
        self.builds.get(id).is_some_and(|b| !b.handle.is_finished())
    }

    fn node(&mut self) -> Arc<Probe> {
        self.node
            .get_or_insert_with(|| Arc::new(optgate_probe::probe_live()))
            .clone()
    }

    /// The working set of an experiment, loaded on first use.
    pub(crate) async fn work(&mut self, row: &ExperimentRow) -> Result<Arc<Work>, DaemonError> {
        if let Some(w) = self.work.get(&row.id) {
            return Ok(w.clone());
        }
        let id = row.id.clone();
        let text = self
            .ctx
            .db
            .call(move |s| s.source_text(&id))
            .await?
            .unwrap_or_default();
        let kind = kind_of(&row.scheduler).unwrap_or(SchedulerKind::Local);
        let work = Work::load(row, &text, self.ctx.backend(kind)).map_err(|message| {
            DaemonError::Experiment {
                id: row.id.clone(),
                message,
            }
        })?;
        let work = Arc::new(work);
        self.work.insert(row.id.clone(), work.clone());
        Ok(work)
    }

    /// One pass over every active experiment. Returns what happened (for the poll
    /// interval) and the scheduler kinds in use.
    async fn pass(
        &mut self,
        shutdown: &CancellationToken,
    ) -> Result<(Activity, BTreeSet<String>), DaemonError> {
        self.unreachable = false;
        if self.in_doubt {
            self.in_doubt = false;
            match reconcile(self).await {
                Ok(r) => tracing::info!("reconciled: {r}"),
                Err(e) => {
                    // Still in doubt: the next pass tries again.
                    self.in_doubt = true;
                    return Err(e);
                }
            }
        }
        self.builds.retain(|_, b| !b.handle.is_finished());
        let (active, live) = self
            .ctx
            .db
            .call(|s| Ok((s.active_experiments()?, s.live_jobs()?)))
            .await?;
        let mut changed = false;
        let (states, throttled) = self.poll_all(&active, &live).await?;
        // What the scheduler says of each job, for `status` (only changes are written).
        let words: Vec<(i64, String)> = states
            .iter()
            .map(|(id, s)| (*id, s.word().to_string()))
            .collect();
        self.ctx
            .db
            .call(move |s| s.set_scheduler_states(&words))
            .await?;
        changed |= self.stop_ended(&active, &live, &states).await?;
        let kinds = active.iter().map(|e| e.scheduler.clone()).collect();
        let active_ids: BTreeSet<&str> = active.iter().map(|e| e.id.as_str()).collect();
        self.work.retain(|id, _| active_ids.contains(id.as_str()));
        self.unreachable_since
            .retain(|id, _| active_ids.contains(id.as_str()));
        self.errors_in_a_row
            .retain(|id, _| active_ids.contains(id.as_str()));
        for row in &active {
            if shutdown.is_cancelled() {
                break;
            }
            match self.step(row, &live, &states).await {
                Ok(c) => {
                    changed |= c;
                    self.errors_in_a_row.remove(&row.id);
                }
                Err(e) => {
                    tracing::error!("experiment {}: {e}", row.id);
                    // Only the experiment's own errors count (a database or runtime error
                    // is the daemon's, not the experiment's).
                    if let DaemonError::Experiment { message, .. } = &e
                        && let Some(reason) =
                            count_error(&mut self.errors_in_a_row, &row.id, message)
                    {
                        tracing::error!("experiment {}: {reason}", row.id);
                        let (id, r) = (row.id.clone(), reason);
                        self.ctx
                            .db
                            .call(move |s| s.set_state(&id, ExperimentState::Failed, Some(&r)))
                            .await?;
                        self.errors_in_a_row.remove(&row.id);
                        changed = true;
                    }
                }
            }
        }
        let activity = if throttled || self.unreachable {
            Activity::Throttled
        } else if changed {
            Activity::Changed
        } else {
            Activity::Quiet
        };
        Ok((activity, kinds))
    }

    /// The state of every submitted job, one `poll` per backend.
    async fn poll_all(
        &mut self,
        active: &[ExperimentRow],
        live: &[JobRow],
    ) -> Result<(HashMap<i64, JobState>, bool), DaemonError> {
        let mut kind_of_exp: HashMap<String, String> = active
            .iter()
            .map(|e| (e.id.clone(), e.scheduler.clone()))
            .collect();
        for job in live {
            if !kind_of_exp.contains_key(&job.experiment_id) {
                let id = job.experiment_id.clone();
                if let Some(row) = self.ctx.db.call(move |s| s.experiment(&id)).await? {
                    kind_of_exp.insert(row.id.clone(), row.scheduler);
                }
            }
        }
        let mut by_kind: BTreeMap<String, Vec<&JobRow>> = BTreeMap::new();
        for job in live.iter().filter(|j| j.state == JobRecordState::Submitted) {
            if let Some(kind) = kind_of_exp.get(&job.experiment_id) {
                by_kind.entry(kind.clone()).or_default().push(job);
            }
        }
        let mut out = HashMap::new();
        let mut throttled = false;
        let now = tokio::time::Instant::now();
        // Each backend on its own clock: a kind not yet due is not asked this pass (its
        // jobs keep their last known state until it is).
        by_kind.retain(|kind, _| self.clocks.is_due(kind, now));
        self.polled.extend(by_kind.keys().cloned());
        for (kind, jobs) in by_kind {
            let backend = self
                .ctx
                .backend(kind_of(&kind).unwrap_or(SchedulerKind::Local));
            let ids: Vec<JobId> = jobs
                .iter()
                .filter_map(|j| j.scheduler_job_id.clone().map(JobId))
                .collect();
            let polled = tokio::task::spawn_blocking(move || backend.poll(&ids))
                .await
                .map_err(crate::error::join_error)?;
            let of_kind: BTreeSet<String> = jobs.iter().map(|j| j.experiment_id.clone()).collect();
            match polled {
                Err(e) if e.is_unreachable() => {
                    tracing::warn!("cannot poll {kind} jobs: {e}");
                    self.unreachable = true;
                    let reason = unreachable_reason(&kind, &e);
                    for id in of_kind {
                        self.show_unreachable(&id, &reason).await?;
                    }
                }
                Ok(states) => {
                    for id in of_kind {
                        self.clear_unreachable(&id).await?;
                    }
                    for j in jobs {
                        if let Some(s) = j
                            .scheduler_job_id
                            .as_ref()
                            .and_then(|id| states.get(&JobId(id.clone())))
                        {
                            out.insert(j.id, s.clone());
                        }
                    }
                }
                // Trouble with the scheduler: the jobs keep their state, and the next
                // poll waits the longest interval (back-off) before asking again.
                Err(e) => {
                    tracing::warn!("cannot poll {kind} jobs: {e}");
                    throttled = true;
                }
            }
        }
        Ok((out, throttled))
    }

    /// Live jobs and builds of experiments that ended (cancelled, or failed while other
    /// jobs ran) are stopped, and their runs marked cancelled.
    async fn stop_ended(
        &mut self,
        active: &[ExperimentRow],
        live: &[JobRow],
        states: &HashMap<i64, JobState>,
    ) -> Result<bool, DaemonError> {
        let active_ids: BTreeSet<&str> = active.iter().map(|e| e.id.as_str()).collect();
        let ended: Vec<String> = self
            .builds
            .keys()
            .filter(|id| !active_ids.contains(id.as_str()))
            .cloned()
            .collect();
        for id in ended {
            if let Some(b) = self.builds.get(&id) {
                b.cancel.cancel();
            }
        }
        let mut changed = false;
        for job in live
            .iter()
            .filter(|j| !active_ids.contains(j.experiment_id.as_str()))
        {
            if job.state == JobRecordState::Submitting {
                // Whether the scheduler has it is unknown: reconciliation finds out.
                self.in_doubt = true;
                continue;
            }
            let id = job.experiment_id.clone();
            let Some(row) = self.ctx.db.call(move |s| s.experiment(&id)).await? else {
                continue;
            };
            let backend = self
                .ctx
                .backend(kind_of(&row.scheduler).unwrap_or(SchedulerKind::Local));
            let finished = states.get(&job.id).is_some_and(|s| s.is_finished());
            if let (Some(sid), false) = (&job.scheduler_job_id, finished) {
                let ids = vec![JobId(sid.clone())];
                let b = backend.clone();
                let r = tokio::task::spawn_blocking(move || b.cancel(&ids))
                    .await
                    .map_err(crate::error::join_error)?;
                if let Err(e) = r {
                    tracing::warn!("cannot cancel job {} ({sid}): {e}; trying again", job.name);
                    continue;
                }
            }
            // A job the scheduler already reported ended keeps that end: it finished before
            // the cancel, and only its unfinished runs are cancelled.
            self.cancel_job_runs(job, &row, states.get(&job.id).filter(|s| s.is_finished()))
                .await?;
            changed = true;
        }
        Ok(changed)
    }

    /// Records the end of a job of an ended experiment: runs with a final manifest keep
    /// their outcome, the others are cancelled.
    pub(crate) async fn cancel_job_runs(
        &mut self,
        job: &JobRow,
        row: &ExperimentRow,
        ended_as: Option<&JobState>,
    ) -> Result<(), DaemonError> {
        let layout = optgate_runner::Layout::new(&row.root);
        let updates: Vec<RunUpdate> = job
            .run_ids
            .iter()
            .map(
                |r| match RunManifest::read(&layout.run_dir(r)).ok().flatten() {
                    Some(m) if m.outcome == Outcome::Completed => RunUpdate {
                        run_id: r.clone(),
                        state: RunState::Completed,
                        detail: None,
                    },
                    _ => RunUpdate {
                        run_id: r.clone(),
                        state: RunState::Cancelled,
                        detail: Some(format!("the experiment ended ({})", row.state)),
                    },
                },
            )
            .collect();
        let job = job.clone();
        let (job_state, detail) = match ended_as {
            Some(end) => (JobRecordState::Finished, describe(end)),
            None => (
                JobRecordState::Cancelled,
                format!("stopped: the experiment is {}", row.state),
            ),
        };
        self.ctx
            .db
            .call(move |s| {
                let runs = s.runs(&job.experiment_id)?;
                let queued: BTreeSet<&str> = runs
                    .iter()
                    .filter(|r| r.state == RunState::Queued)
                    .map(|r| r.run_id.as_str())
                    .collect();
                let updates: Vec<RunUpdate> = updates
                    .into_iter()
                    .filter(|u| queued.contains(u.run_id.as_str()))
                    .collect();
                s.finish_job(&job, job_state, Some(&detail), &updates)
            })
            .await
    }

    /// Shows why experiment `id` is not moving: its scheduler cannot be reached. Only a
    /// running experiment's reason is set (a cancellation in between is never undone).
    /// Once it has waited `Daemon::unreachable_give_up` since the first pass that could not
    /// reach its scheduler, it ends `failed` with this (the last) error quoted.
    pub(crate) async fn show_unreachable(
        &mut self,
        id: &str,
        reason: &str,
    ) -> Result<(), DaemonError> {
        let since = *self
            .unreachable_since
            .entry(id.to_string())
            .or_insert_with(std::time::Instant::now);
        let limit = self.ctx.unreachable_give_up;
        let give_up = since.elapsed() >= limit;
        let (i, reason) = (id.to_string(), reason.to_string());
        let moved = self
            .ctx
            .db
            .call(move |s| {
                if give_up {
                    s.transition(
                        &i,
                        ExperimentState::Running,
                        ExperimentState::Failed,
                        Some(&gave_up_reason(&reason, limit)),
                    )
                } else {
                    s.transition(
                        &i,
                        ExperimentState::Running,
                        ExperimentState::Running,
                        Some(&reason),
                    )
                }
            })
            .await?;
        if !moved || give_up {
            self.unreachable_since.remove(id);
        }
        if moved && give_up {
            tracing::warn!("experiment {id}: failed, its scheduler unreachable for {limit:?}");
        }
        Ok(())
    }

    /// The scheduler answered again: the "cannot reach" reason goes.
    pub(crate) async fn clear_unreachable(&mut self, id: &str) -> Result<(), DaemonError> {
        self.unreachable_since.remove(id);
        let id = id.to_string();
        self.ctx
            .db
            .call(move |s| {
                let showing = s.experiment(&id)?.is_some_and(|e| {
                    e.state == ExperimentState::Running
                        && e.state_reason
                            .as_deref()
                            .is_some_and(|r| r.starts_with(UNREACHABLE))
                });
                if showing {
                    s.transition(
                        &id,
                        ExperimentState::Running,
                        ExperimentState::Running,
                        None,
                    )?;
                }
                Ok(())
            })
            .await
    }

    /// Moves one experiment along. Returns whether anything changed.
    async fn step(
        &mut self,
        row: &ExperimentRow,
        live: &[JobRow],
        states: &HashMap<i64, JobState>,
    ) -> Result<bool, DaemonError> {
        let work = match self.work(row).await {
            Ok(w) => w,
            Err(e) => {
                let (id, msg) = (row.id.clone(), e.to_string());
                self.ctx
                    .db
                    .call(move |s| s.set_state(&id, ExperimentState::Failed, Some(&msg)))
                    .await?;
                return Ok(true);
            }
        };
        match row.state {
            ExperimentState::Planned => {
                self.start_build(row, work).await?;
                Ok(true)
            }
            ExperimentState::Building => {
                if !self.build_in_flight(&row.id) {
                    // Only after a restart (reconcile moves such experiments back to
                    // planned); kept as a guard so a build can never be forgotten.
                    self.spawn_build(work);
                }
                Ok(false)
            }
            ExperimentState::Running => self.advance(row, work, live, states).await,
            ExperimentState::Analysing => {
                self.analyse(row, work).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// planned → building: records the arms this node cannot run, then builds.
    async fn start_build(
        &mut self,
        row: &ExperimentRow,
        work: Arc<Work>,
    ) -> Result<(), DaemonError> {
        let not_applicable = if row.scheduler == "local" {
            let node = self.node();
            // Where runs change the governor (the run wrapper reads the same root).
            optgate_runner::preflight::not_applicable(
                &work.exp,
                &node,
                &optgate_probe::sysfs_root(),
            )
        } else {
            // On a cluster the compute nodes decide capabilities (from each job's probe, at
            // every look); the login node's facts do not apply. A governor variant is
            // submitted on Slurm (`srun --cpu-freq`; each look checks the governor its
            // steps ran under) and not applicable under Flux, which has no equivalent.
            optgate_runner::preflight::cluster_not_applicable(&work.exp)
        };
        for (arm, reason) in &not_applicable {
            tracing::info!(
                "experiment {}: `{arm}` is not applicable here: {reason}",
                row.id
            );
        }
        let id = row.id.clone();
        self.ctx
            .db
            .call(move |s| s.begin_building(&id, &not_applicable))
            .await?;
        tracing::info!("experiment {}: building", row.id);
        self.spawn_build(work);
        Ok(())
    }

    fn spawn_build(&mut self, work: Arc<Work>) {
        let cancel = CancellationToken::new();
        let ctx = self.ctx.clone();
        let c = cancel.clone();
        let id = work.id.clone();
        let handle = self
            .build_tasks
            .spawn(async move { build_task(ctx, work, c).await });
        self.builds.insert(id, BuildTask { cancel, handle });
    }

    /// running: collect ended jobs, record progress of running ones, submit what is
    /// pending, and analyse once every planned run is done.
    async fn advance(
        &mut self,
        row: &ExperimentRow,
        work: Arc<Work>,
        live: &[JobRow],
        states: &HashMap<i64, JobState>,
    ) -> Result<bool, DaemonError> {
        let mut changed = false;
        let mut finished_block = None;
        let mine: Vec<&JobRow> = live
            .iter()
            .filter(|j| j.experiment_id == row.id && j.state == JobRecordState::Submitted)
            .collect();
        if !mine.is_empty() {
            let id = row.id.clone();
            let runs = self.ctx.db.call(move |s| s.runs(&id)).await?;
            let runs: Arc<HashMap<String, RunRow>> =
                Arc::new(runs.into_iter().map(|r| (r.run_id.clone(), r)).collect());
            for job in mine {
                let Some(state) = states.get(&job.id) else {
                    continue;
                };
                let (w, job2, st, rs) = (work.clone(), job.clone(), state.clone(), runs.clone());
                let updates = tokio::task::spawn_blocking(move || outcomes(&w, &job2, &st, &rs))
                    .await
                    .map_err(crate::error::join_error)?;
                if state.is_finished() {
                    tracing::info!(
                        "experiment {}: job {} ended ({})",
                        row.id,
                        job.name,
                        describe(state)
                    );
                    finished_block = finished_block.max(Some(job.block));
                    let (job, detail) = (job.clone(), describe(state));
                    self.ctx
                        .db
                        .call(move |s| {
                            s.finish_job(&job, JobRecordState::Finished, Some(&detail), &updates)
                        })
                        .await?;
                    changed = true;
                } else if !updates.is_empty() {
                    let id = row.id.clone();
                    self.ctx
                        .db
                        .call(move |s| s.update_runs(&id, &updates))
                        .await?;
                    changed = true;
                }
            }
        }
        // Fail fast (issue 12): a block's job ended; if the runs so far show that the metric
        // pattern matches nothing (or the baseline fails every run), stop the experiment
        // now, with the reason, instead of running every block first. Its live jobs are
        // then cancelled like a cancelled experiment's.
        if let Some(block) = finished_block {
            let verdict = self.fail_fast(row, &work, block).await?;
            if let Some(reason) = verdict.stop_experiment {
                tracing::warn!("experiment {}: {reason}", row.id);
                let id = row.id.clone();
                self.ctx
                    .db
                    .call(move |s| s.set_state(&id, ExperimentState::Failed, Some(&reason)))
                    .await?;
                return Ok(true);
            }
            changed |= self.stop_arms(row, verdict.stop_arms).await?;
        }
        changed |= self.submit_pending(row, &work).await?;
        let id = row.id.clone();
        let (counts, live_jobs) = self
            .ctx
            .db
            .call(move |s| {
                let live = s.jobs(&id)?.iter().filter(|j| j.state.is_live()).count();
                Ok((s.run_counts_of(&id)?, live))
            })
            .await?;
        // Every run has its outcome and every job has ended (a job whose last run is done
        // may still be writing its exit status): the blocks are complete.
        if counts.pending + counts.queued == 0 && live_jobs == 0 {
            let id = row.id.clone();
            let moved = self
                .ctx
                .db
                .call(move |s| {
                    s.transition(
                        &id,
                        ExperimentState::Running,
                        ExperimentState::Analysing,
                        None,
                    )
                })
                .await?;
            if moved {
                self.analyse(row, work).await?;
            }
            changed = true;
        }
        Ok(changed)
    }

    /// Arms every run of which failed so far (fail fast): their runs not yet submitted are
    /// not run (recorded `cancelled` with the reason); the look decides them `failed` with
    /// the first failure quoted. Returns whether a run changed.
    async fn stop_arms(
        &mut self,
        row: &ExperimentRow,
        arms: BTreeMap<String, String>,
    ) -> Result<bool, DaemonError> {
        if arms.is_empty() {
            return Ok(false);
        }
        let id = row.id.clone();
        self.ctx
            .db
            .call(move |s| {
                let updates: Vec<RunUpdate> = s
                    .runs(&id)?
                    .into_iter()
                    .filter(|r| r.state == RunState::Pending)
                    .filter_map(|r| {
                        let why = arms.get(&r.arm)?;
                        tracing::warn!("experiment {id}: run {} not run: {why}", r.run_id);
                        Some(RunUpdate {
                            run_id: r.run_id,
                            state: RunState::Cancelled,
                            detail: Some(why.clone()),
                        })
                    })
                    .collect();
                let any = !updates.is_empty();
                s.update_runs(&id, &updates)?;
                Ok(any)
            })
            .await
    }

    /// The fail-fast verdict on every finished run of the experiment after block `block`'s
    /// job ended: whether to stop the whole experiment or some arms.
    async fn fail_fast(
        &mut self,
        row: &ExperimentRow,
        work: &Arc<Work>,
        block: u32,
    ) -> Result<optgate_runner::failfast::FailFast, DaemonError> {
        let id = row.id.clone();
        let (blocks, na) = self
            .ctx
            .db
            .call(move |s| Ok((s.blocks(&id)?, s.not_applicable(&id)?)))
            .await?;
        let w = work.clone();
        let verdict = tokio::task::spawn_blocking(move || {
            let plan = w.plan(&blocks);
            let done: Vec<optgate_runner::RunResult> = plan
                .runs()
                .iter()
                .filter(|r| !na.contains_key(&r.arm))
                .map(|r| optgate_runner::collect::collect_run(&w.exp, r, &w.layout.run_dir(&r.id)))
                .filter(|r| r.status != optgate_runner::RunStatus::NotRun)
                .collect();
            optgate_runner::failfast::judge(&w.exp, &w.layout, block, &done)
        })
        .await
        .map_err(crate::error::join_error)?;
        Ok(verdict)
    }

    /// Records jobs for pending runs (intent first), then submits them.
    async fn submit_pending(
        &mut self,
        row: &ExperimentRow,
        work: &Arc<Work>,
    ) -> Result<bool, DaemonError> {
        let id = row.id.clone();
        // Most passes have nothing to submit: one grouped count instead of every row.
        let found = self
            .ctx
            .db
            .call(move |s| {
                if s.run_counts_of(&id)?.pending == 0 {
                    return Ok(None);
                }
                Ok(Some((s.runs(&id)?, s.blocks(&id)?, s.jobs(&id)?)))
            })
            .await?;
        let Some((runs, blocks, jobs)) = found else {
            return Ok(false);
        };
        let mut pending: BTreeSet<String> = runs
            .iter()
            .filter(|r| r.state == RunState::Pending)
            .map(|r| r.run_id.clone())
            .collect();
        if work.backend.kind() == "local" {
            // Local jobs run one at a time anyway (the machine-wide lock): submit the next
            // block's only when the last one ended, so fail fast can still leave out the
            // runs of an arm that keeps failing, and a cancel has one job to stop.
            if jobs.iter().any(|j| j.state.is_live()) {
                return Ok(false);
            }
            let first = runs
                .iter()
                .filter(|r| r.state == RunState::Pending)
                .map(|r| r.block)
                .min();
            let first_block = |r: &RunRow| Some(r.block) == first;
            let of_first: BTreeSet<&str> = runs
                .iter()
                .filter(|r| first_block(r))
                .map(|r| r.run_id.as_str())
                .collect();
            pending.retain(|r| of_first.contains(r.as_str()));
        }
        if pending.is_empty() {
            return Ok(false);
        }
        let w = work.clone();
        let bin = self.ctx.optgate_bin.clone();
        let planned =
            tokio::task::spawn_blocking(move || plan_jobs(&w, &blocks, &jobs, &pending, &bin))
                .await
                .map_err(crate::error::join_error)?
                .map_err(|message| DaemonError::Experiment {
                    id: row.id.clone(),
                    message,
                })?;
        let id = row.id.clone();
        let (new_jobs, specs, already) = planned;
        let created = self
            .ctx
            .db
            .call(move |s| {
                if !already.is_empty() {
                    s.update_runs(&id, &already)?;
                }
                s.create_jobs(&id, &new_jobs)
            })
            .await?;
        let changed = !created.is_empty();
        for (job, spec) in created.iter().zip(specs) {
            self.submit_one(work, job, spec).await?;
        }
        Ok(changed)
    }

    /// Submits a recorded job and records its id. A transient failure leaves the job
    /// `submitting` for reconciliation (it may have gone through); a refusal fails the
    /// experiment with the scheduler's message.
    pub(crate) async fn submit_one(
        &mut self,
        work: &Arc<Work>,
        job: &JobRow,
        spec: JobSpec,
    ) -> Result<(), DaemonError> {
        let backend = work.backend.clone();
        crate::failpoint::hit("before-submit");
        let w = work.clone();
        // The runs' files, written once (atomically) just before the job that runs them.
        let submitted = tokio::task::spawn_blocking(move || {
            optgate_runner::jobs::write_job_files(&w.exp, &w.layout, &spec).map_err(|e| {
                optgate_sched::SchedError::Io {
                    op: "write the run files of",
                    path: spec.dir.clone(),
                    source: std::io::Error::other(e.to_string()),
                }
            })?;
            backend.submit(&spec)
        })
        .await
        .map_err(crate::error::join_error)?;
        match submitted {
            Ok(sid) => {
                crate::failpoint::hit("after-submit");
                self.submit_failures.remove(&job.id);
                tracing::info!(
                    "experiment {}: submitted {} as {sid}",
                    job.experiment_id,
                    job.name
                );
                let jid = job.id;
                self.ctx
                    .db
                    .call(move |s| s.job_submitted(jid, &sid.0))
                    .await?;
                self.clear_unreachable(&job.experiment_id).await
            }
            Err(e) if e.is_unreachable() => {
                // Nothing reached the scheduler. The job stays `submitting`, so the next
                // pass's reconciliation looks for it and submits it when the scheduler
                // answers again; until then the reason is on the job and the experiment.
                let reason = unreachable_reason(work.backend.kind(), &e);
                tracing::warn!("cannot submit {}: {reason}", job.name);
                self.in_doubt = true;
                self.unreachable = true;
                let (jid, msg) = (job.id, reason.clone());
                self.ctx.db.call(move |s| s.job_note(jid, &msg)).await?;
                self.show_unreachable(&job.experiment_id, &reason).await
            }
            Err(e) if e.is_transient() && !self.submit_attempts_spent(job, &e) => {
                tracing::warn!("submitting {} failed, will check and retry: {e}", job.name);
                let (jid, msg) = (job.id, e.to_string());
                self.in_doubt = true;
                self.ctx.db.call(move |s| s.job_note(jid, &msg)).await
            }
            Err(e) if e.is_transient() => {
                let msg = format!(
                    "gave up on job {} after {MAX_SUBMIT_ATTEMPTS} submissions to the {} scheduler \
                     failed; the last error: {e}",
                    job.name,
                    work.backend.kind()
                );
                self.fail_job(job, msg).await
            }
            Err(e) => {
                let msg = format!(
                    "the {} scheduler refused job {}: {e}",
                    work.backend.kind(),
                    job.name
                );
                self.fail_job(job, msg).await
            }
        }
    }

    /// Counts a failed submission of `job` (not one stopped at shutdown); whether the
    /// attempts are spent ([`MAX_SUBMIT_ATTEMPTS`]).
    fn submit_attempts_spent(&mut self, job: &JobRow, e: &optgate_sched::SchedError) -> bool {
        if e.is_stopped() {
            return false;
        }
        let n = self.submit_failures.entry(job.id).or_insert(0);
        *n += 1;
        *n >= MAX_SUBMIT_ATTEMPTS
    }

    /// A job that cannot be submitted: its runs fail and the experiment ends `failed` with
    /// `msg` (the scheduler's words).
    async fn fail_job(&mut self, job: &JobRow, msg: String) -> Result<(), DaemonError> {
        tracing::error!("experiment {}: {msg}", job.experiment_id);
        self.submit_failures.remove(&job.id);
        let job = job.clone();
        let updates: Vec<RunUpdate> = job
            .run_ids
            .iter()
            .map(|r| RunUpdate {
                run_id: r.clone(),
                state: RunState::Failed,
                detail: Some(msg.clone()),
            })
            .collect();
        self.ctx
            .db
            .call(move |s| {
                s.finish_job(&job, JobRecordState::Finished, Some(&msg), &updates)?;
                s.set_state(&job.experiment_id, ExperimentState::Failed, Some(&msg))
            })
            .await
    }

    /// analysing: a look at the complete blocks, then more blocks or the end.
    async fn analyse(&mut self, row: &ExperimentRow, work: Arc<Work>) -> Result<(), DaemonError> {
        let id = row.id.clone();
        let (blocks, not_applicable, looks, jobs) = self
            .ctx
            .db
            .call(move |s| {
                Ok((
                    s.blocks(&id)?,
                    s.not_applicable(&id)?,
                    s.looks(&id)?,
                    s.jobs(&id)?,
                ))
            })
            .await?;
        let node = self.node();
        let w = work.clone();
        let look = tokio::task::spawn_blocking(move || {
            take_look(&w, &blocks, &not_applicable, &looks, &jobs, &node)
        })
        .await
        .map_err(crate::error::join_error)?
        .map_err(|message| DaemonError::Experiment {
            id: row.id.clone(),
            message,
        })?;
        let (look_row, report_json, after) = look;
        tracing::info!(
            "experiment {}: look {} at {} blocks: {} → {}",
            row.id,
            look_row.look,
            look_row.blocks,
            look_row.decisions,
            match &after {
                AfterLook::Extend { blocks, .. } => format!("adding {} block(s)", blocks.len()),
                AfterLook::Finish { state, .. } => state.to_string(),
            }
        );
        crate::failpoint::hit("before-look-commit");
        let id = row.id.clone();
        self.ctx
            .db
            .call(move |s| s.record_look(&id, &look_row, &report_json, &after))
            .await
    }
}

/// The build phase of one experiment, as a task: every build that has not already
/// succeeded (a restart keeps finished builds), then building → running.
async fn build_task(ctx: Arc<Daemon>, work: Arc<Work>, cancel: CancellationToken) {
    let id = work.id.clone();
    let end = |state: ExperimentState, reason: Option<String>| {
        let ctx = ctx.clone();
        let id = id.clone();
        async move {
            let i = id.clone();
            let r = ctx
                .db
                .call(move |s| {
                    s.transition(&i, ExperimentState::Building, state, reason.as_deref())
                })
                .await;
            if let Err(e) = r {
                tracing::error!("experiment {id}: cannot record the end of its builds: {e}");
            }
            ctx.wake.notify_one();
        }
    };
    for build in &work.exp.builds {
        let dir = work.layout.build_dir(&build.id);
        let done = std::fs::read(dir.join(BUILD_RECORD))
            .ok()
            .and_then(|b| serde_json::from_slice::<BuildRecord>(&b).ok())
            .is_some_and(|r| r.succeeded);
        if done {
            continue;
        }
        tracing::info!("experiment {id}: build {} in {}", build.id, dir.display());
        let result = execute_build(&work.exp, build, &dir, &cancel).await;
        if cancel.is_cancelled() {
            // Stopped (daemon stopping or experiment cancelled): left `building`, so a
            // restart builds again; a cancelled experiment is already past it.
            return;
        }
        match result {
            Ok(r) if r.succeeded => {}
            Ok(r) => {
                let log = std::fs::read_to_string(&r.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(10).collect();
                let reason = format!(
                    "build {} failed (exit status {}); log {}:\n{}",
                    build.id,
                    r.exit_code.map_or("none".to_string(), |c| c.to_string()),
                    r.log.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
                tracing::warn!("experiment {id}: {reason}");
                end(ExperimentState::Failed, Some(reason)).await;
                return;
            }
            Err(e) => {
                end(
                    ExperimentState::Failed,
                    Some(format!("build {}: {e}", build.id)),
                )
                .await;
                return;
            }
        }
    }
    tracing::info!("experiment {id}: running");
    end(ExperimentState::Running, None).await;
}

/// What a job's runs say: for a job that ended, every queued run's outcome (a run with no
/// final manifest goes back to pending for another attempt, or fails once attempts are
/// spent); for a running job, only runs that already finished. Blocking (reads files).
fn outcomes(
    work: &Work,
    job: &JobRow,
    state: &JobState,
    runs: &HashMap<String, RunRow>,
) -> Vec<RunUpdate> {
    let attempts = work.exp.file.scheduler.max_resubmits + 1;
    let mut out = Vec::new();
    for run_id in &job.run_ids {
        let Some(run) = runs.get(run_id).filter(|r| r.state == RunState::Queued) else {
            continue;
        };
        let dir = work.layout.run_dir(run_id);
        let manifest = RunManifest::read(&dir);
        let finished = match &manifest {
            Ok(Some(m)) => m.outcome != Outcome::Interrupted,
            Ok(None) => false,
            Err(_) => true,
        };
        if finished {
            out.push(final_outcome(work, run, &dir));
        } else if state.is_finished() {
            let why = format!(
                "job {} ended ({}) before this run finished",
                job.name,
                describe(state)
            );
            // A request the scheduler cannot grant is not retried: the next attempt would
            // ask for the same thing.
            let retry = job.attempt < attempts && !matches!(state, JobState::Refused(_));
            out.push(if retry {
                RunUpdate {
                    run_id: run_id.clone(),
                    state: RunState::Pending,
                    detail: Some(format!("{why}; it will run again")),
                }
            } else {
                RunUpdate {
                    run_id: run_id.clone(),
                    state: RunState::Failed,
                    detail: Some(match state {
                        JobState::Refused(_) => format!("{why}; not resubmitted"),
                        _ => format!("{why}, after {attempts} attempt(s); giving up"),
                    }),
                }
            });
        }
    }
    out
}

/// A finished run's outcome as `collect` will count it (metric extracted, epochs present).
fn final_outcome(work: &Work, run: &RunRow, dir: &std::path::Path) -> RunUpdate {
    let planned = PlannedRun {
        id: run.run_id.clone(),
        block: run.block,
        replicate: run.block,
        arm: run.arm.clone(),
        position: run.position,
    };
    match collect_run(&work.exp, &planned, dir).status {
        RunStatus::Complete => RunUpdate {
            run_id: run.run_id.clone(),
            state: RunState::Completed,
            detail: None,
        },
        RunStatus::Failed { reason } => RunUpdate {
            run_id: run.run_id.clone(),
            state: RunState::Failed,
            detail: Some(reason),
        },
        RunStatus::NotRun | RunStatus::NotApplicable { .. } => RunUpdate {
            run_id: run.run_id.clone(),
            state: RunState::Failed,
            detail: Some("no outcome".into()),
        },
    }
}

pub(crate) fn describe(state: &JobState) -> String {
    match state {
        JobState::Pending => "pending".into(),
        JobState::Running => "running".into(),
        JobState::Completed => "completed".into(),
        JobState::Failed(d) => format!("failed: {d}"),
        JobState::Cancelled => "cancelled".into(),
        JobState::Timeout => "time limit reached".into(),
        JobState::Lost(d) => format!("lost: {d}"),
        JobState::Refused(d) => format!("refused by the scheduler: {d}"),
        JobState::Unknown => "unknown to the scheduler".into(),
    }
}

type PlannedJobs = (Vec<NewJob>, Vec<JobSpec>, Vec<RunUpdate>);

/// The jobs for the pending runs, block by block: each block's original job reduced to
/// its pending runs, named for its attempt. A pending run whose manifest already says it
/// finished (a job given up for lost ran it after all) is recorded, not run again.
fn plan_jobs(
    work: &Work,
    blocks: &[BlockRow],
    jobs: &[JobRow],
    pending: &BTreeSet<String>,
    optgate_bin: &std::path::Path,
) -> Result<PlannedJobs, String> {
    let mut new_jobs = Vec::new();
    let mut specs = Vec::new();
    let mut already = Vec::new();
    for block in blocks {
        let prefix = format!("b{:03}-", block.index);
        if !pending.iter().any(|r| r.starts_with(&prefix)) {
            continue;
        }
        for mut spec in work.block_jobs(block, optgate_bin) {
            let all: BTreeSet<String> = spec.runs.iter().map(|r| r.run_id.clone()).collect();
            let mut to_run = Vec::new();
            for r in spec.runs.iter().filter(|r| pending.contains(&r.run_id)) {
                match RunManifest::read(&r.run_dir) {
                    Ok(Some(m)) if m.outcome != Outcome::Interrupted => {
                        let row = RunRow {
                            run_id: r.run_id.clone(),
                            block: r.block,
                            arm: r.arm.clone(),
                            position: 0,
                            state: RunState::Pending,
                            detail: None,
                        };
                        already.push(final_outcome(work, &row, &r.run_dir));
                    }
                    _ => to_run.push(r.run_id.clone()),
                }
            }
            if to_run.is_empty() {
                continue;
            }
            let attempt = 1 + jobs
                .iter()
                .filter(|j| j.run_ids.iter().any(|r| all.contains(r)))
                .map(|j| j.attempt)
                .max()
                .unwrap_or(0);
            let name = Work::attempt_name(&spec.name, attempt);
            if name != spec.name {
                spec.dir = work.layout.job_dir(&name);
                spec.name = name.clone();
            }
            spec.runs.retain(|r| to_run.contains(&r.run_id));
            new_jobs.push(NewJob {
                block: block.index,
                name,
                attempt,
                run_ids: to_run,
            });
            specs.push(spec);
        }
    }
    Ok((new_jobs, specs, already))
}

type Look = (LookRow, String, AfterLook);

/// The compute nodes' probes (`probe.json` in each job's directory, written as the job's
/// first step) checked against the experiment, and the governor each governor variant's
/// runs recorded inside their steps (`step_governors` of their manifests) against the one
/// it asked for. Local jobs ran on this machine, which the experiment was already checked
/// against when it was submitted.
fn compute_node_facts(
    work: &Work,
    jobs: &[JobRow],
) -> (
    BTreeMap<String, String>,
    Vec<optgate_runner::preflight::Finding>,
) {
    let mut na = BTreeMap::new();
    let mut findings: Vec<optgate_runner::preflight::Finding> = Vec::new();
    if work.exp.file.scheduler.kind == optgate_experiment::SchedulerKind::Local {
        return (na, findings);
    }
    for job in jobs {
        let path = work.layout.job_dir(&job.name).join("probe.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(probe) = serde_json::from_str::<Probe>(&text) else {
            tracing::warn!(
                "{}: not a probe; compute-node checks skipped for this job",
                path.display()
            );
            continue;
        };
        let (job_na, job_findings) =
            optgate_runner::preflight::compute_node_checks(&work.exp, &probe);
        for (arm, reason) in job_na {
            na.entry(arm).or_insert(reason);
        }
        for f in job_findings {
            if !findings.contains(&f) {
                findings.push(f);
            }
        }
    }
    let governed: BTreeSet<&str> = work
        .exp
        .arms
        .iter()
        .filter(|a| a.governor.is_some())
        .map(|a| a.name.as_str())
        .collect();
    let manifests: Vec<RunManifest> = jobs
        .iter()
        .flat_map(|j| &j.run_ids)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|r| governed.iter().any(|a| r.ends_with(&format!("-{a}"))))
        .filter_map(|r| RunManifest::read(&work.layout.run_dir(r)).ok().flatten())
        .filter(|m| governed.contains(m.arm.as_str()))
        .collect();
    let steps = optgate_runner::preflight::step_governor_not_applicable(
        &work.exp,
        manifests.iter().map(|m| (m.arm.as_str(), m)),
    );
    for (arm, reason) in steps {
        na.entry(arm).or_insert(reason);
    }
    (na, findings)
}

/// What a look analyses.
struct LookAt<'a> {
    plan: &'a optgate_experiment::Plan,
    collected: &'a optgate_runner::Collected,
    not_applicable: &'a BTreeMap<String, String>,
    node: &'a Probe,
    look: u32,
    blocks: u32,
}

/// The report of a look under the experiment's rule: §13's over every variant, or the
/// staged rule's over the open ones with the decided ones kept (and its verdicts).
fn look_report(
    work: &Work,
    at: &LookAt,
    closed: &BTreeMap<String, VariantDecision>,
) -> Result<(optgate_report::Report, Option<optgate_stats::StagedLook>), String> {
    let mut staged_look = None;
    let report = match &work.staged {
        None => optgate_runner::report::build_report(
            &work.exp,
            at.plan,
            &work.layout,
            at.collected,
            at.not_applicable,
            work.sequential.as_ref().map(|p| (p, at.look)),
            at.node,
        ),
        Some(sp) => optgate_runner::report::build_report_with(
            &work.exp,
            at.plan,
            &work.layout,
            at.collected,
            at.not_applicable,
            at.node,
            |base, others, cfg| {
                let (analysis, l) =
                    crate::staged::analyse(base, others, cfg, sp, closed, at.blocks)?;
                staged_look = Some(l);
                Ok(analysis)
            },
        ),
    }
    .map_err(|e| format!("analysis failed: {e}"))?;
    Ok((report, staged_look))
}

/// The look at the complete blocks: collect, analyse at this look's level, decide what
/// follows, and write `samples.csv` and `report.json` into the run root. Blocking.
fn take_look(
    work: &Work,
    blocks: &[BlockRow],
    not_applicable: &BTreeMap<String, String>,
    looks: &[LookRow],
    jobs: &[JobRow],
    node: &Probe,
) -> Result<Look, String> {
    let mut plan = work.plan(blocks);
    let n_blocks = blocks.len() as u32;
    let look = work
        .look_at(n_blocks)
        .ok_or_else(|| format!("{n_blocks} blocks is not a planned look"))?;
    // Each job probed its compute node first: what that node lacks is not applicable, and
    // over-subscription is checked against its real cores.
    let (node_na, node_findings) = compute_node_facts(work, jobs);
    let mut merged = not_applicable.clone();
    for (arm, reason) in node_na {
        merged.entry(arm).or_insert(reason);
    }
    let not_applicable = &merged;
    let collected = optgate_runner::collect(&work.exp, &plan, &work.layout, not_applicable);
    let cfg = optgate_runner::analysis::analysis_config(&work.exp);
    let seq = work.sequential.as_ref();
    // The staged rule: variants decided at earlier looks are out of the block plan.
    let closed = crate::staged::closed_variants(looks);
    let at = LookAt {
        plan: &plan,
        collected: &collected,
        not_applicable,
        node,
        look,
        blocks: n_blocks,
    };
    let (mut report, staged_look) = look_report(work, &at, &closed)?;
    if !node_findings.is_empty()
        && let Some(serde_json::Value::Object(p)) = report.provenance.as_mut()
    {
        p.insert(
            "compute_node_findings".into(),
            serde_json::to_value(&node_findings).unwrap_or_default(),
        );
    }
    let counts: Vec<(String, usize)> = work
        .exp
        .arms
        .iter()
        .filter(|a| !not_applicable.contains_key(&a.name))
        .map(|a| (a.name.clone(), collected.complete_runs(&a.name).count()))
        .collect();
    let (next, keep) = match (&work.staged, &staged_look) {
        (Some(sp), Some(l)) => {
            // A variant that left earlier (even one decided `failed`) is not analysed now.
            let open: Vec<(String, usize)> = counts
                .iter()
                .filter(|(a, _)| !closed.contains_key(a))
                .cloned()
                .collect();
            crate::staged::next(next_step_staged(l, n_blocks, sp, &open))
        }
        _ => (
            next_step(&report.analysis, n_blocks, &work.schedule, &counts),
            None,
        ),
    };
    let decisions: Vec<VariantDecision> = match &staged_look {
        Some(l) => {
            let order: Vec<&str> = report
                .analysis
                .variants
                .iter()
                .map(|v| v.name.as_str())
                .collect();
            crate::staged::decisions(l, &closed, n_blocks, &order)
        }
        None => report
            .analysis
            .variants
            .iter()
            .map(|v| VariantDecision {
                variant: v.name.clone(),
                decision: v.decision,
                reason: v.reason.clone(),
                stop: None,
                blocks: None,
                retired: false,
            })
            .collect(),
    };
    let decisions_json = serde_json::to_string(&decisions).expect("serialises");
    let nominal_alpha = report.analysis.alpha;
    // The looks taken so far, this one included, and the jobs: provenance of the decision.
    let mut taken: Vec<serde_json::Value> = looks
        .iter()
        .map(|l| {
            serde_json::json!({
                "look": l.look, "blocks": l.blocks, "nominal_alpha": l.nominal_alpha,
                "decisions": serde_json::from_str::<serde_json::Value>(&l.decisions).unwrap_or_default(),
            })
        })
        .collect();
    taken.push(serde_json::json!({
        "look": look, "blocks": n_blocks, "nominal_alpha": nominal_alpha, "decisions": decisions,
    }));
    if let Some(serde_json::Value::Object(p)) = report.provenance.as_mut() {
        p.insert("experiment_id".into(), work.id.clone().into());
        p.insert(
            "sequential".into(),
            serde_json::json!({
                "rule": match (&work.staged, seq) {
                    (Some(sp), _) => format!("staged (per-variant stopping, futility β = {}): {}", sp.futility.alpha, sp.efficacy.rule),
                    (None, Some(s)) => s.rule.clone(),
                    (None, None) => "a single look at the experiment's alpha (max_replicates not above replicates)".to_string(),
                },
                "overall_alpha": cfg.alpha,
                "first_look_blocks": work.schedule.first,
                "max_blocks": work.schedule.max,
                "planned_looks": work.schedule.planned_looks(),
                "looks": taken,
            }),
        );
        p.insert(
            "jobs".into(),
            serde_json::json!(
                jobs.iter()
                    .map(|j| serde_json::json!({
                        "name": j.name, "block": j.block, "attempt": j.attempt,
                        "scheduler_job_id": j.scheduler_job_id, "state": j.state.as_str(),
                    }))
                    .collect::<Vec<_>>()
            ),
        );
    }
    let report_json = optgate_report::render_json(&report);
    let write = |path: std::path::PathBuf, bytes: &[u8]| {
        write_atomic(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
    };
    write(
        work.layout.samples(),
        optgate_runner::analysis::samples_csv(&collected).as_bytes(),
    )?;
    write(work.layout.report_json(), report_json.as_bytes())?;
    let after = match next {
        Next::Decided => AfterLook::Finish {
            state: ExperimentState::Decided,
            reason: None,
        },
        Next::BudgetExhausted => AfterLook::Finish {
            state: ExperimentState::BudgetExhausted,
            reason: Some(format!(
                "still inconclusive after {n_blocks} blocks, the most max_replicates allows"
            )),
        },
        Next::Failed(reason) => AfterLook::Finish {
            state: ExperimentState::Failed,
            reason: Some(reason),
        },
        Next::Extend(n) => {
            plan.extend(n);
            if let Some(open) = &keep {
                crate::staged::keep_only(&mut plan, n_blocks, open);
            }
            let new_blocks: Vec<BlockRow> = plan.blocks[blocks.len()..]
                .iter()
                .map(|b| BlockRow {
                    index: b.index,
                    order: b.order.clone(),
                })
                .collect();
            let runs: Vec<NewRun> = plan
                .runs()
                .into_iter()
                .filter(|r| r.block > n_blocks && !not_applicable.contains_key(&r.arm))
                .map(|r| NewRun {
                    run_id: r.id,
                    block: r.block,
                    arm: r.arm,
                    position: r.position,
                })
                .collect();
            write(
                work.layout.plan(),
                &serde_json::to_vec_pretty(&plan).expect("plan serialises"),
            )?;
            AfterLook::Extend {
                blocks: new_blocks,
                runs,
            }
        }
    };
    Ok((
        LookRow {
            look,
            blocks: n_blocks,
            nominal_alpha,
            decisions: decisions_json,
            created_at: String::new(),
        },
        report_json,
        after,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn giving_up_quotes_the_last_error_and_the_limit() {
        let e = optgate_sched::SchedError::Parse {
            what: "x",
            text: "y".into(),
        };
        let waiting = unreachable_reason("flux", &e);
        assert!(waiting.ends_with(WAITING), "{waiting}");
        assert_eq!(
            gave_up_reason(&waiting, Duration::from_secs(3600)),
            "gave up after 1h without reaching the scheduler (the daemon's UNREACHABLE_GIVE_UP); the last error: cannot reach the flux scheduler: cannot parse x from `y`"
        );
        let short = |d| gave_up_reason("cannot reach the slurm scheduler: gone", d);
        assert!(short(Duration::from_secs(120)).starts_with("gave up after 2m without"));
        assert!(short(Duration::from_secs(3)).starts_with("gave up after 3s without"));
        assert!(short(Duration::from_millis(1500)).starts_with("gave up after 1.500s without"));
        assert!(
            short(Duration::ZERO)
                .ends_with("the last error: cannot reach the slurm scheduler: gone")
        );
    }
}

#[cfg(test)]
mod error_count_tests {
    use super::*;

    /// The fifth error in a row ends the experiment with the last error quoted; another
    /// experiment's errors do not count toward it.
    #[test]
    fn an_experiment_gives_up_after_five_errors_in_a_row() {
        let mut errors = HashMap::new();
        for i in 1..MAX_EXPERIMENT_ERRORS {
            assert_eq!(count_error(&mut errors, "a", &format!("boom {i}")), None);
            assert_eq!(count_error(&mut errors, "b", "other"), None);
        }
        let reason = count_error(&mut errors, "a", "cannot write /x/samples.csv").unwrap();
        assert_eq!(
            reason,
            "gave up after 5 attempts in a row that failed the same way; the last error: \
             cannot write /x/samples.csv"
        );
    }
}

#[cfg(test)]
mod poll_clock_tests {
    use super::*;

    fn kinds(k: &[&str]) -> BTreeSet<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    /// With a local and a Slurm experiment active, the engine wakes on the local clock but
    /// asks Slurm only on its own: quiet passes keep Slurm's next poll ≥ its 10 s minimum
    /// (less jitter) away while local polls come every ≤ 2 s.
    #[tokio::test(start_paused = true)]
    async fn a_local_experiment_does_not_make_slurm_polled_faster() {
        let settings = EngineSettings::default();
        let mut clocks = PollClocks::default();
        clocks.track(&kinds(&["local", "slurm"]), &settings);
        let now = tokio::time::Instant::now();
        assert!(clocks.is_due("local", now) && clocks.is_due("slurm", now));
        // The first pass polls both; nothing changed.
        clocks.advance(&kinds(&["local", "slurm"]), Activity::Quiet);
        let mut slurm_polls = 0;
        let mut local_polls = 0;
        // Two minutes of quiet passes, each at the next due time.
        let end = tokio::time::Instant::now() + Duration::from_secs(120);
        while tokio::time::Instant::now() < end {
            let wait = clocks.next_due_in().unwrap();
            assert!(wait <= Duration::from_millis(2400), "{wait:?}");
            tokio::time::advance(wait).await;
            let now = tokio::time::Instant::now();
            let mut polled = BTreeSet::new();
            for k in ["local", "slurm"] {
                if clocks.is_due(k, now) {
                    polled.insert(k.to_string());
                }
            }
            slurm_polls += usize::from(polled.contains("slurm"));
            local_polls += usize::from(polled.contains("local"));
            clocks.advance(&polled, Activity::Quiet);
        }
        // Slurm: 10 s growing by 1.5× (±20 %) → at most a handful in two minutes.
        assert!(slurm_polls <= 6, "slurm polled {slurm_polls} times");
        assert!(local_polls >= 50, "local polled {local_polls} times");
    }

    /// A pass that changed something brings every clock back to its shortest wait; a
    /// kind no longer in use loses its clock.
    #[tokio::test(start_paused = true)]
    async fn a_change_resets_every_clock_and_unused_kinds_are_dropped() {
        let settings = EngineSettings::default();
        let mut clocks = PollClocks::default();
        clocks.track(&kinds(&["slurm"]), &settings);
        for _ in 0..10 {
            clocks.advance(&kinds(&["slurm"]), Activity::Quiet);
        }
        assert!(clocks.next_due_in().unwrap() > Duration::from_secs(100));
        clocks.advance(&BTreeSet::new(), Activity::Changed);
        assert!(clocks.next_due_in().unwrap() <= Duration::from_secs(12));
        clocks.track(&BTreeSet::new(), &settings);
        assert_eq!(clocks.next_due_in(), None);
    }
}

//! The engine: one loop that moves every active experiment along its state machine
//! (planned → building → running → analysing → decided | budget_exhausted | failed |
//! cancelled), polling all live jobs in one query per backend, at an adaptive interval
//! with jitter (`optgate_sched::poll`).
//!
//! Rule: every state change is committed before it is acted on. A job is recorded as
//! `submitting` before `submit` is called and as `submitted` with its id after; a run's
//! outcome is read from its manifest and recorded with its job's end in one transaction; a
//! look is recorded with its consequence (more blocks, or the end) in one transaction.
//! What a crash leaves in doubt is repaired by `Engine::reconcile` (`repair.rs`, deciding
//! with [`crate::reconcile`]), run before
//! the first pass and after any pass that left a submission in doubt.

mod build;
mod campaigns;
mod clocks;
mod looking;
mod off_loop;
mod recurring;
mod repair;
mod running;

pub use off_loop::RUN_FILES_DEADLINE;
pub(crate) use off_loop::read_run_files;

use crate::jobplan::describe;
use clocks::PollClocks;
pub use clocks::{CLUSTER_POLL_FLOOR, CLUSTER_POLL_VAR, EngineSettings};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use optgate_experiment::SchedulerKind;
use optgate_probe::Probe;
use optgate_sched::poll::Activity;
use optgate_sched::{JobId, JobState};
use optgate_store::{ExperimentRow, ExperimentState, JobRecordState, JobRow, RunState, RunUpdate};
use optgate_wrapper::manifest::{Outcome, RunManifest};

use crate::context::Daemon;
use crate::error::DaemonError;
use crate::work::Work;

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
    polled: BTreeSet<SchedulerKind>,
    /// A write of the current pass that failed for lack of space (the experiment it was
    /// for waits, never fails; `space.rs`).
    pub(crate) lack_of_space: Option<(String, optgate_client::space::NoSpace)>,
    /// The earliest due time (seconds since 1970) of a recurrence not yet due, as the last
    /// pass saw it: the engine sleeps no longer than until then.
    recurrence_due: Option<i64>,
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
pub(crate) fn unreachable_reason(kind: SchedulerKind, e: &optgate_sched::SchedError) -> String {
    format!("{UNREACHABLE} {kind} scheduler: {e}{WAITING}")
}

/// The reason of an experiment whose stored scheduler kind is `value`, none optgate knows.
pub(crate) fn unreadable_kind_reason(value: &str) -> String {
    let known: Vec<&str> = SchedulerKind::ALL.iter().map(|k| k.as_str()).collect();
    format!(
        "the database names this experiment's scheduler kind `{value}`, which is none of {}: \
         the row is damaged, so its jobs were neither polled nor cancelled through any \
         backend (their scheduler job ids stay in the database's jobs table; cancel any \
         still queued by hand)",
        known.join(", ")
    )
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

/// How long a pass under way when the daemon is told to stop may go on before it is
/// dropped: 2 s. Every step of a pass records its intent first, so a dropped pass is a
/// crash the next start reconciles; a pass waiting on a read (`RUN_FILES_DEADLINE`) never
/// holds up `daemon stop`.
pub const PASS_STOP_GRACE: Duration = Duration::from_secs(2);

/// Returns `grace` after `shutdown` is cancelled.
async fn stopped_for(shutdown: &CancellationToken, grace: Duration) {
    shutdown.cancelled().await;
    tokio::time::sleep(grace).await;
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
    match engine.reconcile().await {
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
        let passed = tokio::select! {
            passed = engine.pass(&shutdown) => passed,
            _ = stopped_for(&shutdown, PASS_STOP_GRACE) => {
                tracing::warn!(
                    "stopping with a pass unfinished after {PASS_STOP_GRACE:?} (a read still \
                     running); the next start reconciles what it left"
                );
                break;
            }
        };
        let activity = match passed {
            Ok((activity, active_kinds)) => {
                engine.clocks.track(&active_kinds, &settings);
                match engine.lack_of_space.take() {
                    Some((id, lack)) => {
                        engine.pause_for_space(Some(id), lack).await;
                        Activity::Throttled
                    }
                    None => {
                        engine.space_is_back().await;
                        activity
                    }
                }
            }
            Err(e) => {
                match crate::space::no_space_in(&e, &ctx.paths.dir) {
                    Some(lack) => engine.pause_for_space(None, lack).await,
                    None => tracing::error!("engine pass failed: {e}"),
                }
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
        // A recurrence is submitted at its due time, not at the next (longest) interval.
        let wait = engine.recurrence_due_in().map_or(wait, |due| wait.min(due));
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
            lack_of_space: None,
            recurrence_due: None,
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
        let work = Work::load(row, &text, self.ctx.backend(row.scheduler)).map_err(|e| {
            DaemonError::Experiment {
                id: row.id.clone(),
                message: e.to_string(),
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
    ) -> Result<(Activity, BTreeSet<SchedulerKind>), DaemonError> {
        self.unreachable = false;
        let mut changed = self.close_unreadable_kinds().await?;
        if self.in_doubt {
            self.in_doubt = false;
            match self.reconcile().await {
                Ok(r) => tracing::info!("reconciled: {r}"),
                Err(e) => {
                    // Still in doubt: the next pass tries again.
                    self.in_doubt = true;
                    return Err(e);
                }
            }
        }
        self.builds.retain(|_, b| !b.handle.is_finished());
        // Before the experiments are read: a campaign's new step runs in this pass.
        changed |= self.advance_campaigns().await?;
        let (active, live) = self
            .ctx
            .db
            .call(|s| Ok((s.active_experiments()?, s.live_jobs()?)))
            .await?;
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
        let kinds = active.iter().map(|e| e.scheduler).collect();
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
            match self.advance_experiment(row, &live, &states).await {
                Ok(c) => {
                    changed |= c;
                    self.errors_in_a_row.remove(&row.id);
                }
                Err(e) => changed |= self.advance_failed(&row.id, e).await?,
            }
        }
        // The history rows of the experiments that ended (in this pass or while no engine
        // ran: the queue is in the database); a failure is retried next pass.
        if let Err(e) = self.ctx.db.call(crate::history::record_due).await {
            tracing::warn!("cannot record ended experiments in the history: {e}");
        }
        if !shutdown.is_cancelled() {
            changed |= self.recur().await?;
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

    /// What a step of experiment `id` that failed with `e` leads to: a wait for space
    /// when the disk is full (not the experiment's fault: `pause_for_space`), else the
    /// error counted, and the experiment failed once its own errors (not the database's
    /// or the runtime's) come too often in a row; whether a state changed.
    async fn advance_failed(&mut self, id: &str, e: DaemonError) -> Result<bool, DaemonError> {
        if let Some(lack) = crate::space::no_space_in(&e, &self.ctx.paths.dir) {
            tracing::debug!("experiment {id}: {e}");
            self.lack_of_space = Some((id.to_string(), lack));
            return Ok(false);
        }
        tracing::error!("experiment {id}: {e}");
        let DaemonError::Experiment { message, .. } = &e else {
            return Ok(false);
        };
        let Some(reason) = count_error(&mut self.errors_in_a_row, id, message) else {
            return Ok(false);
        };
        tracing::error!("experiment {id}: {reason}");
        let owned = id.to_string();
        self.ctx
            .db
            .call(move |s| s.set_state(&owned, ExperimentState::Failed, Some(&reason)))
            .await?;
        self.errors_in_a_row.remove(id);
        Ok(true)
    }

    /// A pass could not write for lack of space: the experiment whose write it was (`of`;
    /// every active one when the state directory is full or the write was the pass's own)
    /// is paused — each state change waits for a later pass — with the reason in the
    /// shared watch (`status` reads it there when the database cannot be written), in the
    /// log when it first appears or its place changes, and on the experiments where that
    /// can be written.
    pub(crate) async fn pause_for_space(
        &mut self,
        of: Option<String>,
        lack: optgate_client::space::NoSpace,
    ) {
        let reason = lack.paused();
        let only = of.filter(|_| lack.place == optgate_client::space::Place::Workdir);
        let new = self
            .ctx
            .space
            .now()
            .is_none_or(|(_, was)| (was.place, &was.path) != (lack.place, &lack.path));
        if new {
            tracing::warn!("{reason}");
        }
        self.ctx.space.full(lack);
        let r = reason.clone();
        let shown = self
            .ctx
            .db
            .call(move |s| {
                for e in s.active_experiments()? {
                    if only.as_ref().is_none_or(|id| *id == e.id) {
                        s.transition(&e.id, e.state, e.state, Some(&r))?;
                    }
                }
                Ok(())
            })
            .await;
        if let Err(e) = shown {
            tracing::debug!("cannot record the no-space reason: {e}");
        }
    }

    /// A pass wrote all it had to: if it was paused for space, say so and clear the reason.
    pub(crate) async fn space_is_back(&mut self) {
        if !self.ctx.space.clear() {
            return;
        }
        tracing::info!("space is back: the engine goes on");
        let cleared = self
            .ctx
            .db
            .call(|s| {
                for e in s.active_experiments()? {
                    if e.state_reason
                        .as_deref()
                        .is_some_and(|r| r.starts_with(optgate_client::space::NO_SPACE))
                    {
                        s.transition(&e.id, e.state, e.state, None)?;
                    }
                }
                Ok(())
            })
            .await;
        if let Err(e) = cleared {
            tracing::warn!("cannot clear the no-space reason: {e}");
        }
    }

    /// Experiments whose stored scheduler kind is unreadable (a damaged row) end `failed`
    /// with the value quoted, their runs and live jobs closed without asking any backend:
    /// which scheduler holds the jobs is unknown, and asking another one could poll or
    /// cancel a job that is not ours. Returns whether any was closed.
    pub(crate) async fn close_unreadable_kinds(&mut self) -> Result<bool, DaemonError> {
        let damaged = self.ctx.db.call(|s| s.unreadable_scheduler_kinds()).await?;
        for (id, value) in &damaged {
            let reason = unreadable_kind_reason(value);
            tracing::error!("experiment {id}: {reason}");
            let (id, reason) = (id.clone(), reason);
            self.ctx
                .db
                .call(move |s| s.close_unreadable(&id, &reason))
                .await?;
        }
        Ok(!damaged.is_empty())
    }

    /// The state of every submitted job, one `poll` per backend.
    async fn poll_all(
        &mut self,
        active: &[ExperimentRow],
        live: &[JobRow],
    ) -> Result<(HashMap<i64, JobState>, bool), DaemonError> {
        let mut kind_of_exp: HashMap<String, SchedulerKind> =
            active.iter().map(|e| (e.id.clone(), e.scheduler)).collect();
        for job in live {
            if !kind_of_exp.contains_key(&job.experiment_id) {
                let id = job.experiment_id.clone();
                if let Some(row) = self.ctx.db.call(move |s| s.experiment(&id)).await? {
                    kind_of_exp.insert(row.id.clone(), row.scheduler);
                }
            }
        }
        let mut by_kind: BTreeMap<SchedulerKind, Vec<&JobRow>> = BTreeMap::new();
        for job in live.iter().filter(|j| j.state == JobRecordState::Submitted) {
            if let Some(&kind) = kind_of_exp.get(&job.experiment_id) {
                by_kind.entry(kind).or_default().push(job);
            }
        }
        let mut out = HashMap::new();
        let mut throttled = false;
        let now = tokio::time::Instant::now();
        // Each backend on its own clock: a kind not yet due is not asked this pass (its
        // jobs keep their last known state until it is).
        by_kind.retain(|&kind, _| self.clocks.is_due(kind, now));
        self.polled.extend(by_kind.keys().copied());
        for (kind, jobs) in by_kind {
            let backend = self.ctx.backend(kind);
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
                    let reason = unreachable_reason(kind, &e);
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
            let backend = self.ctx.backend(row.scheduler);
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
    /// their outcome, the others are cancelled — with a cancelled experiment's own reason
    /// as their detail, so the cancellation that stopped them names them (`optgate run`
    /// resuming after Ctrl-C reopens exactly those, `Store::reopen_cancelled`).
    pub(crate) async fn cancel_job_runs(
        &mut self,
        job: &JobRow,
        row: &ExperimentRow,
        ended_as: Option<&JobState>,
    ) -> Result<(), DaemonError> {
        let layout = optgate_evidence::Layout::new(&row.root);
        let why = match (&row.state, &row.state_reason) {
            (ExperimentState::Cancelled, Some(reason)) => reason.clone(),
            _ => format!("the experiment ended ({})", row.state),
        };
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
                        detail: Some(why.clone()),
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
    async fn advance_experiment(
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
        let waiting = unreachable_reason(SchedulerKind::Flux, &e);
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

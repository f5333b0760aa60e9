//! The engine's part of recurring re-checks, once per pass: each ended execution judged
//! against the one before it and its history (a flip or a change point first seen → the
//! notify command, its outcome recorded), then each active recurrence's due check (`recheck::due_check`) applied — a
//! due one's stored text loaded again, its root prepared, and the new experiment, its
//! execution row and the next due time recorded in one transaction that only goes through
//! at the due time it was decided on. A kill -9 before that commit loses nothing (the next
//! start finds it due again); after it, it is never submitted twice.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use optgate_client::protocol::{NotifyOutcome, NotifyState, recurrence_name};
use optgate_policy::staged::VariantDecision;
use optgate_store::{RecurrenceRow, UnjudgedExecution};

use super::Engine;
use crate::context::Daemon;
use crate::error::DaemonError;
use crate::notify;
use crate::recheck::{self, Due, ExecutionSummary};

impl Engine {
    /// Judges ended executions, then submits the recurrences that are due. Whether
    /// anything was recorded.
    pub(crate) async fn recur(&mut self) -> Result<bool, DaemonError> {
        let mut changed = self.judge_ended().await?;
        let rows = self.ctx.db.call(|s| s.recurrences(true)).await?;
        let now = chrono::Utc::now().timestamp();
        self.recurrence_due = None;
        for r in rows {
            let running = r.last_state.is_some_and(|s| !s.is_terminal());
            match recheck::due_check(r.anchor_at, r.interval_secs, r.next_due_at, now, running) {
                Due::NotYet { at } => {
                    self.recurrence_due = Some(self.recurrence_due.map_or(at, |d| d.min(at)));
                }
                Due::Waiting => {}
                Due::Submit { next_due } => changed |= self.resubmit(&r, next_due).await?,
            }
        }
        Ok(changed)
    }

    /// How long until the earliest recurrence not yet due is (the engine sleeps no longer).
    pub(crate) fn recurrence_due_in(&self) -> Option<std::time::Duration> {
        let at_ms = self.recurrence_due?.saturating_mul(1000);
        let left = at_ms.saturating_sub(chrono::Utc::now().timestamp_millis());
        Some(std::time::Duration::from_millis(left.max(10) as u64))
    }

    /// Submits recurrence `r` again (its due time moving to `next_due`). A stored text that
    /// no longer loads, or a root that cannot be prepared, postpones it to `next_due` with
    /// the reason shown in `status`; a lack of space is the pass's error (it waits).
    async fn resubmit(&mut self, r: &RecurrenceRow, next_due: i64) -> Result<bool, DaemonError> {
        let (rid, due, name) = (r.id, r.next_due_at, recurrence_name(r.id));
        let text = self.ctx.db.call(move |s| s.recurrence_text(rid)).await?;
        let path = PathBuf::from(&r.source_path);
        let loaded = tokio::task::spawn_blocking(move || {
            optgate_experiment::load_str(&text.unwrap_or_default(), &path)
        })
        .await
        .map_err(crate::error::join_error)?;
        let exp = match loaded {
            Ok(l) => l.experiment,
            Err(e) => {
                let why = format!("the stored experiment file no longer loads: {e}");
                return self.postpone(rid, due, next_due, &name, why).await;
            }
        };
        let (id, root) = crate::ids::new_root(&exp);
        let rows = crate::handlers::submit::prepare_new(&exp, &id, &root, exp.kind).await;
        let (new, blocks, runs) = match rows {
            Ok(rows) => rows,
            Err(e) if crate::space::no_space_in(&e, &self.ctx.paths.dir).is_some() => {
                return Err(e);
            }
            Err(e) => {
                let why = format!("cannot prepare its run directory: {e}");
                return self.postpone(rid, due, next_due, &name, why).await;
            }
        };
        let done = self
            .ctx
            .db
            .call(move |s| s.resubmit(rid, due, next_due, &new, &blocks, &runs))
            .await?;
        if done {
            crate::handlers::submit::record_build_identity(&self.ctx, &exp, &id).await?;
            // As a submission does: the pass after this one starts at once. The clocks were
            // set before this experiment existed, and would sleep the longest interval.
            self.ctx.wake.notify_one();
            tracing::info!(
                "recurrence {name}: submitted `{}` again as {id}",
                exp.name()
            );
        } else {
            // Cancelled meanwhile: the root made for it holds nothing yet.
            let _ = std::fs::remove_dir_all(&root);
        }
        Ok(done)
    }

    async fn postpone(
        &mut self,
        rid: i64,
        due: i64,
        next_due: i64,
        name: &str,
        why: String,
    ) -> Result<bool, DaemonError> {
        let detail = format!("not submitted at its due time: {why}");
        tracing::warn!("recurrence {name}: {detail}");
        self.ctx
            .db
            .call(move |s| s.postpone_recurrence(rid, due, next_due, &detail))
            .await
    }

    /// Each ended execution not yet judged: compared with the one before it; when a
    /// decision flipped (or a change point is first seen at it) the outcome is committed
    /// as `started` before the notify command runs (a crash never runs it twice), and its
    /// end recorded when it ends. An execution whose history row is still queued
    /// (`record_due` failed this pass) waits for a later pass: its change points are
    /// judged on the history that holds it.
    async fn judge_ended(&mut self) -> Result<bool, DaemonError> {
        let (ended, recurrences, queued) = self
            .ctx
            .db
            .call(|s| {
                let queued = s.executions_due()?;
                Ok((s.unjudged_executions()?, s.recurrences(false)?, queued))
            })
            .await?;
        for x in &ended {
            let Some(r) = recurrences.iter().find(|r| r.id == x.recurrence_id) else {
                continue;
            };
            if queued.contains(&x.experiment_id) {
                continue;
            }
            let summary = self.summarise(r, x).await?;
            let Some(summary) = summary else {
                let (rid, seq) = (x.recurrence_id, x.seq);
                self.ctx
                    .db
                    .call(move |s| s.judge_execution(rid, seq, None))
                    .await?;
                continue;
            };
            let state = match r.notify.is_empty() {
                true => NotifyState::NoCommand,
                false => NotifyState::Started,
            };
            let outcome = NotifyOutcome::new(&x.experiment_id, &summary.reason, state);
            tracing::info!("recurrence R{}: {}", r.id, summary.reason);
            record_outcome(&self.ctx, x.recurrence_id, x.seq, &outcome).await?;
            if state == NotifyState::Started {
                let input = serde_json::to_vec(&summary).expect("the summary serialises");
                let dir = Path::new(&r.source_path)
                    .parent()
                    .unwrap_or(Path::new("/"))
                    .to_path_buf();
                spawn_notify(self.ctx.clone(), r.notify.clone(), dir, input, x, outcome);
            }
        }
        Ok(!ended.is_empty())
    }

    /// The summary of ended execution `x` of `r` against the one before it, when a
    /// decision flipped or a change point of the experiment's history is first seen at it
    /// (`recheck::change_alerts`, computed off the engine's thread).
    async fn summarise(
        &self,
        r: &RecurrenceRow,
        x: &UnjudgedExecution,
    ) -> Result<Option<recheck::NotifySummary>, DaemonError> {
        let Some(prev) = x.previous_experiment_id.clone() else {
            return Ok(None);
        };
        let latest = x.experiment_id.clone();
        let name = r.name.clone();
        let (before, after, history) = self
            .ctx
            .db
            .call(move |s| {
                let h = s.executions_by_name(&name)?;
                Ok((execution(s, &prev)?, execution(s, &latest)?, h))
            })
            .await?;
        let (Some((p, pd)), Some((l, ld))) = (before, after) else {
            return Ok(None);
        };
        let flips = recheck::flips(&pd, &ld);
        let latest = x.experiment_id.clone();
        let alerts = tokio::task::spawn_blocking(move || recheck::change_alerts(&history, &latest))
            .await
            .map_err(crate::error::join_error)?;
        Ok(recheck::summary(
            &recurrence_name(r.id),
            &r.name,
            p,
            l,
            flips,
            alerts,
        ))
    }
}

/// An execution's state and the decisions of its latest look.
fn execution(
    s: &optgate_store::Store,
    id: &str,
) -> Result<Option<(ExecutionSummary, Vec<VariantDecision>)>, optgate_store::StoreError> {
    let Some(row) = s.experiment(id)? else {
        return Ok(None);
    };
    let decisions: Vec<VariantDecision> = s
        .looks(id)?
        .last()
        .and_then(|l| serde_json::from_str(&l.decisions).ok())
        .unwrap_or_default();
    Ok(Some((
        ExecutionSummary::new(id, row.state, &decisions),
        decisions,
    )))
}

async fn record_outcome(
    ctx: &Daemon,
    rid: i64,
    seq: u32,
    outcome: &NotifyOutcome,
) -> Result<(), DaemonError> {
    let json = serde_json::to_string(outcome).expect("the outcome serialises");
    ctx.db
        .call(move |s| s.judge_execution(rid, seq, Some(&json)))
        .await
}

/// Runs the notify off the engine (bounded by `notify::NOTIFY_TIMEOUT`) and records how
/// it ended; a daemon stopped meanwhile leaves it `started`.
fn spawn_notify(
    ctx: Arc<Daemon>,
    argv: Vec<String>,
    dir: PathBuf,
    input: Vec<u8>,
    x: &UnjudgedExecution,
    base: NotifyOutcome,
) {
    let (rid, seq) = (x.recurrence_id, x.seq);
    tokio::spawn(async move {
        let ran = tokio::task::spawn_blocking(move || {
            notify::run(&argv, &dir, &input, notify::NOTIFY_TIMEOUT, base)
        })
        .await;
        let Ok(outcome) = ran else { return };
        tracing::info!("recurrence R{rid}: notify ended {:?}", outcome.state);
        if let Err(e) = record_outcome(&ctx, rid, seq, &outcome).await {
            tracing::warn!("recurrence R{rid}: cannot record the notify's end: {e}");
        }
    });
}

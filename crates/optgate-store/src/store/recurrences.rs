//! The recurrences' reads and writes (`optgate submit --every`): a recurrence with its
//! first execution, a re-submission with its new due time, cancellation, and the judged
//! mark and outcome of each execution's notify. Each write is one transaction; a
//! re-submission only goes through when the due time it was decided on is still the
//! stored one, so two passes (or a pass repeated after a crash) never submit twice.

use rusqlite::{OptionalExtension, params};

use super::{Store, insert_experiment_rows, now};
use crate::error::StoreError;
use crate::model::*;

const RECURRENCE_COLUMNS: &str = "r.id, r.name, r.source_path, r.interval_secs, r.anchor_at, \
     r.next_due_at, r.notify, r.state, r.detail, r.last_experiment_id, e.state, \
     (SELECT COUNT(*) FROM recurrence_executions x WHERE x.recurrence_id = r.id), \
     (SELECT x.notify_outcome FROM recurrence_executions x WHERE x.recurrence_id = r.id \
      AND x.notify_outcome IS NOT NULL ORDER BY x.seq DESC LIMIT 1), r.created_at";

/// A recurrence row as SQLite gives it, before its words are parsed.
struct Raw {
    id: i64,
    name: String,
    source_path: String,
    interval_secs: i64,
    anchor_at: i64,
    next_due_at: i64,
    notify: String,
    state: String,
    detail: Option<String>,
    last_experiment_id: Option<String>,
    last_state: Option<String>,
    executions: u32,
    last_notify: Option<String>,
    created_at: String,
}

fn raw(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    Ok(Raw {
        id: r.get(0)?,
        name: r.get(1)?,
        source_path: r.get(2)?,
        interval_secs: r.get(3)?,
        anchor_at: r.get(4)?,
        next_due_at: r.get(5)?,
        notify: r.get(6)?,
        state: r.get(7)?,
        detail: r.get(8)?,
        last_experiment_id: r.get(9)?,
        last_state: r.get(10)?,
        executions: r.get(11)?,
        last_notify: r.get(12)?,
        created_at: r.get(13)?,
    })
}

impl Store {
    /// Records a new experiment as the first execution of a new recurrence, in one
    /// transaction. Returns the recurrence's number (shown as `R<n>`).
    pub fn start_recurrence(
        &mut self,
        e: &NewExperiment,
        blocks: &[BlockRow],
        runs: &[NewRun],
        r: &NewRecurrence,
    ) -> Result<i64, StoreError> {
        let err = self.err("record the new recurrence");
        let t = now();
        let tx = match self.conn.transaction() {
            Ok(tx) => tx,
            Err(e) => return Err(err(e)),
        };
        let written = (|| {
            insert_experiment_rows(&tx, e, blocks, runs)?;
            tx.execute(
                "INSERT INTO recurrences (name, source_path, source_text, interval_secs, \
                 anchor_at, next_due_at, notify, state, last_experiment_id, created_at, \
                 updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'active', ?8, ?9, ?9)",
                params![
                    r.name,
                    r.source_path,
                    r.source_text,
                    r.interval_secs as i64,
                    r.anchor_at,
                    r.next_due_at,
                    serde_json::to_string(&r.notify).expect("strings serialise"),
                    e.id,
                    t
                ],
            )?;
            let id = tx.last_insert_rowid();
            tx.execute(
                "INSERT INTO recurrence_executions (recurrence_id, seq, experiment_id) \
                 VALUES (?1, 1, ?2)",
                params![id, e.id],
            )?;
            Ok(id)
        })();
        match written {
            Ok(id) => tx.commit().map(|_| id).map_err(err),
            Err(e) => Err(err(e)),
        }
    }

    /// Records experiment `e` as the next execution of recurrence `id` and moves its next
    /// due time from `due` to `next_due`, in one transaction — only while the recurrence is
    /// active and its stored due time is still `due` (else nothing is written and `false`
    /// is returned: another pass already did it, or it was cancelled).
    pub fn resubmit(
        &mut self,
        id: i64,
        due: i64,
        next_due: i64,
        e: &NewExperiment,
        blocks: &[BlockRow],
        runs: &[NewRun],
    ) -> Result<bool, StoreError> {
        let err = self.err("record the re-submission");
        let t = now();
        let tx = match self.conn.transaction() {
            Ok(tx) => tx,
            Err(e) => return Err(err(e)),
        };
        let written = (|| {
            let moved = tx.execute(
                "UPDATE recurrences SET next_due_at = ?1, last_experiment_id = ?2, \
                 detail = NULL, updated_at = ?3 \
                 WHERE id = ?4 AND state = 'active' AND next_due_at = ?5",
                params![next_due, e.id, t, id, due],
            )?;
            if moved == 0 {
                return Ok(false);
            }
            insert_experiment_rows(&tx, e, blocks, runs)?;
            tx.execute(
                "INSERT INTO recurrence_executions (recurrence_id, seq, experiment_id) \
                 SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2 FROM recurrence_executions \
                 WHERE recurrence_id = ?1",
                params![id, e.id],
            )?;
            Ok(true)
        })();
        match written {
            Ok(true) => tx.commit().map(|_| true).map_err(err),
            Ok(false) => Ok(false),
            Err(e) => Err(err(e)),
        }
    }

    /// Moves recurrence `id`'s due time from `due` to `next_due` without an execution, with
    /// `detail` saying why (its stored file no longer loads). Whether it moved.
    pub fn postpone_recurrence(
        &mut self,
        id: i64,
        due: i64,
        next_due: i64,
        detail: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn
            .execute(
                "UPDATE recurrences SET next_due_at = ?1, detail = ?2, updated_at = ?3 \
                 WHERE id = ?4 AND state = 'active' AND next_due_at = ?5",
                params![next_due, detail, now(), id, due],
            )
            .map_err(self.err("postpone the recurrence"))?;
        Ok(n == 1)
    }

    /// Cancels recurrence `id`: no more re-submissions (its executions are left as they
    /// are). Returns its state before, or `None` when there is no such recurrence.
    pub fn cancel_recurrence(&mut self, id: i64) -> Result<Option<RecurrenceState>, StoreError> {
        let before: Option<String> = self
            .conn
            .query_row("SELECT state FROM recurrences WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(self.err("read the recurrence"))?;
        self.conn
            .execute(
                "UPDATE recurrences SET state = 'cancelled', updated_at = ?1 \
                 WHERE id = ?2 AND state = 'active'",
                params![now(), id],
            )
            .map_err(self.err("cancel the recurrence"))?;
        before
            .map(|s| RecurrenceState::parse(&s).ok_or_else(|| self.bad("a recurrence's state", &s)))
            .transpose()
    }

    /// Every recurrence (or only the active ones), oldest first.
    pub fn recurrences(&self, only_active: bool) -> Result<Vec<RecurrenceRow>, StoreError> {
        let filter = if only_active {
            "WHERE r.state = 'active'"
        } else {
            ""
        };
        let sql = format!(
            "SELECT {RECURRENCE_COLUMNS} FROM recurrences r \
             LEFT JOIN experiments e ON e.id = r.last_experiment_id {filter} ORDER BY r.id"
        );
        let mut stmt = self
            .conn
            .prepare(&sql)
            .map_err(self.err("list recurrences"))?;
        let raws: Vec<Raw> = stmt
            .query_map([], raw)
            .and_then(|rows| rows.collect())
            .map_err(self.err("list recurrences"))?;
        raws.into_iter()
            .map(|r| self.recurrence_from_raw(r))
            .collect()
    }

    fn recurrence_from_raw(&self, r: Raw) -> Result<RecurrenceRow, StoreError> {
        let notify: Vec<String> = serde_json::from_str(&r.notify)
            .map_err(|_| self.bad("a recurrence's notify", &r.notify))?;
        let last_state = match r.last_state {
            Some(s) => Some(
                ExperimentState::parse(&s).ok_or_else(|| self.bad("an experiment's state", &s))?,
            ),
            None => None,
        };
        Ok(RecurrenceRow {
            id: r.id,
            name: r.name,
            source_path: r.source_path,
            interval_secs: r.interval_secs.max(1) as u64,
            anchor_at: r.anchor_at,
            next_due_at: r.next_due_at,
            notify,
            state: RecurrenceState::parse(&r.state)
                .ok_or_else(|| self.bad("a recurrence's state", &r.state))?,
            detail: r.detail,
            last_experiment_id: r.last_experiment_id,
            last_state,
            executions: r.executions,
            last_notify: r.last_notify,
            created_at: r.created_at,
        })
    }

    /// The experiment text recurrence `id` submits.
    pub fn recurrence_text(&self, id: i64) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT source_text FROM recurrences WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("read a recurrence's text"))
    }

    /// Executions that ended (their experiment in a final state) and were not yet judged
    /// for a notify, each with the execution before it.
    pub fn unjudged_executions(&self) -> Result<Vec<UnjudgedExecution>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT x.recurrence_id, x.seq, x.experiment_id, \
                 (SELECT p.experiment_id FROM recurrence_executions p \
                  WHERE p.recurrence_id = x.recurrence_id AND p.seq = x.seq - 1) \
                 FROM recurrence_executions x JOIN experiments e ON e.id = x.experiment_id \
                 WHERE x.judged = 0 AND e.state IN \
                 ('decided', 'budget_exhausted', 'failed', 'cancelled') \
                 ORDER BY x.recurrence_id, x.seq",
            )
            .map_err(self.err("list ended executions"))?;
        stmt.query_map([], |r| {
            Ok(UnjudgedExecution {
                recurrence_id: r.get(0)?,
                seq: r.get(1)?,
                experiment_id: r.get(2)?,
                previous_experiment_id: r.get(3)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(self.err("list ended executions"))
    }

    /// Marks execution `seq` of recurrence `id` judged, with the notify's `outcome` (JSON)
    /// when one is to run — committed before it runs, so a crash never runs it twice.
    pub fn judge_execution(
        &mut self,
        id: i64,
        seq: u32,
        outcome: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE recurrence_executions SET judged = 1, notify_outcome = ?1 \
                 WHERE recurrence_id = ?2 AND seq = ?3",
                params![outcome, id, seq],
            )
            .map_err(self.err("record the execution's judgement"))?;
        Ok(())
    }
}

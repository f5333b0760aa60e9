//! The history of executions: one row per ended execution (`optgate run`'s and the
//! daemon's) with its identity and outcome, read by experiment name oldest first; the
//! queue of ended experiments whose row the engine has yet to write (`executions_due`,
//! filled by a trigger in the transaction that ends an experiment); the build's identity
//! recorded on an experiment when it starts.

use rusqlite::{OptionalExtension, Row, params};
use serde::{Deserialize, Serialize};

use crate::error::StoreError;
use crate::model::{DamagedExperimentRow, ExperimentState, SchedulerKind};
use crate::store::Store;

crate::model::stored_enum! {
    /// Who executed an experiment.
    ExecutionKind {
        /// `optgate run`, in its own process, on this machine.
        Run => "run",
        /// The daemon (`optgate submit`), on any scheduler.
        Daemon => "daemon",
    }
}

/// Rows read each on its own, the first damaged one being the error.
fn all_read(rows: Vec<EachExecution>) -> Result<Vec<Execution>, StoreError> {
    rows.into_iter()
        .map(|row| row.map_err(|d| *d.error))
        .collect()
}

/// One execution row read on its own: the execution, or the row's id and name with what
/// is wrong in it.
pub type EachExecution = Result<Execution, DamagedExperimentRow>;

/// The workdir's git commit and whether its tracked files differed from it (none when the
/// workdir is no git checkout or git did not answer in time).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildIdentity {
    pub git_commit: Option<String>,
    pub git_dirty: Option<bool>,
}

/// One variant's outcome in an execution: the decision and the estimates it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantOutcome {
    pub variant: String,
    pub decision: optgate_stats::Decision,
    pub reason: String,
    /// Speed-up over the baseline (> 1: faster) with its interval.
    pub speedup: Option<f64>,
    pub speedup_ci_low: Option<f64>,
    pub speedup_ci_high: Option<f64>,
    /// System Impact (%, the system metric's change) with its interval.
    pub system_impact_pct: Option<f64>,
    pub system_impact_ci_low: Option<f64>,
    pub system_impact_ci_high: Option<f64>,
}

/// One ended execution, as recorded and as read back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Execution {
    /// The experiment's id in the database that ran it (the daemon's, or the execution's
    /// own under `<root>/.optgate/`).
    pub id: String,
    pub name: String,
    pub kind: ExecutionKind,
    pub scheduler: SchedulerKind,
    pub state: ExperimentState,
    pub state_reason: Option<String>,
    pub source_path: String,
    pub source_sha256: String,
    pub root: String,
    #[serde(flatten)]
    pub build: BuildIdentity,
    /// The hosts its runs ran on, sorted.
    pub nodes: Vec<String>,
    pub started_at: String,
    pub ended_at: String,
    pub runs_completed: u32,
    pub runs_total: u32,
    pub looks: u32,
    /// The baseline arm's name and its steady-state value (median, seconds per epoch).
    pub baseline: Option<String>,
    pub baseline_median_s: Option<f64>,
    pub variants: Vec<VariantOutcome>,
}

const COLUMNS: &str = "id, name, kind, scheduler, state, state_reason, source_path, \
     source_sha256, root, git_commit, git_dirty, nodes, started_at, ended_at, runs_completed, \
     runs_total, looks, baseline, baseline_median_s, variants";

impl Store {
    /// Records an ended execution (replacing an earlier row of the same id: an execution
    /// resumed after an interrupt ends again) and takes its id off the queue of ended
    /// experiments, in one transaction.
    pub fn record_execution(&mut self, e: &Execution) -> Result<(), StoreError> {
        let op = "record an execution in the history";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        tx.execute(
            &format!(
                "INSERT OR REPLACE INTO executions ({COLUMNS}) VALUES \
                 (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
                 ?18, ?19, ?20)"
            ),
            params![
                e.id,
                e.name,
                e.kind.as_str(),
                e.scheduler.as_str(),
                e.state.as_str(),
                e.state_reason,
                e.source_path,
                e.source_sha256,
                e.root,
                e.build.git_commit,
                e.build.git_dirty,
                serde_json::to_string(&e.nodes).expect("strings serialise"),
                e.started_at,
                e.ended_at,
                e.runs_completed,
                e.runs_total,
                e.looks,
                e.baseline,
                e.baseline_median_s,
                serde_json::to_string(&e.variants).expect("outcomes serialise"),
            ],
        )
        .map_err(err.clone())?;
        tx.execute(
            "DELETE FROM executions_due WHERE experiment_id = ?1",
            [&e.id],
        )
        .map_err(err.clone())?;
        tx.commit().map_err(err)
    }

    /// Every execution of the experiment `name`, oldest first (by start, then id); one
    /// indexed range read (`executions_by_name`). A damaged row is the error.
    pub fn executions_by_name(&self, name: &str) -> Result<Vec<Execution>, StoreError> {
        all_read(self.executions_by_name_each(name)?)
    }

    /// [`Store::executions_by_name`], each row read on its own: a damaged one (a value this
    /// optgate cannot read) is its error with the row's id and name, and the others are
    /// still read — what `optgate history` shows.
    pub fn executions_by_name_each(&self, name: &str) -> Result<Vec<EachExecution>, StoreError> {
        let sql =
            format!("SELECT {COLUMNS} FROM executions WHERE name = ?1 ORDER BY started_at, id");
        self.query_each(&sql, name)
    }

    /// The newest `limit` executions of one kind (all when `None`), oldest first: the
    /// page `optgate status` shows, one indexed range read from its end; each row read on
    /// its own, a damaged one being its error with the row's id and name.
    pub fn newest_executions_of_kind_each(
        &self,
        kind: ExecutionKind,
        limit: Option<u32>,
    ) -> Result<Vec<EachExecution>, StoreError> {
        let limit = limit.map_or(-1, i64::from);
        let sql = format!(
            "SELECT {COLUMNS} FROM executions WHERE kind = ?1 \
             ORDER BY started_at DESC, id DESC LIMIT {limit}"
        );
        let mut newest = self.query_each(&sql, kind.as_str())?;
        newest.reverse();
        Ok(newest)
    }

    /// The execution `id` (its primary key), if the history has it; a damaged row is its
    /// error with its id and name.
    pub fn execution_each(&self, id: &str) -> Result<Option<EachExecution>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM executions WHERE id = ?1");
        Ok(self.query_each(&sql, id)?.into_iter().next())
    }

    fn query_each(&self, sql: &str, key: &str) -> Result<Vec<EachExecution>, StoreError> {
        let op = "read the history of executions";
        let mut stmt = self.conn.prepare_cached(sql).map_err(self.err(op))?;
        let raws = stmt
            .query_map([key], raw_execution)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(self.err(op))?;
        Ok(raws
            .into_iter()
            .map(|r| {
                let (id, name) = (r.id.clone(), r.name.clone());
                self.execution_from_raw(r)
                    .map_err(|error| DamagedExperimentRow {
                        id,
                        name,
                        error: Box::new(error),
                    })
            })
            .collect())
    }

    /// Ended experiments whose execution row is not yet written, oldest queued first.
    pub fn executions_due(&self) -> Result<Vec<String>, StoreError> {
        let op = "list the ended experiments not yet in the history";
        let mut stmt = self
            .conn
            .prepare_cached("SELECT experiment_id FROM executions_due ORDER BY rowid")
            .map_err(self.err(op))?;
        stmt.query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(self.err(op))
    }

    /// Takes `id` off the queue without a row (the experiment is gone, or was reopened).
    pub fn drop_execution_due(&mut self, id: &str) -> Result<(), StoreError> {
        self.conn
            .execute("DELETE FROM executions_due WHERE experiment_id = ?1", [id])
            .map_err(self.err("unqueue an ended experiment"))?;
        Ok(())
    }

    /// Records the build's identity of an experiment as it starts.
    pub fn set_build_identity(&mut self, id: &str, b: &BuildIdentity) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE experiments SET git_commit = ?2, git_dirty = ?3 WHERE id = ?1",
                params![id, b.git_commit, b.git_dirty],
            )
            .map_err(self.err("record the build's identity"))?;
        Ok(())
    }

    /// The build's identity recorded for an experiment (default when none was).
    pub fn build_identity(&self, id: &str) -> Result<BuildIdentity, StoreError> {
        self.conn
            .query_row(
                "SELECT git_commit, git_dirty FROM experiments WHERE id = ?1",
                [id],
                |r| {
                    Ok(BuildIdentity {
                        git_commit: r.get(0)?,
                        git_dirty: r.get(1)?,
                    })
                },
            )
            .optional()
            .map(Option::unwrap_or_default)
            .map_err(self.err("read the build's identity"))
    }

    fn execution_from_raw(&self, r: RawExecution) -> Result<Execution, StoreError> {
        Ok(Execution {
            kind: ExecutionKind::parse(&r.kind)
                .ok_or_else(|| self.bad("executions.kind", &r.kind))?,
            scheduler: SchedulerKind::parse(&r.scheduler)
                .ok_or_else(|| self.bad("executions.scheduler", &r.scheduler))?,
            state: ExperimentState::parse(&r.state)
                .ok_or_else(|| self.bad("executions.state", &r.state))?,
            nodes: serde_json::from_str(&r.nodes)
                .map_err(|_| self.bad("executions.nodes", &r.nodes))?,
            variants: serde_json::from_str(&r.variants)
                .map_err(|_| self.bad("executions.variants", &r.variants))?,
            id: r.id,
            name: r.name,
            state_reason: r.state_reason,
            source_path: r.source_path,
            source_sha256: r.source_sha256,
            root: r.root,
            build: r.build,
            started_at: r.started_at,
            ended_at: r.ended_at,
            runs_completed: r.runs_completed,
            runs_total: r.runs_total,
            looks: r.looks,
            baseline: r.baseline,
            baseline_median_s: r.baseline_median_s,
        })
    }
}

struct RawExecution {
    id: String,
    name: String,
    kind: String,
    scheduler: String,
    state: String,
    state_reason: Option<String>,
    source_path: String,
    source_sha256: String,
    root: String,
    build: BuildIdentity,
    nodes: String,
    started_at: String,
    ended_at: String,
    runs_completed: u32,
    runs_total: u32,
    looks: u32,
    baseline: Option<String>,
    baseline_median_s: Option<f64>,
    variants: String,
}

fn raw_execution(r: &Row<'_>) -> rusqlite::Result<RawExecution> {
    Ok(RawExecution {
        id: r.get(0)?,
        name: r.get(1)?,
        kind: r.get(2)?,
        scheduler: r.get(3)?,
        state: r.get(4)?,
        state_reason: r.get(5)?,
        source_path: r.get(6)?,
        source_sha256: r.get(7)?,
        root: r.get(8)?,
        build: BuildIdentity {
            git_commit: r.get(9)?,
            git_dirty: r.get(10)?,
        },
        nodes: r.get(11)?,
        started_at: r.get(12)?,
        ended_at: r.get(13)?,
        runs_completed: r.get(14)?,
        runs_total: r.get(15)?,
        looks: r.get(16)?,
        baseline: r.get(17)?,
        baseline_median_s: r.get(18)?,
        variants: r.get(19)?,
    })
}

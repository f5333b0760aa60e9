//! [`Store`]: the one connection to the database and every read and write the daemon
//! makes. Each write method is one transaction, so a crash or a full disk leaves the
//! database as it was before the call or as it is after, never in between.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::error::StoreError;
use crate::migrations::{self, LATEST};
use crate::model::*;

mod recurrences;

/// How long a write waits for another connection's lock: the daemon and any number of
/// `optgate run` processes recording their executions write the same file; each write is
/// one short transaction, but with `synchronous = FULL` each commit is an fsync, and on a
/// loaded disk nine writers at once kept one waiting past 5 s
/// (`tests/executions.rs::concurrent_writers_lose_no_execution`).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Store {
    pub(crate) conn: Connection,
    pub(crate) path: PathBuf,
}

pub(crate) fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

const EXPERIMENT_COLUMNS: &str = "id, name, source_path, source_sha256, root, scheduler, state, \
     state_reason, replicates, max_replicates, created_at, updated_at";

const JOB_COLUMNS: &str = "id, experiment_id, block, name, attempt, run_ids, scheduler_job_id, \
     state, detail, created_at, updated_at, scheduler_state";

/// The stored run counts of one experiment (a prefix of the counts' primary key).
const RUN_COUNTS_OF: &str = "SELECT state, n FROM run_state_counts WHERE experiment_id = ?1";

/// The stored block count of one experiment.
const BLOCK_COUNT_OF: &str = "SELECT n FROM block_counts WHERE experiment_id = ?1";

/// The latest look of one experiment (the looks' primary key, read backwards, one row).
const LATEST_LOOK_OF: &str = "SELECT look, blocks, nominal_alpha, decisions, created_at \
     FROM looks WHERE experiment_id = ?1 ORDER BY look DESC LIMIT 1";

/// The condition of an active experiment, word for word the `experiments_active` partial
/// index's (migration 5): SQLite uses a partial index only for a query that repeats it.
const ACTIVE: &str = "state NOT IN ('decided', 'budget_exhausted', 'failed', 'cancelled')";

/// One page of the experiment list, newest first (`experiments_by_created`, read backwards).
fn page_sql() -> String {
    format!(
        "SELECT {EXPERIMENT_COLUMNS} FROM experiments ORDER BY created_at DESC, id DESC LIMIT ?1"
    )
}

fn active_sql() -> String {
    format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE {ACTIVE} ORDER BY created_at, id")
}

/// The experiments not yet closed whose kind is unknown: the candidates are the active ones
/// (their partial index) and those with live jobs (`jobs_by_state`), never the whole table
/// — the engine asks at every pass.
fn unreadable_sql() -> String {
    format!(
        "SELECT id, scheduler FROM experiments WHERE id IN \
         (SELECT id FROM experiments WHERE {ACTIVE} UNION SELECT experiment_id FROM jobs \
         WHERE state IN ('submitting', 'submitted')) AND scheduler NOT IN ({known}) \
         ORDER BY created_at, id",
        known = known_kinds_sql()
    )
}

fn jobs_of_sql() -> String {
    format!("SELECT {JOB_COLUMNS} FROM jobs WHERE experiment_id = ?1 ORDER BY id")
}

/// Refuses a database (or its `-wal`/`-shm` companion) that exists but is not a regular
/// file: SQLite would block for ever opening a FIFO, and read a device as data. A link to a
/// regular file is fine. Looking does not open, so it cannot block.
fn check_plain_files(db: &Path) -> Result<(), StoreError> {
    for suffix in ["", "-wal", "-shm"] {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        let path = PathBuf::from(name);
        match std::fs::metadata(&path) {
            Ok(m) if !m.is_file() => {
                return Err(StoreError::Corrupt {
                    path: db.to_path_buf(),
                    detail: format!(
                        "{} is {}, not a regular file; it was not opened",
                        path.display(),
                        optgate_experiment::read::file_kind(&m)
                    ),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// The most of a damaged value an error quotes: a malformed JSON column can be megabytes.
pub const QUOTED_VALUE_CHARS: usize = 200;

fn quoted_value(value: &str) -> String {
    match value.char_indices().nth(QUOTED_VALUE_CHARS) {
        Some((cut, _)) => format!("{}… ({} bytes in all)", &value[..cut], value.len()),
        None => value.to_string(),
    }
}

fn migration_error(e: rusqlite::Error, version: u32, path: &Path) -> StoreError {
    use rusqlite::ErrorCode as C;
    match e.sqlite_error_code() {
        Some(
            C::DiskFull
            | C::DatabaseBusy
            | C::DatabaseLocked
            | C::SystemIoFailure
            | C::ReadOnly
            | C::CannotOpen
            | C::PermissionDenied
            | C::OutOfMemory,
        ) => StoreError::from_sqlite("migrate", path.to_path_buf(), e),
        _ => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: format!(
                "its schema version {version} does not match its tables ({e}); nothing was \
                 migrated"
            ),
        },
    }
}

/// Refuses a file at the latest version whose tables are not the schema's (a table dropped
/// by hand, a file copied from another program): every pass would fail on it otherwise.
fn check_schema(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let problems = migrations::schema_problems(conn)
        .map_err(|e| StoreError::from_sqlite("read the schema of", path.to_path_buf(), e))?;
    match problems.is_empty() {
        true => Ok(()),
        false => Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("its tables are not optgate's: {}", problems.join("; ")),
        }),
    }
}

/// The connection to the database at `path` (opened with `flags`, after refusing what is
/// not a plain file) and its schema version, with nothing written to it; a version newer
/// than this optgate's is refused as [`StoreError::TooNew`].
fn open_known_version(
    path: &Path,
    flags: rusqlite::OpenFlags,
) -> Result<(Connection, u32), StoreError> {
    let err = |op: &'static str| {
        let path = path.to_path_buf();
        move |e| StoreError::from_sqlite(op, path, e)
    };
    check_plain_files(path)?;
    let conn = Connection::open_with_flags(path, flags).map_err(err("open"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(err("set the busy timeout"))?;
    let version = migrations::user_version(&conn).map_err(err("read the schema version"))?;
    if version > LATEST {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: LATEST,
        });
    }
    Ok((conn, version))
}

impl Store {
    /// Opens (creating it if needed) the database at `path` and brings its schema up to
    /// date. A database from a newer optgate is refused before anything is written to it;
    /// a file that is not a database, or is damaged, gives [`StoreError::Corrupt`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_checked(path, true)
    }

    /// [`Store::open`] without the integrity check, whose cost grows with the file: what
    /// `optgate run` opens the user's database with to add its execution to the history
    /// (the daemon checks the file when it starts).
    pub fn open_for_history(path: &Path) -> Result<Store, StoreError> {
        Store::open_checked(path, false)
    }

    fn open_checked(path: &Path, integrity_check: bool) -> Result<Store, StoreError> {
        let path = path.to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                op: "create the directory of",
                path: path.clone(),
                source,
            })?;
        }
        let err = |op: &'static str| {
            let path = path.clone();
            move |e| StoreError::from_sqlite(op, path, e)
        };
        // The version is read before anything writes: a newer database must stay untouched
        // (even switching the journal mode would write its header).
        let (mut conn, version) = open_known_version(&path, rusqlite::OpenFlags::default())?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(err("switch to WAL mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Corrupt {
                path,
                detail: format!("journal mode stays `{mode}` instead of `wal`"),
            });
        }
        // FULL: a commit survives power loss, not only a crash; commits are rare (state
        // changes), so the fsync costs nothing that matters.
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(err("configure"))?;
        let check: String = match integrity_check {
            true => conn
                .query_row("PRAGMA quick_check", [], |r| r.get(0))
                .map_err(err("check the integrity of"))?,
            false => "ok".to_string(),
        };
        if check != "ok" {
            return Err(StoreError::Corrupt {
                path,
                detail: format!("integrity check: {check}"),
            });
        }
        // A migration's SQL failing (a table already there, or missing) means the file's
        // tables do not match its version; everything was rolled back. A full disk, a lock
        // or an I/O error is told as such.
        migrations::migrate_to(&mut conn, LATEST)
            .map_err(|e| migration_error(e, version, &path))?;
        check_schema(&conn, &path)?;
        Ok(Store { conn, path })
    }

    /// Opens an existing database without writing anything (no migration, no journal mode
    /// change): what the CLI reads when no daemon runs. A database of another schema
    /// version is refused — only a daemon migrates.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let path = path.to_path_buf();
        let (conn, version) = open_known_version(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        if version < LATEST {
            return Err(StoreError::Corrupt {
                path,
                detail: format!(
                    "schema version {version} needs an upgrade to {LATEST}, which only a \
                     running daemon does: start it with `optgate daemon`"
                ),
            });
        }
        check_schema(&conn, &path)?;
        Ok(Store { conn, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn schema_version(&self) -> Result<u32, StoreError> {
        migrations::user_version(&self.conn).map_err(self.err("read the schema version"))
    }

    /// Limits the database to `pages` pages (tests use it to simulate a full disk).
    pub fn set_max_page_count(&self, pages: u64) -> Result<(), StoreError> {
        self.conn
            .query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))
            .map_err(self.err("set the page limit"))
    }

    pub(crate) fn err(
        &self,
        op: &'static str,
    ) -> impl FnOnce(rusqlite::Error) -> StoreError + use<> {
        let path = self.path.clone();
        move |e| StoreError::from_sqlite(op, path, e)
    }

    pub(crate) fn bad(&self, what: &'static str, value: &str) -> StoreError {
        StoreError::BadValue {
            path: self.path.clone(),
            what,
            value: quoted_value(value),
        }
    }

    // ----- experiments -------------------------------------------------------------------

    /// Records a new experiment with its initial blocks and runs, in state `planned`.
    pub fn insert_experiment(
        &mut self,
        e: &NewExperiment,
        blocks: &[BlockRow],
        runs: &[NewRun],
    ) -> Result<(), StoreError> {
        let op = "record the new experiment";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        insert_experiment_rows(&tx, e, blocks, runs).map_err(err.clone())?;
        tx.commit().map_err(err)
    }

    pub fn experiment(&self, id: &str) -> Result<Option<ExperimentRow>, StoreError> {
        let sql = format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE id = ?1");
        let raw = self
            .conn
            .query_row(&sql, [id], raw_experiment)
            .optional()
            .map_err(self.err("read an experiment"))?;
        raw.map(|r| self.experiment_from_raw(r)).transpose()
    }

    /// Every experiment, oldest first.
    pub fn experiments(&self) -> Result<Vec<ExperimentRow>, StoreError> {
        let sql = format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments ORDER BY created_at, id");
        self.query_experiments(&sql, [])
    }

    /// Experiments that are not in a terminal state, oldest first.
    pub fn active_experiments(&self) -> Result<Vec<ExperimentRow>, StoreError> {
        self.query_experiments(&active_sql(), [])
    }

    /// A page of the experiment list, newest first: at most `limit` rows (all with
    /// `None`), each read on its own as in [`Store::experiments_each`], and how many
    /// experiments there are in all (of which the page shows the newest). The rows are
    /// read down the `experiments_by_created` index and the total is stored: the cost is
    /// the page's, whatever the database holds.
    pub fn experiments_page(&self, limit: Option<u32>) -> Result<ExperimentPage, StoreError> {
        let op = "list experiments";
        let total: u64 = self
            .conn
            .prepare_cached("SELECT n FROM experiment_count")
            .and_then(|mut stmt| stmt.query_row([], |r| r.get(0)))
            .map_err(self.err(op))?;
        // SQLite reads a negative LIMIT as none.
        let limit = limit.map_or(-1, i64::from);
        let mut stmt = self
            .conn
            .prepare_cached(&page_sql())
            .map_err(self.err(op))?;
        let raws = stmt
            .query_map([limit], raw_experiment)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(self.err(op))?;
        let rows = raws.into_iter().map(|r| self.each_from_raw(r)).collect();
        Ok(ExperimentPage { rows, total })
    }

    /// An experiment row, or the damaged row apart with its id and name.
    fn each_from_raw(&self, r: RawExperiment) -> Result<ExperimentRow, DamagedExperimentRow> {
        let (id, name) = (r.id.clone(), r.name.clone());
        self.experiment_from_raw(r)
            .map_err(|error| DamagedExperimentRow {
                id,
                name,
                error: Box::new(error),
            })
    }

    /// Every experiment (or the one `id` names), oldest first, each row read on its own: a
    /// damaged one (a scheduler kind or state this optgate does not know) is its error,
    /// with the row's id and name, and does not keep the others from being read.
    pub fn experiments_each(
        &self,
        id: Option<&str>,
    ) -> Result<Vec<Result<ExperimentRow, DamagedExperimentRow>>, StoreError> {
        // Two statements: `?1 IS NULL OR id = ?1` would scan the table for one id.
        let sql = match id {
            Some(_) => format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE id = ?1"),
            None => format!(
                "SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE ?1 IS NULL \
                 ORDER BY created_at, id"
            ),
        };
        let mut stmt = self
            .conn
            .prepare_cached(&sql)
            .map_err(self.err("list experiments"))?;
        let raws = stmt
            .query_map([id], raw_experiment)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(self.err("list experiments"))?;
        Ok(raws.into_iter().map(|r| self.each_from_raw(r)).collect())
    }

    fn query_experiments<P: rusqlite::Params>(
        &self,
        sql: &str,
        p: P,
    ) -> Result<Vec<ExperimentRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(self.err("list experiments"))?;
        let raws = stmt
            .query_map(p, raw_experiment)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(self.err("list experiments"))?;
        raws.into_iter()
            .map(|r| self.experiment_from_raw(r))
            .collect()
    }

    fn experiment_from_raw(&self, r: RawExperiment) -> Result<ExperimentRow, StoreError> {
        let state = ExperimentState::parse(&r.state)
            .ok_or_else(|| self.bad("experiments.state", &r.state))?;
        let scheduler =
            SchedulerKind::parse(&r.scheduler).ok_or_else(|| StoreError::UnknownSchedulerKind {
                path: self.path.clone(),
                experiment: r.id.clone(),
                value: r.scheduler.clone(),
            })?;
        Ok(ExperimentRow {
            id: r.id,
            name: r.name,
            source_path: r.source_path,
            source_sha256: r.source_sha256,
            root: r.root,
            scheduler,
            state,
            state_reason: r.state_reason,
            replicates: r.replicates,
            max_replicates: r.max_replicates,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }

    /// Experiments whose stored scheduler kind is none this optgate knows (a damaged row:
    /// the CHECK constraint keeps such values out of every write since schema version 4)
    /// and that are not yet closed — not terminal, or with live jobs — as `(id, value)`.
    /// Every other read of such a row fails with [`StoreError::UnknownSchedulerKind`].
    pub fn unreadable_scheduler_kinds(&self) -> Result<Vec<(String, String)>, StoreError> {
        let op = "list experiments with an unreadable scheduler kind";
        let mut stmt = self
            .conn
            .prepare_cached(&unreadable_sql())
            .map_err(self.err(op))?;
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(self.err(op))
    }

    /// Closes an experiment whose scheduler kind is unreadable without asking any
    /// scheduler (which one holds its jobs is unknown): the experiment `failed` with
    /// `reason` unless it already ended, its unfinished runs and live jobs `cancelled`
    /// with `reason` as their detail — one transaction.
    pub fn close_unreadable(&mut self, id: &str, reason: &str) -> Result<(), StoreError> {
        let op = "close an experiment with an unreadable scheduler kind";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        let t = now();
        tx.execute(
            "UPDATE experiments SET state = 'failed', state_reason = ?2, updated_at = ?3 \
             WHERE id = ?1 AND state NOT IN ('decided', 'budget_exhausted', 'failed', 'cancelled')",
            params![id, reason, t],
        )
        .map_err(err.clone())?;
        tx.execute(
            "UPDATE runs SET state = 'cancelled', detail = ?2 \
             WHERE experiment_id = ?1 AND state IN ('pending', 'queued')",
            params![id, reason],
        )
        .map_err(err.clone())?;
        tx.execute(
            "UPDATE jobs SET state = 'cancelled', detail = ?2, updated_at = ?3 \
             WHERE experiment_id = ?1 AND state IN ('submitting', 'submitted')",
            params![id, reason, t],
        )
        .map_err(err.clone())?;
        tx.commit().map_err(err)
    }

    /// The experiment file's text as submitted.
    pub fn source_text(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT source_text FROM experiments WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("read an experiment's source"))
    }

    /// Moves an experiment to `state`. Refuses nothing: the caller owns the state machine.
    pub fn set_state(
        &mut self,
        id: &str,
        state: ExperimentState,
        reason: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE experiments SET state = ?2, state_reason = ?3, updated_at = ?4 WHERE id = ?1",
                params![id, state.as_str(), reason, now()],
            )
            .map_err(self.err("change an experiment's state"))?;
        Ok(())
    }

    /// Marks an experiment cancelled unless it already ended. Returns its state before the
    /// call, or `None` when there is no such experiment.
    pub fn cancel_experiment(
        &mut self,
        id: &str,
        reason: &str,
    ) -> Result<Option<ExperimentState>, StoreError> {
        let op = "cancel an experiment";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        let before: Option<String> = tx
            .query_row("SELECT state FROM experiments WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(err.clone())?;
        let Some(before) = before else {
            return Ok(None);
        };
        let path = self.path.clone();
        let before = ExperimentState::parse(&before).ok_or_else(|| StoreError::BadValue {
            path,
            what: "experiments.state",
            value: before.clone(),
        })?;
        if !before.is_terminal() {
            tx.execute(
                "UPDATE experiments SET state = 'cancelled', state_reason = ?2, updated_at = ?3 \
                 WHERE id = ?1",
                params![id, reason, now()],
            )
            .map_err(err.clone())?;
            tx.execute(
                "UPDATE runs SET state = 'cancelled', detail = ?2 \
                 WHERE experiment_id = ?1 AND state = 'pending'",
                params![id, reason],
            )
            .map_err(err.clone())?;
        }
        tx.commit().map_err(err)?;
        Ok(Some(before))
    }

    /// Undoes one cancellation: an experiment `cancelled` with exactly `reason` goes back
    /// to `planned` (the engine's start: builds already made are kept), and the runs that
    /// cancellation cancelled — those whose detail is `reason` — back to `pending`. Runs
    /// cancelled for anything else (an arm not applicable, an arm stopped by fail fast)
    /// stay cancelled. One transaction; returns whether the experiment was reopened.
    /// (`optgate run` resuming an execution its Ctrl-C cancelled.)
    pub fn reopen_cancelled(&mut self, id: &str, reason: &str) -> Result<bool, StoreError> {
        let op = "reopen a cancelled experiment";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        let moved = tx
            .execute(
                "UPDATE experiments SET state = 'planned', state_reason = NULL, updated_at = ?3 \
                 WHERE id = ?1 AND state = 'cancelled' AND state_reason = ?2",
                params![id, reason, now()],
            )
            .map_err(err.clone())?;
        if moved == 1 {
            tx.execute(
                "UPDATE runs SET state = 'pending', detail = NULL \
                 WHERE experiment_id = ?1 AND state = 'cancelled' AND detail = ?2",
                params![id, reason],
            )
            .map_err(err.clone())?;
        }
        tx.commit().map_err(err)?;
        Ok(moved == 1)
    }

    /// Moves an experiment from `from` to `to` only if it is still in `from` (a build that
    /// ends after a cancellation must not revive the experiment). Returns whether it moved.
    pub fn transition(
        &mut self,
        id: &str,
        from: ExperimentState,
        to: ExperimentState,
        reason: Option<&str>,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn
            .execute(
                "UPDATE experiments SET state = ?3, state_reason = ?4, updated_at = ?5 \
                 WHERE id = ?1 AND state = ?2",
                params![id, from.as_str(), to.as_str(), reason, now()],
            )
            .map_err(self.err("change an experiment's state"))?;
        Ok(n == 1)
    }

    /// Starts the build phase: records the arms that cannot run on this node (their runs
    /// are cancelled with the reason, so they are never submitted) and moves the
    /// experiment from `planned` to `building`, in one transaction.
    pub fn begin_building(
        &mut self,
        id: &str,
        not_applicable: &BTreeMap<String, String>,
    ) -> Result<(), StoreError> {
        let op = "start building";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        tx.execute(
            "UPDATE experiments SET not_applicable = ?2, state = 'building', state_reason = NULL, \
             updated_at = ?3 WHERE id = ?1 AND state = 'planned'",
            params![
                id,
                serde_json::to_string(not_applicable).expect("strings serialise"),
                now()
            ],
        )
        .map_err(err.clone())?;
        for (arm, reason) in not_applicable {
            tx.execute(
                "UPDATE runs SET state = 'cancelled', detail = ?3 \
                 WHERE experiment_id = ?1 AND arm = ?2 AND state = 'pending'",
                params![id, arm, format!("not applicable: {reason}")],
            )
            .map_err(err.clone())?;
        }
        tx.commit().map_err(err)
    }

    /// The arms recorded as not applicable (empty before the build phase).
    pub fn not_applicable(&self, id: &str) -> Result<BTreeMap<String, String>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row(
                "SELECT not_applicable FROM experiments WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.err("read not-applicable arms"))?
            .flatten();
        match text {
            None => Ok(BTreeMap::new()),
            Some(t) => {
                serde_json::from_str(&t).map_err(|_| self.bad("experiments.not_applicable", &t))
            }
        }
    }

    pub fn report(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT report_json FROM experiments WHERE id = ?1",
                [id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()
            .map(Option::flatten)
            .map_err(self.err("read a report"))
    }

    // ----- blocks and runs ---------------------------------------------------------------

    pub fn blocks(&self, id: &str) -> Result<Vec<BlockRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT idx, arm_order FROM blocks WHERE experiment_id = ?1 ORDER BY idx",
            )
            .map_err(self.err("list blocks"))?;
        let raws: Vec<(u32, String)> = stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(self.err("list blocks"))?;
        raws.into_iter()
            .map(|(index, order)| {
                let order = serde_json::from_str(&order)
                    .map_err(|_| self.bad("blocks.arm_order", &order))?;
                Ok(BlockRow { index, order })
            })
            .collect()
    }

    pub fn runs(&self, id: &str) -> Result<Vec<RunRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT run_id, block, arm, position, state, detail FROM runs \
                 WHERE experiment_id = ?1 ORDER BY block, position",
            )
            .map_err(self.err("list runs"))?;
        type Raw = (String, u32, String, u32, String, Option<String>);
        let raws: Vec<Raw> = stmt
            .query_map([id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(self.err("list runs"))?;
        raws.into_iter()
            .map(|(run_id, block, arm, position, state, detail)| {
                Ok(RunRow {
                    state: RunState::parse(&state).ok_or_else(|| self.bad("runs.state", &state))?,
                    run_id,
                    block,
                    arm,
                    position,
                    detail,
                })
            })
            .collect()
    }

    /// The blocks of one experiment, from the stored count (0 for none or no such one).
    pub fn block_count_of(&self, id: &str) -> Result<u32, StoreError> {
        self.conn
            .prepare_cached(BLOCK_COUNT_OF)
            .and_then(|mut stmt| stmt.query_row([id], |r| r.get(0)).optional())
            .map(Option::unwrap_or_default)
            .map_err(self.err("count blocks"))
    }

    /// Run counts of one experiment, from the stored counts: a few rows whatever the
    /// number of runs anywhere.
    pub fn run_counts_of(&self, id: &str) -> Result<RunCounts, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(RUN_COUNTS_OF)
            .map_err(self.err("count runs"))?;
        let raws: Vec<(String, u32)> = stmt
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))
            .and_then(|rows| rows.collect())
            .map_err(self.err("count runs"))?;
        let mut c = RunCounts::default();
        for (state, n) in raws {
            c.add(
                RunState::parse(&state).ok_or_else(|| self.bad("runs.state", &state))?,
                n,
            );
        }
        Ok(c)
    }

    /// Records run outcomes read while their job is still running (live progress).
    pub fn update_runs(&mut self, id: &str, updates: &[RunUpdate]) -> Result<(), StoreError> {
        let op = "record run outcomes";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        apply_run_updates(&tx, id, updates).map_err(err.clone())?;
        tx.commit().map_err(err)
    }

    // ----- jobs --------------------------------------------------------------------------

    /// Records jobs about to be submitted (state `submitting`) and queues their runs, in
    /// one transaction. This is the "intent" record: it is committed before `submit` is
    /// called, so a crash in between is found by reconciliation.
    pub fn create_jobs(&mut self, id: &str, jobs: &[NewJob]) -> Result<Vec<JobRow>, StoreError> {
        let op = "record jobs before submitting them";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        // New work only for a running experiment: a cancellation that raced with the
        // engine's decision to submit wins, and nothing is recorded.
        let state: Option<String> = tx
            .query_row("SELECT state FROM experiments WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()
            .map_err(err.clone())?;
        if state.as_deref() != Some(ExperimentState::Running.as_str()) {
            return Ok(Vec::new());
        }
        let t = now();
        let mut ids = Vec::with_capacity(jobs.len());
        for j in jobs {
            tx.execute(
                "INSERT INTO jobs (experiment_id, block, name, attempt, run_ids, state, \
                 created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, 'submitting', ?6, ?6)",
                params![
                    id,
                    j.block,
                    j.name,
                    j.attempt,
                    serde_json::to_string(&j.run_ids).expect("strings serialise"),
                    t
                ],
            )
            .map_err(err.clone())?;
            ids.push(tx.last_insert_rowid());
            for r in &j.run_ids {
                tx.execute(
                    "UPDATE runs SET state = 'queued', detail = NULL \
                     WHERE experiment_id = ?1 AND run_id = ?2",
                    params![id, r],
                )
                .map_err(err.clone())?;
            }
        }
        tx.commit().map_err(err)?;
        ids.into_iter()
            .map(|job_id| {
                self.job(job_id)?
                    .ok_or_else(|| self.bad("jobs.id", &job_id.to_string()))
            })
            .collect()
    }

    /// The scheduler accepted job `job_id` as `scheduler_job_id`.
    pub fn job_submitted(&mut self, job_id: i64, scheduler_job_id: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE jobs SET state = 'submitted', scheduler_job_id = ?2, detail = NULL, \
                 updated_at = ?3 WHERE id = ?1",
                params![job_id, scheduler_job_id, now()],
            )
            .map_err(self.err("record a submitted job"))?;
        Ok(())
    }

    /// Notes why a submission has not gone through yet (the job stays `submitting`).
    pub fn job_note(&mut self, job_id: i64, detail: &str) -> Result<(), StoreError> {
        self.conn
            .execute(
                "UPDATE jobs SET detail = ?2, updated_at = ?3 WHERE id = ?1",
                params![job_id, detail, now()],
            )
            .map_err(self.err("note a job's problem"))?;
        Ok(())
    }

    /// A job ended: records its runs' outcomes and the job's end in one transaction.
    /// `final_state` is `finished` or `cancelled`.
    pub fn finish_job(
        &mut self,
        job: &JobRow,
        final_state: JobRecordState,
        detail: Option<&str>,
        updates: &[RunUpdate],
    ) -> Result<(), StoreError> {
        let op = "record a finished job";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        apply_run_updates(&tx, &job.experiment_id, updates).map_err(err.clone())?;
        tx.execute(
            "UPDATE jobs SET state = ?2, detail = ?3, updated_at = ?4 WHERE id = ?1",
            params![job.id, final_state.as_str(), detail, now()],
        )
        .map_err(err.clone())?;
        tx.commit().map_err(err)
    }

    pub fn job(&self, job_id: i64) -> Result<Option<JobRow>, StoreError> {
        let sql = format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1");
        let raw = self
            .conn
            .query_row(&sql, [job_id], raw_job)
            .optional()
            .map_err(self.err("read a job"))?;
        raw.map(|r| self.job_from_raw(r)).transpose()
    }

    /// Every job of an experiment, in the order they were recorded.
    pub fn jobs(&self, id: &str) -> Result<Vec<JobRow>, StoreError> {
        self.query_jobs(&jobs_of_sql(), [id])
    }

    /// Jobs of every experiment that are `submitting` or `submitted`.
    pub fn live_jobs(&self) -> Result<Vec<JobRow>, StoreError> {
        let sql = format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE state IN ('submitting', 'submitted') ORDER BY id"
        );
        self.query_jobs(&sql, [])
    }

    fn query_jobs<P: rusqlite::Params>(&self, sql: &str, p: P) -> Result<Vec<JobRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(sql)
            .map_err(self.err("list jobs"))?;
        let raws = stmt
            .query_map(p, raw_job)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(self.err("list jobs"))?;
        raws.into_iter().map(|r| self.job_from_raw(r)).collect()
    }

    fn job_from_raw(&self, r: RawJob) -> Result<JobRow, StoreError> {
        Ok(JobRow {
            state: JobRecordState::parse(&r.state)
                .ok_or_else(|| self.bad("jobs.state", &r.state))?,
            run_ids: serde_json::from_str(&r.run_ids)
                .map_err(|_| self.bad("jobs.run_ids", &r.run_ids))?,
            id: r.id,
            experiment_id: r.experiment_id,
            block: r.block,
            name: r.name,
            attempt: r.attempt,
            scheduler_job_id: r.scheduler_job_id,
            detail: r.detail,
            created_at: r.created_at,
            updated_at: r.updated_at,
            scheduler_state: r.scheduler_state,
        })
    }

    /// Records what the scheduler last said of submitted jobs (`pending`, `running`, …),
    /// in one transaction; only changed values are written, so an unchanged poll writes
    /// nothing.
    pub fn set_scheduler_states(&mut self, states: &[(i64, String)]) -> Result<(), StoreError> {
        if states.is_empty() {
            return Ok(());
        }
        let op = "record the scheduler's job states";
        let tx = self
            .conn
            .transaction()
            .map_err(|e| StoreError::from_sqlite(op, self.path.clone(), e))?;
        for (id, state) in states {
            tx.execute(
                "UPDATE jobs SET scheduler_state = ?2 WHERE id = ?1 \
                 AND (scheduler_state IS NULL OR scheduler_state != ?2)",
                rusqlite::params![id, state],
            )
            .map_err(|e| StoreError::from_sqlite(op, self.path.clone(), e))?;
        }
        tx.commit()
            .map_err(|e| StoreError::from_sqlite(op, self.path.clone(), e))
    }

    // ----- looks -------------------------------------------------------------------------

    /// Records a look and what follows it (more blocks, or the end) in one transaction,
    /// so a look is never recorded without its consequence, nor the reverse.
    pub fn record_look(
        &mut self,
        id: &str,
        look: &LookRow,
        report_json: &str,
        after: &AfterLook,
    ) -> Result<(), StoreError> {
        let op = "record a look";
        let path = self.path.clone();
        let err = move |e| StoreError::from_sqlite(op, path.clone(), e);
        let tx = self.conn.transaction().map_err(err.clone())?;
        let t = now();
        tx.execute(
            "INSERT INTO looks (experiment_id, look, blocks, nominal_alpha, decisions, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                look.look,
                look.blocks,
                look.nominal_alpha,
                look.decisions,
                t
            ],
        )
        .map_err(err.clone())?;
        tx.execute(
            "UPDATE experiments SET report_json = ?2 WHERE id = ?1",
            params![id, report_json],
        )
        .map_err(err.clone())?;
        // A look may only be taken while analysing: a cancellation that raced with it wins.
        let state_now: String = tx
            .query_row("SELECT state FROM experiments WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .map_err(err.clone())?;
        if state_now != ExperimentState::Analysing.as_str() {
            return Ok(());
        }
        let (state, reason) = match after {
            AfterLook::Extend { blocks, runs } => {
                insert_blocks(&tx, id, blocks, runs).map_err(err.clone())?;
                (ExperimentState::Running, None)
            }
            AfterLook::Finish { state, reason } => (*state, reason.as_deref()),
        };
        tx.execute(
            "UPDATE experiments SET state = ?2, state_reason = ?3, updated_at = ?4 WHERE id = ?1",
            params![id, state.as_str(), reason, t],
        )
        .map_err(err.clone())?;
        tx.commit().map_err(err)
    }

    pub fn looks(&self, id: &str) -> Result<Vec<LookRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT look, blocks, nominal_alpha, decisions, created_at FROM looks \
                 WHERE experiment_id = ?1 ORDER BY look",
            )
            .map_err(self.err("list looks"))?;
        stmt.query_map([id], |r| {
            Ok(LookRow {
                look: r.get(0)?,
                blocks: r.get(1)?,
                nominal_alpha: r.get(2)?,
                decisions: r.get(3)?,
                created_at: r.get(4)?,
            })
        })
        .and_then(|rows| rows.collect())
        .map_err(self.err("list looks"))
    }

    /// The latest look of one experiment, if it has one: one step down the looks' key.
    pub fn latest_look_of(&self, id: &str) -> Result<Option<LookRow>, StoreError> {
        self.conn
            .prepare_cached(LATEST_LOOK_OF)
            .and_then(|mut stmt| {
                stmt.query_row([id], |r| {
                    Ok(LookRow {
                        look: r.get(0)?,
                        blocks: r.get(1)?,
                        nominal_alpha: r.get(2)?,
                        decisions: r.get(3)?,
                        created_at: r.get(4)?,
                    })
                })
                .optional()
            })
            .map_err(self.err("read the latest look"))
    }
}

/// The stored names of every scheduler kind, as an SQL list (`'local', 'slurm', 'flux'`);
/// our own constants, never input.
fn known_kinds_sql() -> String {
    SchedulerKind::ALL
        .iter()
        .map(|k| format!("'{}'", k.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The rows of a new experiment (state `planned`), its blocks and its runs, inside the
/// caller's transaction.
pub(crate) fn insert_experiment_rows(
    tx: &rusqlite::Transaction<'_>,
    e: &NewExperiment,
    blocks: &[BlockRow],
    runs: &[NewRun],
) -> rusqlite::Result<()> {
    let t = now();
    tx.execute(
        "INSERT INTO experiments (id, name, source_path, source_text, source_sha256, root, \
             scheduler, state, replicates, max_replicates, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
        params![
            e.id,
            e.name,
            e.source_path,
            e.source_text,
            e.source_sha256,
            e.root,
            e.scheduler.as_str(),
            ExperimentState::Planned.as_str(),
            e.replicates,
            e.max_replicates,
            t
        ],
    )?;
    insert_blocks(tx, &e.id, blocks, runs)
}

fn insert_blocks(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    blocks: &[BlockRow],
    runs: &[NewRun],
) -> rusqlite::Result<()> {
    let mut b = tx
        .prepare_cached("INSERT INTO blocks (experiment_id, idx, arm_order) VALUES (?1, ?2, ?3)")?;
    for block in blocks {
        b.execute(params![
            id,
            block.index,
            serde_json::to_string(&block.order).expect("strings serialise")
        ])?;
    }
    let mut r = tx.prepare_cached(
        "INSERT INTO runs (experiment_id, run_id, block, arm, position, state) \
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending')",
    )?;
    for run in runs {
        r.execute(params![id, run.run_id, run.block, run.arm, run.position])?;
    }
    Ok(())
}

fn apply_run_updates(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    updates: &[RunUpdate],
) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "UPDATE runs SET state = ?3, detail = ?4 WHERE experiment_id = ?1 AND run_id = ?2",
    )?;
    for u in updates {
        stmt.execute(params![id, u.run_id, u.state.as_str(), u.detail])?;
    }
    Ok(())
}

struct RawExperiment {
    id: String,
    name: String,
    source_path: String,
    source_sha256: String,
    root: String,
    scheduler: String,
    state: String,
    state_reason: Option<String>,
    replicates: u32,
    max_replicates: u32,
    created_at: String,
    updated_at: String,
}

fn raw_experiment(r: &Row<'_>) -> rusqlite::Result<RawExperiment> {
    Ok(RawExperiment {
        id: r.get(0)?,
        name: r.get(1)?,
        source_path: r.get(2)?,
        source_sha256: r.get(3)?,
        root: r.get(4)?,
        scheduler: r.get(5)?,
        state: r.get(6)?,
        state_reason: r.get(7)?,
        replicates: r.get(8)?,
        max_replicates: r.get(9)?,
        created_at: r.get(10)?,
        updated_at: r.get(11)?,
    })
}

struct RawJob {
    id: i64,
    experiment_id: String,
    block: u32,
    name: String,
    attempt: u32,
    run_ids: String,
    scheduler_job_id: Option<String>,
    state: String,
    detail: Option<String>,
    created_at: String,
    updated_at: String,
    scheduler_state: Option<String>,
}

fn raw_job(r: &Row<'_>) -> rusqlite::Result<RawJob> {
    Ok(RawJob {
        id: r.get(0)?,
        experiment_id: r.get(1)?,
        block: r.get(2)?,
        name: r.get(3)?,
        attempt: r.get(4)?,
        run_ids: r.get(5)?,
        scheduler_job_id: r.get(6)?,
        state: r.get(7)?,
        detail: r.get(8)?,
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
        scheduler_state: r.get(11)?,
    })
}

#[cfg(test)]
mod plans;

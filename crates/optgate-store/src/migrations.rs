//! The schema, as an append-only list of migrations. The database's `PRAGMA user_version`
//! is the number of migrations applied; opening applies the missing ones, all in one
//! transaction together with the version bump, so a crash — or a migration that fails on
//! a damaged file — leaves the file as it was, never between two versions. Once open, the
//! file's tables and columns are checked against the ones the migrations make
//! ([`schema_problems`]), so a file that claims the version without the tables is refused
//! before any pass uses it.
//!
//! Never edit a migration that has shipped: add a new one. A checked-in database at
//! version 1 (`tests/fixtures/v1.db`) must keep opening.

use rusqlite::Connection;

/// Migration `i` (0-based) takes the schema from version `i` to `i + 1`.
pub const MIGRATIONS: &[&str] = &[
    // 1: experiments, their blocks and runs, scheduler jobs, and the looks taken.
    r#"
    CREATE TABLE experiments (
        id              TEXT PRIMARY KEY,
        name            TEXT NOT NULL,
        source_path     TEXT NOT NULL,
        source_text     TEXT NOT NULL,
        source_sha256   TEXT NOT NULL,
        root            TEXT NOT NULL,
        scheduler       TEXT NOT NULL,
        state           TEXT NOT NULL,
        state_reason    TEXT,
        replicates      INTEGER NOT NULL,
        max_replicates  INTEGER NOT NULL,
        created_at      TEXT NOT NULL,
        updated_at      TEXT NOT NULL
    );
    CREATE TABLE blocks (
        experiment_id   TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
        idx             INTEGER NOT NULL,
        arm_order       TEXT NOT NULL,
        PRIMARY KEY (experiment_id, idx)
    );
    CREATE TABLE runs (
        experiment_id   TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
        run_id          TEXT NOT NULL,
        block           INTEGER NOT NULL,
        arm             TEXT NOT NULL,
        position        INTEGER NOT NULL,
        state           TEXT NOT NULL,
        detail          TEXT,
        PRIMARY KEY (experiment_id, run_id)
    );
    CREATE TABLE jobs (
        id               INTEGER PRIMARY KEY AUTOINCREMENT,
        experiment_id    TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
        block            INTEGER NOT NULL,
        name             TEXT NOT NULL UNIQUE,
        attempt          INTEGER NOT NULL,
        run_ids          TEXT NOT NULL,
        scheduler_job_id TEXT,
        state            TEXT NOT NULL,
        detail           TEXT,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL
    );
    CREATE TABLE looks (
        experiment_id   TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
        look            INTEGER NOT NULL,
        blocks          INTEGER NOT NULL,
        nominal_alpha   REAL NOT NULL,
        decisions       TEXT NOT NULL,
        created_at      TEXT NOT NULL,
        PRIMARY KEY (experiment_id, look)
    );
    "#,
    // 2: the latest report of each experiment is kept in the database (so `optgate report`
    // works when the run directories are on a file system that is down), the arms found
    // not applicable on the node (JSON `{arm: reason}`), and indexes for `optgate status`
    // over many runs and the engine's scan of live jobs.
    r#"
    ALTER TABLE experiments ADD COLUMN report_json TEXT;
    ALTER TABLE experiments ADD COLUMN not_applicable TEXT;
    CREATE INDEX runs_by_experiment_state ON runs (experiment_id, state);
    CREATE INDEX jobs_by_state ON jobs (state);
    "#,
    // 3: what the scheduler last said of each submitted job (pending, running, …), so
    // `optgate status` shows a queued job as queued and a running one as running, not only
    // `submitted` until it ends.
    r#"
    ALTER TABLE jobs ADD COLUMN scheduler_state TEXT;
    "#,
    // 4: an experiment's scheduler kind is one optgate knows (CHECK), so no write can
    // store a kind that a reader would have to guess at. SQLite adds a CHECK only by
    // rebuilding the table (the children's foreign keys name the table, not its rowids:
    // `migrate_to` turns foreign keys off around it, so the drop cascades nothing). Rows
    // from before are copied as they were — a damaged kind among them is kept, named by
    // the reader (`StoreError::UnknownSchedulerKind`) and closed by the engine, rather
    // than failing the migration. A new kind needs a new migration with a wider list.
    r#"
    CREATE TABLE experiments_v4 (
        id              TEXT PRIMARY KEY,
        name            TEXT NOT NULL,
        source_path     TEXT NOT NULL,
        source_text     TEXT NOT NULL,
        source_sha256   TEXT NOT NULL,
        root            TEXT NOT NULL,
        scheduler       TEXT NOT NULL CHECK (scheduler IN ('local', 'slurm', 'flux')),
        state           TEXT NOT NULL,
        state_reason    TEXT,
        replicates      INTEGER NOT NULL,
        max_replicates  INTEGER NOT NULL,
        created_at      TEXT NOT NULL,
        updated_at      TEXT NOT NULL,
        report_json     TEXT,
        not_applicable  TEXT
    );
    PRAGMA ignore_check_constraints = ON;
    INSERT INTO experiments_v4 (id, name, source_path, source_text, source_sha256, root,
        scheduler, state, state_reason, replicates, max_replicates, created_at, updated_at,
        report_json, not_applicable)
    SELECT id, name, source_path, source_text, source_sha256, root,
        scheduler, state, state_reason, replicates, max_replicates, created_at, updated_at,
        report_json, not_applicable FROM experiments;
    PRAGMA ignore_check_constraints = OFF;
    DROP TABLE experiments;
    ALTER TABLE experiments_v4 RENAME TO experiments;
    "#,
    // 5: one history: every execution — `optgate run`'s (kind `run`, written by that process)
    // and the daemon's (kind `daemon`) — one row when it ends, found by experiment name
    // (`executions_by_name`) and, for `optgate status`, by kind. The build's identity is
    // recorded on the experiment when it starts (`git_commit`, `git_dirty`). An experiment
    // entering a final state is queued in `executions_due` by a trigger, in the same
    // transaction as that state, whichever write ended it; the engine turns each queued id
    // into its execution row (and unqueues it) in one transaction. Experiments that had
    // already ended are queued too, so their history is written at the next daemon start.
    // A later rebuild of `experiments` (as migration 4) drops this trigger: recreate it.
    r#"
    ALTER TABLE experiments ADD COLUMN git_commit TEXT;
    ALTER TABLE experiments ADD COLUMN git_dirty INTEGER;
    CREATE TABLE executions (
        id                TEXT PRIMARY KEY,
        name              TEXT NOT NULL,
        kind              TEXT NOT NULL CHECK (kind IN ('run', 'daemon')),
        scheduler         TEXT NOT NULL,
        state             TEXT NOT NULL,
        state_reason      TEXT,
        source_path       TEXT NOT NULL,
        source_sha256     TEXT NOT NULL,
        root              TEXT NOT NULL,
        git_commit        TEXT,
        git_dirty         INTEGER,
        nodes             TEXT NOT NULL,
        started_at        TEXT NOT NULL,
        ended_at          TEXT NOT NULL,
        runs_completed    INTEGER NOT NULL,
        runs_total        INTEGER NOT NULL,
        looks             INTEGER NOT NULL,
        baseline          TEXT,
        baseline_median_s REAL,
        variants          TEXT NOT NULL
    );
    CREATE INDEX executions_by_name ON executions (name, started_at, id);
    CREATE INDEX executions_by_kind ON executions (kind, started_at, id);
    CREATE TABLE executions_due (experiment_id TEXT PRIMARY KEY);
    CREATE TRIGGER experiments_ended_are_due AFTER UPDATE OF state ON experiments
    WHEN NEW.state IN ('decided', 'budget_exhausted', 'failed', 'cancelled')
        AND OLD.state NOT IN ('decided', 'budget_exhausted', 'failed', 'cancelled')
    BEGIN
        INSERT OR IGNORE INTO executions_due (experiment_id) VALUES (NEW.id);
    END;
    INSERT INTO executions_due (experiment_id) SELECT id FROM experiments
        WHERE state IN ('decided', 'budget_exhausted', 'failed', 'cancelled');
    "#,
    // 6: recurring re-checks (`optgate submit --every`, `recheck:`). A recurrence keeps the
    // file's text, its interval, the anchor its due times are multiples of (anchor + k ×
    // interval, seconds since 1970), the next due time, the notify argv (JSON), its state
    // and the latest execution; each execution is a row of `recurrence_executions` (in
    // order), with whether its end was judged for a notify and the notify's outcome (JSON).
    // A re-submission, its execution row and the new due time are one transaction.
    r#"
    CREATE TABLE recurrences (
        id                 INTEGER PRIMARY KEY AUTOINCREMENT,
        name               TEXT NOT NULL,
        source_path        TEXT NOT NULL,
        source_text        TEXT NOT NULL,
        interval_secs      INTEGER NOT NULL CHECK (interval_secs > 0),
        anchor_at          INTEGER NOT NULL,
        next_due_at        INTEGER NOT NULL,
        notify             TEXT NOT NULL,
        state              TEXT NOT NULL CHECK (state IN ('active', 'cancelled')),
        detail             TEXT,
        last_experiment_id TEXT,
        created_at         TEXT NOT NULL,
        updated_at         TEXT NOT NULL
    );
    CREATE INDEX recurrences_by_state ON recurrences (state);
    CREATE TABLE recurrence_executions (
        recurrence_id   INTEGER NOT NULL REFERENCES recurrences(id) ON DELETE CASCADE,
        seq             INTEGER NOT NULL,
        experiment_id   TEXT NOT NULL UNIQUE REFERENCES experiments(id) ON DELETE CASCADE,
        judged          INTEGER NOT NULL DEFAULT 0,
        notify_outcome  TEXT,
        PRIMARY KEY (recurrence_id, seq)
    );
    CREATE INDEX recurrence_executions_unjudged ON recurrence_executions (judged);
    "#,
    // 7: `optgate status` costs what it shows, not what the database holds. Run counts per
    // experiment and state, block counts per experiment and the number of experiments are
    // stored and kept by triggers — in the same transaction as every write to `runs` and `blocks`, whichever
    // statement makes it (so no writer can forget them, and a crash leaves counts and rows
    // together; a later migration that rebuilds one of these tables must recreate its
    // triggers). Filled from the rows already there. Indexes: jobs by experiment (`status
    // ID`), experiments newest first (the paged list) and the active ones (the engine's
    // scan; a partial index, used by a query whose WHERE is the index's, word for word).
    r#"
    CREATE TABLE run_state_counts (
        experiment_id   TEXT NOT NULL,
        state           TEXT NOT NULL,
        n               INTEGER NOT NULL,
        PRIMARY KEY (experiment_id, state)
    ) WITHOUT ROWID;
    INSERT INTO run_state_counts (experiment_id, state, n)
        SELECT experiment_id, state, COUNT(*) FROM runs GROUP BY experiment_id, state;
    CREATE TABLE block_counts (
        experiment_id   TEXT PRIMARY KEY,
        n               INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO block_counts (experiment_id, n)
        SELECT experiment_id, COUNT(*) FROM blocks GROUP BY experiment_id;
    CREATE TRIGGER run_counted AFTER INSERT ON runs BEGIN
        INSERT INTO run_state_counts (experiment_id, state, n)
            SELECT new.experiment_id, new.state, 0 WHERE NOT EXISTS (SELECT 1 FROM
            run_state_counts WHERE experiment_id = new.experiment_id AND state = new.state);
        UPDATE run_state_counts SET n = n + 1
            WHERE experiment_id = new.experiment_id AND state = new.state;
    END;
    CREATE TRIGGER run_uncounted AFTER DELETE ON runs BEGIN
        UPDATE run_state_counts SET n = n - 1
            WHERE experiment_id = old.experiment_id AND state = old.state;
        DELETE FROM run_state_counts
            WHERE experiment_id = old.experiment_id AND state = old.state AND n <= 0;
    END;
    CREATE TRIGGER run_recounted AFTER UPDATE OF experiment_id, state ON runs
        WHEN old.experiment_id IS NOT new.experiment_id OR old.state IS NOT new.state BEGIN
        UPDATE run_state_counts SET n = n - 1
            WHERE experiment_id = old.experiment_id AND state = old.state;
        DELETE FROM run_state_counts
            WHERE experiment_id = old.experiment_id AND state = old.state AND n <= 0;
        INSERT INTO run_state_counts (experiment_id, state, n)
            SELECT new.experiment_id, new.state, 0 WHERE NOT EXISTS (SELECT 1 FROM
            run_state_counts WHERE experiment_id = new.experiment_id AND state = new.state);
        UPDATE run_state_counts SET n = n + 1
            WHERE experiment_id = new.experiment_id AND state = new.state;
    END;
    CREATE TRIGGER block_counted AFTER INSERT ON blocks BEGIN
        INSERT INTO block_counts (experiment_id, n)
            SELECT new.experiment_id, 0 WHERE NOT EXISTS (SELECT 1 FROM block_counts
            WHERE experiment_id = new.experiment_id);
        UPDATE block_counts SET n = n + 1 WHERE experiment_id = new.experiment_id;
    END;
    CREATE TRIGGER block_uncounted AFTER DELETE ON blocks BEGIN
        UPDATE block_counts SET n = n - 1 WHERE experiment_id = old.experiment_id;
        DELETE FROM block_counts WHERE experiment_id = old.experiment_id AND n <= 0;
    END;
    CREATE TRIGGER block_recounted AFTER UPDATE OF experiment_id ON blocks
        WHEN old.experiment_id IS NOT new.experiment_id BEGIN
        UPDATE block_counts SET n = n - 1 WHERE experiment_id = old.experiment_id;
        DELETE FROM block_counts WHERE experiment_id = old.experiment_id AND n <= 0;
        INSERT INTO block_counts (experiment_id, n)
            SELECT new.experiment_id, 0 WHERE NOT EXISTS (SELECT 1 FROM block_counts
            WHERE experiment_id = new.experiment_id);
        UPDATE block_counts SET n = n + 1 WHERE experiment_id = new.experiment_id;
    END;
    CREATE TABLE experiment_count (
        one             INTEGER PRIMARY KEY CHECK (one = 1),
        n               INTEGER NOT NULL
    );
    INSERT INTO experiment_count (one, n) SELECT 1, COUNT(*) FROM experiments;
    CREATE TRIGGER experiment_counted AFTER INSERT ON experiments BEGIN
        UPDATE experiment_count SET n = n + 1;
    END;
    CREATE TRIGGER experiment_uncounted AFTER DELETE ON experiments BEGIN
        UPDATE experiment_count SET n = n - 1;
    END;
    CREATE INDEX jobs_by_experiment ON jobs (experiment_id, id);
    CREATE INDEX experiments_by_created ON experiments (created_at, id);
    CREATE INDEX experiments_active ON experiments (created_at, id)
        WHERE state NOT IN ('decided', 'budget_exhausted', 'failed', 'cancelled');
    "#,
    // 8: campaigns: a campaign's file and state, and its steps — stage
    // experiments in run order, then the confirmation — each recorded in the same
    // transaction as the experiment it is, so a step is never created twice.
    r#"
    CREATE TABLE campaigns (
        id           TEXT PRIMARY KEY,
        name         TEXT NOT NULL,
        source_path  TEXT NOT NULL,
        source_text  TEXT NOT NULL,
        root         TEXT NOT NULL,
        state        TEXT NOT NULL CHECK (state IN ('running', 'finished', 'cancelled', 'failed')),
        state_reason TEXT,
        created_at   TEXT NOT NULL,
        updated_at   TEXT NOT NULL
    );
    CREATE TABLE campaign_steps (
        campaign_id   TEXT NOT NULL REFERENCES campaigns(id),
        step          INTEGER NOT NULL,
        experiment_id TEXT NOT NULL UNIQUE REFERENCES experiments(id),
        PRIMARY KEY (campaign_id, step)
    );
    "#,
];

/// The schema version this build writes and understands.
pub const LATEST: u32 = MIGRATIONS.len() as u32;

pub fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map(|v| v.max(0) as u32)
}

/// Applies the migrations after the database's version up to `target`, one transaction
/// each. Returns the version reached. Foreign keys are off while they run (a table rebuild
/// drops the parent table; `PRAGMA foreign_keys` only changes outside a transaction) and
/// restored as they were after, whatever the outcome.
pub fn migrate_to(conn: &mut Connection, target: u32) -> rusqlite::Result<u32> {
    let enforced: bool = conn.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?;
    conn.execute_batch("PRAGMA foreign_keys = OFF")?;
    let reached = apply_migrations(conn, target);
    if enforced {
        conn.execute_batch("PRAGMA foreign_keys = ON")?;
    }
    reached
}

/// One transaction takes the write lock first and reads the version under it: another
/// process (`optgate run` recording its execution while the daemon starts) migrating the
/// same file at the same moment is waited for, and its migrations are not applied twice.
/// Every missing migration runs in that transaction: one that fails (a file whose tables do
/// not match its version) rolls back those before it too.
fn apply_migrations(conn: &mut Connection, target: u32) -> rusqlite::Result<u32> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found = user_version(&tx)?;
    let reached = found.max(target.min(LATEST));
    for migration in &MIGRATIONS[found.min(LATEST) as usize..reached as usize] {
        tx.execute_batch(migration)?;
    }
    if reached != found {
        // PRAGMA takes no bound parameters; the value is our own integer.
        tx.execute_batch(&format!("PRAGMA user_version = {reached}"))?;
    }
    tx.commit()?;
    Ok(reached)
}

/// The tables (and views) the migrations make, each with its columns in order: built once
/// from an in-memory database, so it can never disagree with [`MIGRATIONS`].
fn expected_schema() -> &'static [(String, Vec<String>)] {
    static SCHEMA: std::sync::OnceLock<Vec<(String, Vec<String>)>> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut conn = Connection::open_in_memory().expect("an in-memory database opens");
        migrate_to(&mut conn, LATEST).expect("the migrations apply to an empty database");
        tables_of(&conn).expect("an in-memory database lists its tables")
    })
}

fn tables_of(conn: &Connection) -> rusqlite::Result<Vec<(String, Vec<String>)>> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_schema WHERE type IN ('table', 'view') \
         AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let names = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    names
        .into_iter()
        .map(|name| {
            let mut cols = conn.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")?;
            let columns = cols
                .query_map([&name], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok((name, columns))
        })
        .collect()
}

/// What the file at the latest version lacks of the schema: each missing table or view and
/// each missing column, in words. Empty when everything the code reads is there (more is
/// allowed: a table a user added for their own notes harms nothing).
pub fn schema_problems(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let found = tables_of(conn)?;
    let mut problems = Vec::new();
    for (table, columns) in expected_schema() {
        match found.iter().find(|(name, _)| name == table) {
            None => problems.push(format!("table `{table}` is missing")),
            Some((_, have)) => problems.extend(
                columns
                    .iter()
                    .filter(|c| !have.contains(c))
                    .map(|c| format!("column `{table}.{c}` is missing")),
            ),
        }
    }
    Ok(problems)
}

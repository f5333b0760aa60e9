//! The schema, as an append-only list of migrations. The database's `PRAGMA user_version`
//! is the number of migrations applied; opening applies the missing ones, each in its own
//! transaction together with the version bump, so a crash leaves the file at one version
//! or the next, never between.
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
    // Campaigns (issue 24): a campaign's file and state, and its steps — stage
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

fn apply_migrations(conn: &mut Connection, target: u32) -> rusqlite::Result<u32> {
    let mut version = user_version(conn)?;
    while version < target.min(LATEST) {
        let tx = conn.transaction()?;
        tx.execute_batch(MIGRATIONS[version as usize])?;
        // PRAGMA takes no bound parameters; the value is our own integer.
        tx.execute_batch(&format!("PRAGMA user_version = {}", version + 1))?;
        tx.commit()?;
        version += 1;
    }
    Ok(version)
}

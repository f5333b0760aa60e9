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
];

/// The schema version this build writes and understands.
pub const LATEST: u32 = MIGRATIONS.len() as u32;

pub fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0))
        .map(|v| v.max(0) as u32)
}

/// Applies the migrations after the database's version up to `target`, one transaction
/// each. Returns the version reached.
pub fn migrate_to(conn: &mut Connection, target: u32) -> rusqlite::Result<u32> {
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

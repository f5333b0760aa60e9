//! The store at its boundaries: a round trip of an experiment's life, the checked-in
//! version-1 database that must keep opening, a newer database refused untouched, a
//! corrupt file, and a full disk in the middle of a write.

use std::path::{Path, PathBuf};

use optgate_store::*;

fn new_experiment(id: &str) -> NewExperiment {
    NewExperiment {
        id: id.to_string(),
        name: "demo".into(),
        source_path: "/home/me/exp.yaml".into(),
        source_text: "name: demo\n".into(),
        source_sha256: "ab".repeat(32),
        root: format!("/scratch/optgate-runs/demo/{id}"),
        scheduler: SchedulerKind::Local,
        replicates: 2,
        max_replicates: 3,
    }
}

fn plan(blocks: std::ops::RangeInclusive<u32>) -> (Vec<BlockRow>, Vec<NewRun>) {
    let mut b = Vec::new();
    let mut r = Vec::new();
    for i in blocks {
        let order = vec!["v1".to_string(), "baseline".to_string()];
        for (pos, arm) in order.iter().enumerate() {
            r.push(NewRun {
                run_id: format!("b{i:03}-{arm}"),
                block: i,
                arm: arm.clone(),
                position: pos as u32,
            });
        }
        b.push(BlockRow { index: i, order });
    }
    (b, r)
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1.db")
}

#[test]
fn an_experiment_life_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("state/optgate.db")).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let (blocks, runs) = plan(1..=2);
    planned_with_its_plan(&mut s, &blocks, &runs);
    building_with_arms_not_applicable(&mut s, &blocks, &runs);
    one_job_runs_its_block(&mut s);
    a_look_extends_the_plan(&mut s);
    cancelled_with_its_pending_runs(&mut s);
}

/// `e1` is stored `Planned` with its blocks and source text; an unknown id is `None`.
fn planned_with_its_plan(s: &mut Store, blocks: &[BlockRow], runs: &[NewRun]) {
    s.insert_experiment(&new_experiment("e1"), blocks, runs)
        .unwrap();
    let e = s.experiment("e1").unwrap().unwrap();
    assert_eq!(e.state, ExperimentState::Planned);
    assert_eq!(s.blocks("e1").unwrap(), blocks);
    assert_eq!(s.source_text("e1").unwrap().unwrap(), "name: demo\n");
    assert!(s.experiment("nope").unwrap().is_none());
}

/// `e2` begins building with `v1` not applicable: that is kept for `e2` only, and the
/// not-applicable arm's two runs are cancelled.
fn building_with_arms_not_applicable(s: &mut Store, blocks: &[BlockRow], runs: &[NewRun]) {
    let na = std::collections::BTreeMap::from([("v1".to_string(), "no avx512".to_string())]);
    s.insert_experiment(&new_experiment("e2"), blocks, runs)
        .unwrap();
    s.begin_building("e2", &na).unwrap();
    assert_eq!(s.not_applicable("e2").unwrap(), na);
    assert_eq!(s.not_applicable("e1").unwrap(), Default::default());
    assert_eq!(s.run_counts_of("e2").unwrap().cancelled, 2);
    assert_eq!(
        s.experiment("e2").unwrap().unwrap().state,
        ExperimentState::Building
    );
}

/// `e1` runs: one job for block 1 is created, submitted and finished with one run
/// completed and one failed, and is live only in between.
fn one_job_runs_its_block(s: &mut Store) {
    s.set_state("e1", ExperimentState::Running, None).unwrap();
    let jobs = s
        .create_jobs(
            "e1",
            &[NewJob {
                block: 1,
                name: "og-e1-b001".into(),
                attempt: 1,
                run_ids: vec!["b001-v1".into(), "b001-baseline".into()],
            }],
        )
        .unwrap();
    assert_eq!(jobs[0].state, JobRecordState::Submitting);
    assert_eq!(s.live_jobs().unwrap().len(), 1);
    let counts = s.run_counts_of("e1").unwrap();
    assert_eq!((counts.total, counts.queued, counts.pending), (4, 2, 2));

    s.job_submitted(jobs[0].id, "local-1").unwrap();
    let job = s.job(jobs[0].id).unwrap().unwrap();
    assert_eq!(job.scheduler_job_id.as_deref(), Some("local-1"));
    s.finish_job(
        &job,
        JobRecordState::Finished,
        None,
        &[
            RunUpdate {
                run_id: "b001-v1".into(),
                state: RunState::Completed,
                detail: None,
            },
            RunUpdate {
                run_id: "b001-baseline".into(),
                state: RunState::Failed,
                detail: Some("exit 1".into()),
            },
        ],
    )
    .unwrap();
    assert!(s.live_jobs().unwrap().is_empty());
    let counts = s.run_counts_of("e1").unwrap();
    assert_eq!((counts.completed, counts.failed, counts.done()), (1, 1, 2));
}

/// `e1` moves to `Analysing` once only; its first look extends it by block 3, back to
/// `Running`, with the look and its report kept.
fn a_look_extends_the_plan(s: &mut Store) {
    assert!(
        s.transition(
            "e1",
            ExperimentState::Running,
            ExperimentState::Analysing,
            None
        )
        .unwrap()
    );
    assert!(
        !s.transition(
            "e1",
            ExperimentState::Running,
            ExperimentState::Analysing,
            None
        )
        .unwrap()
    );
    let (more, more_runs) = plan(3..=3);
    s.record_look(
        "e1",
        &LookRow {
            look: 1,
            blocks: 2,
            nominal_alpha: 0.01,
            decisions: r#"{"v1":"inconclusive"}"#.into(),
            created_at: String::new(),
        },
        "{}",
        &AfterLook::Extend {
            blocks: more,
            runs: more_runs,
        },
    )
    .unwrap();
    assert_eq!(
        s.experiment("e1").unwrap().unwrap().state,
        ExperimentState::Running
    );
    assert_eq!(s.blocks("e1").unwrap().len(), 3);
    assert_eq!(s.runs("e1").unwrap().len(), 6);
    assert_eq!(s.latest_look_of("e1").unwrap().unwrap().look, 1);
    assert_eq!(s.report("e1").unwrap().as_deref(), Some("{}"));
}

/// Cancelling `e1` cancels its pending runs, keeps finished ones, and leaves `e2` the
/// only active experiment; cancelling an unknown one is `None`.
fn cancelled_with_its_pending_runs(s: &mut Store) {
    assert_eq!(
        s.cancel_experiment("e1", "cancelled by the user").unwrap(),
        Some(ExperimentState::Running)
    );
    let e = s.experiment("e1").unwrap().unwrap();
    assert_eq!(e.state, ExperimentState::Cancelled);
    // Pending runs are cancelled with it; finished ones keep their outcome.
    let counts = s.run_counts_of("e1").unwrap();
    assert_eq!((counts.cancelled, counts.completed), (4, 1));
    assert_eq!(s.active_experiments().unwrap().len(), 1);
    assert_eq!(s.cancel_experiment("missing", "x").unwrap(), None);
}

#[test]
fn the_checked_in_version_1_database_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("optgate.db");
    std::fs::copy(fixture(), &copy).unwrap();
    let s = Store::open(&copy).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let all = s.experiments().unwrap();
    assert_eq!(all.len(), 1);
    let e = &all[0];
    assert_eq!(e.id, "20260101-120000-0001");
    assert_eq!(e.state, ExperimentState::Running);
    assert_eq!(s.blocks(&e.id).unwrap().len(), 5);
    assert_eq!(s.runs(&e.id).unwrap().len(), 10);
    // Migration 5 counted the rows already there.
    assert_eq!(s.run_counts_of(&e.id).unwrap().total, 10);
    assert_eq!(s.block_count_of(&e.id).unwrap(), 5);
    assert_eq!(s.experiments_page(None).unwrap().total, 1);
    assert_eq!(s.jobs(&e.id).unwrap().len(), 1);
    assert_eq!(s.looks(&e.id).unwrap().len(), 0);
    // The column migration 2 added is there and empty.
    assert_eq!(s.report(&e.id).unwrap(), None);
    // Migration 4 rebuilt the table: the kind reads as the enum, nothing else moved.
    assert_eq!(e.scheduler, SchedulerKind::Local);
    assert_eq!(e.replicates, 5);
    assert_eq!(
        s.source_text(&e.id).unwrap().as_deref(),
        Some("name: demo\n")
    );
}

/// Writes `value` as experiment `id`'s scheduler kind behind the store's back, as damage
/// (or another tool) would: the CHECK constraint is switched off for this one write.
fn damage_scheduler_kind(db: &Path, id: &str, value: &str) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.execute_batch("PRAGMA ignore_check_constraints = ON")
        .unwrap();
    let n = c
        .execute(
            "UPDATE experiments SET scheduler = ?2 WHERE id = ?1",
            rusqlite::params![id, value],
        )
        .unwrap();
    assert_eq!(n, 1, "no experiment {id} to damage");
}

#[test]
fn the_scheduler_kind_is_checked_on_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("optgate.db");
    let mut s = Store::open(&db).unwrap();
    let (blocks, runs) = plan(1..=1);
    for kind in SchedulerKind::ALL {
        let id = format!("e-{kind}");
        let e = NewExperiment {
            scheduler: kind,
            ..new_experiment(&id)
        };
        s.insert_experiment(&e, &blocks, &runs).unwrap();
        assert_eq!(s.experiment(&id).unwrap().unwrap().scheduler, kind);
    }
    let c = rusqlite::Connection::open(&db).unwrap();
    let err = c
        .execute(
            "UPDATE experiments SET scheduler = 'lcoal' WHERE id = 'e-local'",
            [],
        )
        .expect_err("the CHECK constraint refuses an unknown kind");
    assert!(err.to_string().contains("CHECK constraint failed"), "{err}");
    assert_eq!(
        s.experiment("e-local").unwrap().unwrap().scheduler,
        SchedulerKind::Local
    );
}

/// A row whose kind is damaged is never read as some kind: every read names the row and
/// the value; the engine's list finds it, and closing it cancels its runs and live jobs
/// without touching any other experiment.
#[test]
fn a_damaged_scheduler_kind_is_named_never_guessed_and_can_be_closed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("optgate.db");
    let mut s = Store::open(&db).unwrap();
    let (blocks, runs) = plan(1..=2);
    for id in ["e1", "e2"] {
        s.insert_experiment(&new_experiment(id), &blocks, &runs)
            .unwrap();
        s.set_state(id, ExperimentState::Running, None).unwrap();
    }
    let job = s
        .create_jobs(
            "e1",
            &[NewJob {
                block: 1,
                name: "og-e1-b001".into(),
                attempt: 1,
                run_ids: vec!["b001-v1".into(), "b001-baseline".into()],
            }],
        )
        .unwrap()
        .remove(0);
    s.job_submitted(job.id, "1234").unwrap();
    assert!(s.unreadable_scheduler_kinds().unwrap().is_empty());
    damage_scheduler_kind(&db, "e1", "lcoal");

    match s.experiment("e1") {
        Err(StoreError::UnknownSchedulerKind {
            experiment, value, ..
        }) => assert_eq!((experiment.as_str(), value.as_str()), ("e1", "lcoal")),
        other => panic!("read as {other:?}"),
    }
    assert!(matches!(
        s.active_experiments(),
        Err(StoreError::UnknownSchedulerKind { .. })
    ));
    // Read row by row, the damaged one is its own error with its id and name, and the
    // healthy one beside it reads.
    match s.experiments_each(None).unwrap().as_slice() {
        [Err(d), Ok(good)] => {
            assert_eq!((d.id.as_str(), d.name.as_str()), ("e1", "demo"));
            assert!(matches!(*d.error, StoreError::UnknownSchedulerKind { .. }));
            assert_eq!(good.id, "e2");
        }
        other => panic!("read as {other:?}"),
    }
    assert_eq!(
        s.unreadable_scheduler_kinds().unwrap(),
        vec![("e1".to_string(), "lcoal".to_string())]
    );

    s.close_unreadable("e1", "unreadable kind").unwrap();
    assert!(s.unreadable_scheduler_kinds().unwrap().is_empty());
    assert!(s.live_jobs().unwrap().is_empty());
    let job = s.job(job.id).unwrap().unwrap();
    assert_eq!(job.state, JobRecordState::Cancelled);
    assert_eq!(job.detail.as_deref(), Some("unreadable kind"));
    let counts = s.run_counts_of("e1").unwrap();
    assert_eq!((counts.cancelled, counts.total), (4, 4));
    let (state, reason): (String, String) = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT state, state_reason FROM experiments WHERE id = 'e1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (state.as_str(), reason.as_str()),
        ("failed", "unreadable kind")
    );
    // The other experiment is as it was, and the active list reads again.
    let active = s.active_experiments().unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].id, "e2");
    assert_eq!(s.run_counts_of("e2").unwrap().pending, 4);
}

/// A kind damaged before the CHECK existed survives the table rebuild of migration 4
/// (the migration does not fail, nor drop the row or its children), and is named.
#[test]
fn migration_4_keeps_a_row_damaged_before_it_and_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("optgate.db");
    std::fs::copy(fixture(), &copy).unwrap();
    let id = "20260101-120000-0001";
    rusqlite::Connection::open(&copy)
        .unwrap()
        .execute("UPDATE experiments SET scheduler = 'pbs'", [])
        .unwrap();
    let s = Store::open(&copy).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert_eq!(
        s.unreadable_scheduler_kinds().unwrap(),
        vec![(id.to_string(), "pbs".to_string())]
    );
    assert_eq!(s.runs(id).unwrap().len(), 10);
    assert_eq!(s.blocks(id).unwrap().len(), 5);
    assert_eq!(s.jobs(id).unwrap().len(), 1);
}

#[test]
fn a_database_from_a_newer_optgate_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("optgate.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).expect_err("refused");
    assert!(matches!(err, StoreError::TooNew { found: 99, .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("newer optgate") && msg.contains("untouched"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
    assert!(!dir.path().join("optgate.db-wal").exists());
}

#[test]
fn a_corrupt_file_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("optgate.db");
    std::fs::write(
        &path,
        b"this is not a database, it is a text file\n".repeat(200),
    )
    .unwrap();
    let err = Store::open(&path).expect_err("refused");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("not an optgate database or is corrupt")
    );
}

#[test]
fn a_full_disk_rolls_the_whole_write_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("optgate.db");
    let mut s = Store::open(&path).unwrap();
    let (blocks, runs) = plan(1..=2);
    s.insert_experiment(&new_experiment("small"), &blocks, &runs)
        .unwrap();
    // Cap the file near its current size, then try a write far bigger than the room left.
    let pages: u64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    s.set_max_page_count(pages + 2).unwrap();
    let mut big = new_experiment("big");
    big.source_text = "x".repeat(1 << 20);
    let (blocks, runs) = plan(1..=2000);
    let err = s.insert_experiment(&big, &blocks, &runs).expect_err("full");
    assert!(matches!(err, StoreError::Full { .. }), "{err:?}");
    assert!(err.to_string().contains("rolled back"), "{err}");
    // Nothing of the failed write is visible, the earlier data is intact, and the file
    // passes SQLite's integrity check after a reopen.
    assert!(s.experiment("big").unwrap().is_none());
    assert_eq!(s.runs("small").unwrap().len(), 4);
    drop(s);
    let s = Store::open(&path).unwrap();
    assert_eq!(s.experiments().unwrap().len(), 1);
    assert!(!crate::stored_counts::run_counts(&s).contains_key("big"));
}

/// Writes a fresh version-1 database (migration 1 only) into a temporary directory and
/// prints where (run by hand with `cargo test -p optgate-store -- --ignored --nocapture
/// write_v1_fixture`). It never touches the committed `tests/fixtures/v1.db`: copy the
/// file over by hand, and only if the fixture's content must change, never to match a
/// new schema.
#[test]
#[ignore]
fn write_v1_fixture() {
    let dir = tempfile::Builder::new()
        .prefix("optgate-v1-fixture-")
        .tempdir()
        .unwrap()
        .keep();
    let path = dir.join("v1.db");
    assert_ne!(path, fixture());
    let mut c = rusqlite::Connection::open(&path).unwrap();
    assert_eq!(migrations::migrate_to(&mut c, 1).unwrap(), 1);
    let id = "20260101-120000-0001";
    let t = "2026-01-01T12:00:00.000Z";
    c.execute(
        "INSERT INTO experiments VALUES (?1, 'demo', '/home/me/exp.yaml', 'name: demo\n', ?2, \
         '/scratch/optgate-runs/demo/20260101-120000-0001', 'local', 'running', NULL, 5, 5, ?3, ?3)",
        rusqlite::params![id, "ab".repeat(32), t],
    )
    .unwrap();
    for b in 1..=5u32 {
        c.execute(
            "INSERT INTO blocks VALUES (?1, ?2, '[\"baseline\",\"v1\"]')",
            rusqlite::params![id, b],
        )
        .unwrap();
        for (pos, arm) in ["baseline", "v1"].iter().enumerate() {
            let state = if b == 1 { "completed" } else { "pending" };
            c.execute(
                "INSERT INTO runs VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL)",
                rusqlite::params![id, format!("b{b:03}-{arm}"), b, arm, pos as u32, state],
            )
            .unwrap();
        }
    }
    c.execute(
        "INSERT INTO jobs (experiment_id, block, name, attempt, run_ids, scheduler_job_id, state, \
         detail, created_at, updated_at) VALUES (?1, 1, 'og-20260101-120000-0001-b001', 1, \
         '[\"b001-baseline\",\"b001-v1\"]', 'og-20260101-120000-0001-b001', 'finished', NULL, ?2, ?2)",
        rusqlite::params![id, t],
    )
    .unwrap();
    // A single file: no WAL beside it.
    c.execute_batch("PRAGMA journal_mode = DELETE; VACUUM;")
        .unwrap();
    println!(
        "wrote {} (the committed fixture is {}; copy by hand if it must change)",
        path.display(),
        fixture().display()
    );
}

/// The schema as SQLite lists it, with the version: what must not change when a file is
/// refused.
fn schema_dump(path: &Path) -> (u32, Vec<String>) {
    let c = rusqlite::Connection::open(path).unwrap();
    let version: u32 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let mut stmt = c
        .prepare("SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY name")
        .unwrap();
    let sql = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<Vec<String>, _>>()
        .unwrap();
    (version, sql)
}

#[test]
fn a_latest_schema_claiming_an_old_version_is_refused_without_a_step_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("optgate.db");
    drop(Store::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 3;")
        .unwrap();
    let before = schema_dump(&path);
    let err = Store::open(&path).expect_err("refused");
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert!(err.to_string().contains("schema version 3"), "{err}");
    assert_eq!(schema_dump(&path), before, "a migration step was kept");
}

#[test]
fn a_database_missing_a_table_or_column_is_refused_naming_each() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("optgate.db");
    drop(Store::open(&path).unwrap());
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "PRAGMA foreign_keys = OFF; DROP TABLE looks; DROP TABLE executions; \
             ALTER TABLE experiments DROP COLUMN state_reason;",
        )
        .unwrap();
    for open in [Store::open, Store::open_read_only] {
        let err = open(&path).expect_err("refused");
        let msg = err.to_string();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{msg}");
        for missing in [
            "table `looks` is missing",
            "table `executions` is missing",
            "column `experiments.state_reason` is missing",
        ] {
            assert!(msg.contains(missing), "{missing} not named: {msg}");
        }
    }
}

#[test]
fn a_fifo_at_the_database_or_its_journal_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["optgate.db", "optgate.db-wal"] {
        let home = dir.path().join(name.replace('.', "_"));
        std::fs::create_dir(&home).unwrap();
        let db = home.join("optgate.db");
        if name == "optgate.db-wal" {
            drop(Store::open(&db).unwrap());
            let _ = std::fs::remove_file(home.join(name));
        }
        let made = std::process::Command::new("mkfifo")
            .arg(home.join(name))
            .status()
            .unwrap();
        assert!(made.success());
        // Opened on another thread: a blocking open would hang the test, not fail it.
        let (tx, rx) = std::sync::mpsc::channel();
        let (a, b) = (db.clone(), db.clone());
        std::thread::spawn(move || {
            let said = |r: Result<Store, StoreError>| r.err().map(|e| e.to_string());
            tx.send((said(Store::open(&a)), said(Store::open_read_only(&b))))
        });
        let (rw, ro) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("opening a FIFO blocked");
        for err in [rw, ro] {
            let msg = err.expect("refused");
            assert!(msg.contains("a pipe, not a regular file"), "{msg}");
        }
    }
}

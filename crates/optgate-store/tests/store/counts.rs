//! The stored counts (runs per experiment and state, blocks per experiment) against the
//! rows themselves: after every kind of write the store makes — and a write the disk
//! refused half-way, and rows deleted behind its back — they equal `COUNT(*)`. And the
//! paged experiment list: newest first, at most the page, the total counted.

use std::collections::BTreeMap;
use std::path::Path;

use optgate_store::*;

use crate::stored_counts;

fn new_experiment(id: &str) -> NewExperiment {
    NewExperiment {
        id: id.to_string(),
        name: format!("demo-{id}"),
        source_path: "/home/me/exp.yaml".into(),
        source_text: "name: demo\n".into(),
        source_sha256: "ab".repeat(32),
        root: format!("/scratch/optgate-runs/demo/{id}"),
        scheduler: SchedulerKind::Local,
        replicates: 2,
        max_replicates: 4,
    }
}

fn plan(blocks: std::ops::RangeInclusive<u32>) -> (Vec<BlockRow>, Vec<NewRun>) {
    let (mut b, mut r) = (Vec::new(), Vec::new());
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

fn job(id: &str, block: u32, attempt: u32) -> NewJob {
    NewJob {
        block,
        name: format!("og-{id}-b{block:03}-a{attempt}"),
        attempt,
        run_ids: vec![format!("b{block:03}-v1"), format!("b{block:03}-baseline")],
    }
}

fn done(block: u32, state: RunState) -> Vec<RunUpdate> {
    ["v1", "baseline"]
        .iter()
        .map(|arm| RunUpdate {
            run_id: format!("b{block:03}-{arm}"),
            state,
            detail: None,
        })
        .collect()
}

/// The counts from the rows, by a connection of its own: `COUNT(*)` per experiment and state.
fn counted(db: &Path) -> (BTreeMap<String, RunCounts>, BTreeMap<String, u32>) {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut runs: BTreeMap<String, RunCounts> = BTreeMap::new();
    let mut stmt = c
        .prepare("SELECT experiment_id, state, COUNT(*) FROM runs GROUP BY experiment_id, state")
        .unwrap();
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, u32>(2)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (id, state, n) = row.unwrap();
        stored_counts::add(
            runs.entry(id).or_default(),
            RunState::parse(&state).unwrap(),
            n,
        );
    }
    let mut stmt = c
        .prepare("SELECT experiment_id, COUNT(*) FROM blocks GROUP BY experiment_id")
        .unwrap();
    let blocks = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    (runs, blocks)
}

#[track_caller]
fn agree(s: &Store, db: &Path, after: &str) {
    let (runs, blocks) = counted(db);
    assert_eq!(
        stored_counts::run_counts(s),
        runs,
        "run counts after {after}"
    );
    assert_eq!(
        stored_counts::block_counts(s),
        blocks,
        "block counts after {after}"
    );
    for (id, c) in &runs {
        assert_eq!(
            s.run_counts_of(id).unwrap(),
            *c,
            "{id}'s runs after {after}"
        );
        assert_eq!(
            s.block_count_of(id).unwrap(),
            blocks[id],
            "{id} after {after}"
        );
    }
}

/// Every write the store makes to runs and blocks, in an experiment's life and its
/// repairs (the ones reconciliation and the engine's crash paths call), one by one.
#[test]
fn the_stored_counts_equal_the_rows_after_every_kind_of_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("optgate.db");
    let mut s = Store::open(&db).unwrap();
    for id in ["e1", "e2", "e3"] {
        let (b, r) = plan(1..=2);
        s.insert_experiment(&new_experiment(id), &b, &r).unwrap();
    }
    agree(&s, &db, "insert_experiment");
    let na = BTreeMap::from([("v1".to_string(), "needs a GPU".to_string())]);
    s.begin_building("e2", &na).unwrap();
    agree(&s, &db, "begin_building with an arm not applicable");
    s.set_state("e1", ExperimentState::Running, None).unwrap();
    let jobs = s
        .create_jobs("e1", &[job("e1", 1, 1), job("e1", 2, 1)])
        .unwrap();
    agree(&s, &db, "create_jobs");
    s.job_submitted(jobs[0].id, "101").unwrap();
    s.update_runs("e1", &done(1, RunState::Queued)).unwrap();
    agree(&s, &db, "update_runs");
    s.finish_job(
        &jobs[0],
        JobRecordState::Finished,
        None,
        &done(1, RunState::Completed),
    )
    .unwrap();
    // The repair of a job lost in a crash: its runs failed, then retried.
    s.finish_job(
        &jobs[1],
        JobRecordState::Cancelled,
        Some("lost"),
        &done(2, RunState::Failed),
    )
    .unwrap();
    agree(&s, &db, "finish_job");
    s.update_runs("e1", &done(2, RunState::Pending)).unwrap();
    s.create_jobs("e1", &[job("e1", 2, 2)]).unwrap();
    agree(&s, &db, "a retry");
    s.set_state("e1", ExperimentState::Analysing, None).unwrap();
    let (b, r) = plan(3..=4);
    let look = LookRow {
        look: 1,
        blocks: 2,
        nominal_alpha: 0.05,
        decisions: "[]".into(),
        created_at: String::new(),
    };
    let extend = AfterLook::Extend { blocks: b, runs: r };
    s.record_look("e1", &look, "{}", &extend).unwrap();
    agree(&s, &db, "record_look that adds blocks");
    s.cancel_experiment("e1", "by the user").unwrap();
    agree(&s, &db, "cancel_experiment");
    assert!(s.reopen_cancelled("e1", "by the user").unwrap());
    agree(&s, &db, "reopen_cancelled");
    s.close_unreadable("e3", "unknown scheduler kind").unwrap();
    agree(&s, &db, "close_unreadable");
    // Rows deleted behind the store's back (by hand, or a cascade from the experiment).
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA foreign_keys = ON; DELETE FROM runs WHERE experiment_id = 'e2' AND block = 1; \
         DELETE FROM experiments WHERE id = 'e3'; \
         UPDATE runs SET state = 'completed' WHERE experiment_id = 'e1' AND block = 4;",
    )
    .unwrap();
    agree(&s, &db, "deletes and an update by hand");
    let left: u64 = c
        .query_row("SELECT COUNT(*) FROM experiments", [], |r| r.get(0))
        .unwrap();
    assert_eq!(s.experiments_page(Some(1)).unwrap().total, left);
    assert_eq!(s.run_counts_of("e3").unwrap(), RunCounts::default());
    assert_eq!(s.block_count_of("e3").unwrap(), 0);
}

/// A write the disk refuses half-way leaves the counts with the rows as they were: both
/// are in the one transaction that rolled back.
#[test]
fn a_refused_write_leaves_the_counts_with_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("optgate.db");
    let mut s = Store::open(&db).unwrap();
    let (b, r) = plan(1..=2);
    s.insert_experiment(&new_experiment("e1"), &b, &r).unwrap();
    let pages: u64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    s.set_max_page_count(pages).unwrap();
    let (b, r) = plan(1..=2000);
    s.insert_experiment(&new_experiment("e2"), &b, &r)
        .expect_err("the disk is full");
    agree(&s, &db, "a refused insert");
    assert_eq!(s.run_counts_of("e2").unwrap(), RunCounts::default());
    assert_eq!(s.run_counts_of("e1").unwrap().total, 4);
}

#[test]
fn a_page_is_the_newest_experiments_with_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("optgate.db")).unwrap();
    let (b, r) = plan(1..=1);
    // Created e5 first, e1 last: newest first is e1, e2, … (the ids' order is the other way).
    for i in (1..=5).rev() {
        s.insert_experiment(&new_experiment(&format!("e{i}")), &b, &r)
            .unwrap();
        // Distinct creation times (milliseconds).
        std::thread::sleep(std::time::Duration::from_millis(3));
    }
    let ids = |p: ExperimentPage| -> (Vec<String>, u64) {
        let ids = p.rows.into_iter().map(|r| r.unwrap().id).collect();
        (ids, p.total)
    };
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let two = ids(s.experiments_page(Some(2)).unwrap());
    assert_eq!(two, (strings(&["e1", "e2"]), 5));
    let all = ids(s.experiments_page(None).unwrap());
    assert_eq!(all, (strings(&["e1", "e2", "e3", "e4", "e5"]), 5));
    assert_eq!(ids(s.experiments_page(Some(9)).unwrap()).0.len(), 5);
}

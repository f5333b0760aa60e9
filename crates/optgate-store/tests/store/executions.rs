//! The history of executions: rows read back by name oldest first, the queue an
//! experiment's end fills in the same transaction (whichever write ended it), and many
//! writers at once — threads with their own connections, as the daemon and several
//! `optgate run` processes are — none of whose rows is lost.

use optgate_store::migrations::MIGRATIONS;
use optgate_store::*;

fn execution(id: &str, name: &str, kind: ExecutionKind, started: &str) -> Execution {
    Execution {
        id: id.into(),
        name: name.into(),
        kind,
        scheduler: SchedulerKind::Local,
        state: ExperimentState::Decided,
        state_reason: None,
        source_path: "/w/exp.yaml".into(),
        source_sha256: "ab".repeat(32),
        root: format!("/w/runs/{id}"),
        build: BuildIdentity {
            git_commit: Some("0123abcd".into()),
            git_dirty: Some(false),
        },
        nodes: vec!["node1".into()],
        started_at: started.into(),
        ended_at: started.into(),
        runs_completed: 6,
        runs_total: 6,
        looks: 1,
        baseline: Some("baseline".into()),
        baseline_median_s: Some(1.5),
        variants: vec![VariantOutcome {
            variant: "omp6".into(),
            decision: optgate_stats::Decision::Accept,
            reason: "faster".into(),
            speedup: Some(1.3),
            speedup_ci_low: Some(1.2),
            speedup_ci_high: Some(1.4),
            system_impact_pct: Some(-2.0),
            system_impact_ci_low: None,
            system_impact_ci_high: None,
        }],
    }
}

fn new_experiment(id: &str) -> NewExperiment {
    NewExperiment {
        id: id.into(),
        name: "demo".into(),
        source_path: "/w/exp.yaml".into(),
        source_text: "name: demo\n".into(),
        source_sha256: "ab".repeat(32),
        root: format!("/w/runs/{id}"),
        scheduler: SchedulerKind::Local,
        replicates: 2,
        max_replicates: 2,
    }
}

/// Rows come back whole, of their name only, oldest first whatever the order written; a
/// row written again (a resumed execution) replaces the first.
#[test]
fn executions_read_back_by_name_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("optgate.db")).unwrap();
    let late = execution(
        "b",
        "demo",
        ExecutionKind::Daemon,
        "2026-01-02T00:00:00.000Z",
    );
    let early = execution("a", "demo", ExecutionKind::Run, "2026-01-01T00:00:00.000Z");
    let other = execution("c", "other", ExecutionKind::Run, "2026-01-01T00:00:00.000Z");
    for e in [&late, &early, &other] {
        s.record_execution(e).unwrap();
    }
    assert_eq!(
        s.executions_by_name("demo").unwrap(),
        vec![early.clone(), late.clone()]
    );
    let mut again = early.clone();
    again.state = ExperimentState::BudgetExhausted;
    s.record_execution(&again).unwrap();
    assert_eq!(s.executions_by_name("demo").unwrap(), vec![again, late]);
    let runs: Vec<String> = s
        .newest_executions_of_kind_each(ExecutionKind::Run, None)
        .unwrap()
        .into_iter()
        .map(|e| e.unwrap().id)
        .collect();
    assert_eq!(runs, ["a", "c"]);
}

/// Any write that ends an experiment queues it, in its own transaction; going on to
/// another state, or back from cancelled, does not; recording the execution unqueues it.
#[test]
fn an_experiments_end_queues_it_for_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("optgate.db")).unwrap();
    for id in ["x", "y"] {
        s.insert_experiment(&new_experiment(id), &[], &[]).unwrap();
    }
    s.set_state("x", ExperimentState::Running, None).unwrap();
    assert!(s.executions_due().unwrap().is_empty());
    s.cancel_experiment("y", "stop").unwrap();
    s.set_state("x", ExperimentState::Failed, Some("broke"))
        .unwrap();
    assert_eq!(s.executions_due().unwrap(), ["y", "x"]);
    s.record_execution(&execution("y", "demo", ExecutionKind::Daemon, "t"))
        .unwrap();
    assert!(s.reopen_cancelled("y", "stop").unwrap());
    assert_eq!(s.executions_due().unwrap(), ["x"]);
    s.drop_execution_due("x").unwrap();
    assert!(s.executions_due().unwrap().is_empty());
    s.set_build_identity(
        "x",
        &BuildIdentity {
            git_commit: Some("c0ffee".into()),
            git_dirty: Some(true),
        },
    )
    .unwrap();
    assert_eq!(
        s.build_identity("x").unwrap().git_commit.as_deref(),
        Some("c0ffee")
    );
}

/// Eight writers at once, each its own connection (as `optgate run` processes are), plus
/// one changing experiments' states (as the daemon does): every row of every writer is
/// there after. Without the busy timeout, or with a writer's error swallowed, rows go
/// missing or a writer fails with "database is locked".
#[test]
fn concurrent_writers_lose_no_execution() {
    const WRITERS: usize = 8;
    const EACH: usize = 25;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("optgate.db");
    Store::open(&db).unwrap();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(WRITERS + 1));
    let mut threads = Vec::new();
    for w in 0..WRITERS {
        let (db, barrier) = (db.clone(), barrier.clone());
        threads.push(std::thread::spawn(move || {
            let mut s = Store::open_for_history(&db).unwrap();
            barrier.wait();
            for i in 0..EACH {
                let id = format!("w{w}-{i}");
                s.record_execution(&execution(&id, "demo", ExecutionKind::Run, &id))
                    .unwrap();
            }
        }));
    }
    let daemon = {
        let (db, barrier) = (db.clone(), barrier.clone());
        std::thread::spawn(move || {
            let mut s = Store::open(&db).unwrap();
            barrier.wait();
            for i in 0..EACH {
                let id = format!("d{i}");
                s.insert_experiment(&new_experiment(&id), &[], &[]).unwrap();
                s.set_state(&id, ExperimentState::Decided, None).unwrap();
            }
        })
    };
    for t in threads {
        t.join().unwrap();
    }
    daemon.join().unwrap();
    let s = Store::open(&db).unwrap();
    assert_eq!(s.executions_by_name("demo").unwrap().len(), WRITERS * EACH);
    assert_eq!(s.executions_due().unwrap().len(), EACH);
}

/// A database from before the history opens with its ended experiments queued, so the
/// daemon writes their history; the checked-in version-1 one (a running experiment) has
/// none queued.
#[test]
fn an_older_database_gains_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("v1.db");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1.db");
    std::fs::copy(fixture, &db).unwrap();
    let s = Store::open(&db).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    assert!(s.executions_due().unwrap().is_empty());
    assert!(s.executions_by_name("demo").unwrap().is_empty());
}

/// A database whose experiments ended before the history existed: opening it queues
/// them (the daemon then writes their rows), and only the ended ones.
#[test]
fn experiments_ended_before_the_history_are_queued_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.db");
    {
        let mut c = rusqlite::Connection::open(&db).unwrap();
        // The schema just before the history's migration (others may follow it).
        let history = MIGRATIONS
            .iter()
            .position(|m| m.contains("CREATE TABLE executions ("))
            .expect("the history's migration");
        let before = history as u32;
        optgate_store::migrations::migrate_to(&mut c, before).unwrap();
        for (id, state) in [("old-done", "decided"), ("old-live", "running")] {
            c.execute(
                "INSERT INTO experiments (id, name, source_path, source_text, source_sha256, \
                 root, scheduler, state, replicates, max_replicates, created_at, updated_at) \
                 VALUES (?1, 'demo', '/w/e.yaml', '', '', '/w', 'local', ?2, 5, 5, 't', 't')",
                [id, state],
            )
            .unwrap();
        }
    }
    let s = Store::open(&db).unwrap();
    assert_eq!(s.executions_due().unwrap(), ["old-done"]);
}

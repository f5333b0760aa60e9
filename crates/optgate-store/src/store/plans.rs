//! The query plans of the reads `optgate status` and the engine make: each one walks an
//! index (or the stored counts' key) — never a scan of a whole table, never a sort of one —
//! so its cost follows the rows it returns. Checked with `EXPLAIN QUERY PLAN` and with
//! SQLite's own count of full-scan steps, both counts, not times.

use super::*;

/// The plan's steps, as SQLite words them (`SEARCH runs USING INDEX …`).
fn plan(s: &Store, sql: &str) -> Vec<String> {
    let mut stmt = s
        .conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .unwrap();
    let nulls = vec![rusqlite::types::Null; stmt.parameter_count()];
    stmt.query_map(rusqlite::params_from_iter(nulls), |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A store with a few experiments, their runs, blocks, jobs and looks.
fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("optgate.db")).unwrap();
    for e in 0..3 {
        let id = format!("e{e}");
        let blocks = vec![BlockRow {
            index: 1,
            order: vec!["baseline".into()],
        }];
        let runs = vec![NewRun {
            run_id: "b001-baseline".into(),
            block: 1,
            arm: "baseline".into(),
            position: 0,
        }];
        let new = NewExperiment {
            id: id.clone(),
            name: id.clone(),
            source_path: "/x.yaml".into(),
            source_text: String::new(),
            source_sha256: String::new(),
            root: "/r".into(),
            scheduler: SchedulerKind::Local,
            replicates: 1,
            max_replicates: 1,
        };
        s.insert_experiment(&new, &blocks, &runs).unwrap();
    }
    (dir, s)
}

/// Each read of `optgate status`, the engine's scan, and the index or key it must use.
fn reads() -> Vec<(String, &'static str)> {
    vec![
        (
            RUN_COUNTS_OF.to_string(),
            "SEARCH run_state_counts USING PRIMARY KEY",
        ),
        (
            BLOCK_COUNT_OF.to_string(),
            "SEARCH block_counts USING PRIMARY KEY",
        ),
        (
            LATEST_LOOK_OF.to_string(),
            "SEARCH looks USING INDEX sqlite_autoindex_looks_1",
        ),
        (jobs_of_sql(), "SEARCH jobs USING INDEX jobs_by_experiment"),
        (
            page_sql(),
            "SCAN experiments USING INDEX experiments_by_created",
        ),
        (
            active_sql(),
            "SCAN experiments USING INDEX experiments_active",
        ),
        (
            format!("SELECT {EXPERIMENT_COLUMNS} FROM experiments WHERE id = ?1"),
            "SEARCH experiments USING INDEX sqlite_autoindex_experiments_1",
        ),
    ]
}

#[test]
fn every_status_read_walks_an_index_and_sorts_nothing() {
    let (_dir, s) = store();
    for (sql, expected) in reads() {
        let steps = plan(&s, &sql);
        assert!(
            steps.iter().any(|p| p.starts_with(expected)),
            "{sql}\nplan: {steps:?}\nexpected a step starting `{expected}`"
        );
        for p in &steps {
            let scans_a_table = p.starts_with("SCAN") && !p.contains("USING");
            assert!(
                !scans_a_table && !p.contains("TEMP B-TREE"),
                "{sql}\nplan: {steps:?}"
            );
        }
    }
}

/// The engine's question at every pass (damaged scheduler kinds among the experiments
/// not closed) reads the active ones' partial index and the live jobs' index, then looks
/// each candidate up by id: the only scan is of the active experiments.
#[test]
fn the_engine_asks_for_damaged_kinds_among_the_active_experiments_only() {
    let (_dir, s) = store();
    let steps = plan(&s, &unreadable_sql());
    for expected in [
        "SEARCH experiments USING INDEX sqlite_autoindex_experiments_1 (id=?)",
        "SEARCH jobs USING INDEX jobs_by_state",
    ] {
        assert!(
            steps.iter().any(|p| p.starts_with(expected)),
            "{steps:?}: {expected}"
        );
    }
    for p in steps.iter().filter(|p| p.starts_with("SCAN")) {
        assert!(p.ends_with("INDEX experiments_active"), "{steps:?}");
    }
}

/// The same reads, run: SQLite's count of full-scan steps is at most the rows each
/// returns (a page read down its index stops at the page), whatever the table holds.
#[test]
fn status_reads_step_only_through_the_rows_they_return() {
    let (_dir, s) = store();
    for (sql, _) in reads() {
        let mut stmt = s.conn.prepare(&sql).unwrap();
        let n = stmt.parameter_count();
        let args: Vec<rusqlite::types::Value> = (0..n)
            .map(|_| match sql.contains("LIMIT ?1") {
                true => rusqlite::types::Value::Integer(2),
                false => rusqlite::types::Value::Text("e1".into()),
            })
            .collect();
        let mut rows = stmt.query(rusqlite::params_from_iter(args)).unwrap();
        let mut returned = 0;
        while rows.next().unwrap().is_some() {
            returned += 1;
        }
        drop(rows);
        let full = stmt.get_status(rusqlite::StatementStatus::FullscanStep);
        assert!(
            full <= returned,
            "{sql}: {full} full-scan steps for {returned} rows"
        );
    }
}

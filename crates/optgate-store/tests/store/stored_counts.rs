//! Every experiment's stored counts at once, for the tests: runs per state and blocks, read
//! from the tables the triggers keep (`run_state_counts`, `block_counts`) by a connection
//! of its own on the store's file. The store itself reads one experiment's at a time
//! (`Store::run_counts_of`, `Store::block_count_of`).

use std::collections::BTreeMap;

use optgate_store::{RunCounts, RunState, Store};

/// Adds `n` runs in `state` to `counts`.
pub fn add(counts: &mut RunCounts, state: RunState, n: u32) {
    counts.total += n;
    match state {
        RunState::Pending => counts.pending += n,
        RunState::Queued => counts.queued += n,
        RunState::Completed => counts.completed += n,
        RunState::Failed => counts.failed += n,
        RunState::Cancelled => counts.cancelled += n,
    }
}

/// Run counts per experiment id, from the stored counts (one row per experiment and state).
pub fn run_counts(s: &Store) -> BTreeMap<String, RunCounts> {
    let c = rusqlite::Connection::open(s.path()).unwrap();
    let mut stmt = c
        .prepare("SELECT experiment_id, state, n FROM run_state_counts")
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
    let mut out: BTreeMap<String, RunCounts> = BTreeMap::new();
    for row in rows {
        let (id, state, n) = row.unwrap();
        let state = RunState::parse(&state).unwrap_or_else(|| panic!("runs.state {state:?}"));
        add(out.entry(id).or_default(), state, n);
    }
    out
}

/// Blocks per experiment id, from the stored counts.
pub fn block_counts(s: &Store) -> BTreeMap<String, u32> {
    let c = rusqlite::Connection::open(s.path()).unwrap();
    let mut stmt = c
        .prepare("SELECT experiment_id, n FROM block_counts")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

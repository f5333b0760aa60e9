//! Fills a database with many ended experiments for the daemon benchmark
//! (`benches/daemon/run.sh`): `populate DB EXPERIMENTS BLOCKS` records EXPERIMENTS
//! experiments of two arms and BLOCKS blocks each (2 × BLOCKS runs), one finished job per
//! block, a look, and a stored report — what `optgate status` reads at that scale.
//!
//! The store opens the file (creating the schema); the rows then go in through one
//! transaction of plain inserts without journal or fsync, so a million runs take seconds. The
//! triggers keep the stored counts as for any write; the bench checks them at the end.

use optgate_store::*;
use rusqlite::{Connection, params};

/// What each experiment's rows hold besides its id.
struct Shape {
    blocks: u32,
    report: String,
    decisions: &'static str,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, experiments, blocks] = &args[..] else {
        return Err("usage: populate DB EXPERIMENTS BLOCKS".into());
    };
    let experiments: u32 = experiments.parse()?;
    let shape = Shape {
        blocks: blocks.parse()?,
        report: format!(
            "{{\"variants\":[{{\"name\":\"v1\",\"pad\":\"{}\"}}]}}",
            "x".repeat(20_000)
        ),
        decisions: r#"[{"variant":"v1","decision":"accept","reason":"steady-state speed-up 1.2× beats the 1% worth having"}]"#,
    };
    drop(Store::open(std::path::Path::new(db))?);
    let mut conn = Connection::open(db)?;
    // No journal while filling (a bench file, rebuilt on failure): each page is written
    // once, not once to the WAL and again at the checkpoint. `Store::open` below puts the
    // file back in WAL mode.
    conn.query_row("PRAGMA journal_mode = OFF", [], |_| Ok(()))?;
    conn.execute_batch("PRAGMA synchronous = OFF; PRAGMA foreign_keys = ON;")?;
    let tx = conn.transaction()?;
    for e in 0..experiments {
        insert(&tx, e, &shape)?;
    }
    tx.commit()?;
    drop(Store::open(std::path::Path::new(db))?);
    // The stored counts, kept by the triggers, against the rows themselves.
    let total: u32 = conn.query_row(
        "SELECT COALESCE(SUM(n), 0) FROM run_state_counts",
        [],
        |r| r.get(0),
    )?;
    let rows: u32 = conn.query_row("SELECT COUNT(*) FROM runs", [], |r| r.get(0))?;
    if total != rows {
        return Err(format!("stored run counts say {total}, the runs table holds {rows}").into());
    }
    println!("{total}");
    Ok(())
}

/// One ended experiment `e` with its blocks, runs, jobs, look and report.
fn insert(tx: &rusqlite::Transaction<'_>, e: u32, shape: &Shape) -> rusqlite::Result<()> {
    let ends = ["decided", "decided", "budget_exhausted", "cancelled"];
    let id = format!("20260101-{e:06}-{e:04x}");
    // One experiment a minute, in order: the list's newest first is the last ones.
    let at = format!(
        "2026-01-{:02}T{:02}:{:02}:00.000Z",
        1 + e / 1440,
        e / 60 % 24,
        e % 60
    );
    tx.prepare_cached(
        "INSERT INTO experiments (id, name, source_path, source_text, source_sha256, root, \
         scheduler, state, replicates, max_replicates, created_at, updated_at, report_json) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'local', ?7, ?8, ?8, ?9, ?9, ?10)",
    )?
    .execute(params![
        id,
        format!("bench{e}"),
        format!("/home/me/exp{e}.yaml"),
        "name: bench\n".repeat(40),
        "ab".repeat(32),
        format!("/scratch/optgate-runs/bench{e}/{id}"),
        ends[e as usize % ends.len()],
        shape.blocks,
        at,
        shape.report,
    ])?;
    for b in 1..=shape.blocks {
        let order = match b % 2 {
            0 => ["baseline", "v1"],
            _ => ["v1", "baseline"],
        };
        tx.prepare_cached(
            "INSERT INTO blocks (experiment_id, idx, arm_order) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![id, b, serde_json::to_string(&order).unwrap()])?;
        let run_ids: Vec<String> = order.iter().map(|a| format!("b{b:03}-{a}")).collect();
        for (p, arm) in order.iter().enumerate() {
            tx.prepare_cached(
                "INSERT INTO runs (experiment_id, run_id, block, arm, position, state) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 'completed')",
            )?
            .execute(params![id, run_ids[p], b, arm, p])?;
        }
        tx.prepare_cached(
            "INSERT INTO jobs (experiment_id, block, name, attempt, run_ids, scheduler_job_id, \
             state, detail, created_at, updated_at) \
             VALUES (?1, ?2, ?3, 1, ?4, ?3, 'finished', 'completed', ?5, ?5)",
        )?
        .execute(params![
            id,
            b,
            format!("og-{id}-b{b:03}"),
            serde_json::to_string(&run_ids).unwrap(),
            at
        ])?;
    }
    tx.prepare_cached(
        "INSERT INTO looks (experiment_id, look, blocks, nominal_alpha, decisions, created_at) \
         VALUES (?1, 1, ?2, 0.05, ?3, ?4)",
    )?
    .execute(params![id, shape.blocks, shape.decisions, at])?;
    Ok(())
}

//! Fills a database with many ended experiments for the daemon benchmark
//! (`benches/daemon/run.sh`): `populate DB EXPERIMENTS BLOCKS` records EXPERIMENTS
//! experiments of two arms and BLOCKS blocks each (2 × BLOCKS runs), one finished job per
//! block, a look, and a stored report — what `optgate status` reads at that scale.

use optgate_store::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, db, experiments, blocks] = &args[..] else {
        return Err("usage: populate DB EXPERIMENTS BLOCKS".into());
    };
    let experiments: u32 = experiments.parse()?;
    let blocks: u32 = blocks.parse()?;
    let mut store = Store::open(std::path::Path::new(db))?;
    let report = format!(
        "{{\"variants\":[{{\"name\":\"v1\",\"pad\":\"{}\"}}]}}",
        "x".repeat(20_000)
    );
    let ends = [
        ExperimentState::Decided,
        ExperimentState::Decided,
        ExperimentState::BudgetExhausted,
        ExperimentState::Cancelled,
    ];
    for e in 0..experiments {
        let id = format!("20260101-{:06}-{:04x}", e, e);
        let arms = ["baseline".to_string(), "v1".to_string()];
        let block_rows: Vec<BlockRow> = (1..=blocks)
            .map(|b| BlockRow {
                index: b,
                order: if b % 2 == 0 {
                    arms.to_vec()
                } else {
                    arms.iter().rev().cloned().collect()
                },
            })
            .collect();
        let runs: Vec<NewRun> = block_rows
            .iter()
            .flat_map(|b| {
                b.order.iter().enumerate().map(move |(p, arm)| NewRun {
                    run_id: format!("b{:03}-{arm}", b.index),
                    block: b.index,
                    arm: arm.clone(),
                    position: p as u32,
                })
            })
            .collect();
        store.insert_experiment(
            &NewExperiment {
                id: id.clone(),
                name: format!("bench{e}"),
                source_path: format!("/home/me/exp{e}.yaml"),
                source_text: "name: bench\n".repeat(40),
                source_sha256: "ab".repeat(32),
                root: format!("/scratch/optgate-runs/bench{e}/{id}"),
                scheduler: SchedulerKind::Local,
                replicates: blocks,
                max_replicates: blocks,
            },
            &block_rows,
            &runs,
        )?;
        store.set_state(&id, ExperimentState::Running, None)?;
        let jobs: Vec<NewJob> = block_rows
            .iter()
            .map(|b| NewJob {
                block: b.index,
                name: format!("og-{id}-b{:03}", b.index),
                attempt: 1,
                run_ids: b
                    .order
                    .iter()
                    .map(|a| format!("b{:03}-{a}", b.index))
                    .collect(),
            })
            .collect();
        for job in store.create_jobs(&id, &jobs)? {
            store.job_submitted(job.id, &job.name)?;
            let updates: Vec<RunUpdate> = job
                .run_ids
                .iter()
                .map(|r| RunUpdate {
                    run_id: r.clone(),
                    state: RunState::Completed,
                    detail: None,
                })
                .collect();
            store.finish_job(&job, JobRecordState::Finished, Some("completed"), &updates)?;
        }
        store.set_state(&id, ExperimentState::Analysing, None)?;
        store.record_look(
            &id,
            &LookRow {
                look: 1,
                blocks,
                nominal_alpha: 0.05,
                decisions: r#"[{"variant":"v1","decision":"accept","reason":"steady-state speed-up 1.2× beats the 1% worth having"}]"#.into(),
                created_at: String::new(),
            },
            &report,
            &AfterLook::Finish {
                state: ends[e as usize % ends.len()],
                reason: None,
            },
        )?;
    }
    let total: u32 = store.run_counts()?.values().map(|c| c.total).sum();
    println!("{total}");
    Ok(())
}

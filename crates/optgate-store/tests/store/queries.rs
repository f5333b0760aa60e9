//! One test per query the engine depends on, each against a small populated database of
//! three experiments (so that a query that forgets its experiment, its state filter or its
//! order gives a different answer than the one asserted).

use std::collections::BTreeMap;

use optgate_store::*;

use crate::stored_counts;

fn new_experiment(id: &str) -> NewExperiment {
    NewExperiment {
        id: id.to_string(),
        name: format!("demo-{id}"),
        source_path: format!("/home/me/{id}.yaml"),
        source_text: format!("name: demo-{id}\n"),
        source_sha256: "ab".repeat(32),
        root: format!("/scratch/optgate-runs/demo/{id}"),
        scheduler: optgate_store::SchedulerKind::Slurm,
        replicates: 2,
        max_replicates: 4,
    }
}

/// Blocks `blocks` of arms `baseline`, `v1`, `v2`, the order turning with the block.
fn plan(blocks: std::ops::RangeInclusive<u32>) -> (Vec<BlockRow>, Vec<NewRun>) {
    let arms = ["baseline", "v1", "v2"];
    let mut b = Vec::new();
    let mut r = Vec::new();
    for i in blocks {
        let order: Vec<String> = (0..3)
            .map(|k| arms[(k + i as usize) % 3].to_string())
            .collect();
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

/// A job of experiment `id` (job names are unique across experiments).
fn job(id: &str, block: u32, attempt: u32, run_ids: &[&str]) -> NewJob {
    NewJob {
        block,
        name: format!("og-{id}-b{block:03}+r{attempt}"),
        attempt,
        run_ids: run_ids.iter().map(|s| s.to_string()).collect(),
    }
}

fn update(run_id: &str, state: RunState) -> RunUpdate {
    RunUpdate {
        run_id: run_id.into(),
        state,
        detail: Some(format!("{run_id} is {}", state.as_str())),
    }
}

/// `e1` running with two blocks, its block 1 job submitted (`b001-baseline` completed,
/// the rest queued) and `b002-*` pending; `e2` planned with three blocks; `e3` decided
/// with one block, its runs completed, and a finished job. Every experiment's run ids are
/// the same strings: a query that forgets its experiment reads another's rows.
struct Db {
    _dir: tempfile::TempDir,
    s: Store,
    e1_job: JobRow,
    e3_job: JobRow,
}

fn populated() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("optgate.db")).unwrap();
    for (id, n) in [("e1", 2), ("e2", 3), ("e3", 1)] {
        let (b, r) = plan(1..=n);
        s.insert_experiment(&new_experiment(id), &b, &r).unwrap();
    }
    s.set_state("e1", ExperimentState::Running, None).unwrap();
    let e1_job = s
        .create_jobs(
            "e1",
            &[job("e1", 1, 1, &["b001-v1", "b001-v2", "b001-baseline"])],
        )
        .unwrap()
        .remove(0);
    s.job_submitted(e1_job.id, "101").unwrap();
    s.update_runs("e1", &[update("b001-baseline", RunState::Completed)])
        .unwrap();

    s.set_state("e3", ExperimentState::Running, None).unwrap();
    let e3_job = s
        .create_jobs(
            "e3",
            &[job("e3", 1, 1, &["b001-v1", "b001-v2", "b001-baseline"])],
        )
        .unwrap()
        .remove(0);
    s.job_submitted(e3_job.id, "103").unwrap();
    let done: Vec<RunUpdate> = ["b001-v1", "b001-v2", "b001-baseline"]
        .iter()
        .map(|r| update(r, RunState::Completed))
        .collect();
    let e3_job = s.job(e3_job.id).unwrap().unwrap();
    s.finish_job(&e3_job, JobRecordState::Finished, Some("completed"), &done)
        .unwrap();
    s.set_state("e3", ExperimentState::Decided, Some("all decided"))
        .unwrap();
    let e1_job = s.job(e1_job.id).unwrap().unwrap();
    let e3_job = s.job(e3_job.id).unwrap().unwrap();
    Db {
        _dir: dir,
        s,
        e1_job,
        e3_job,
    }
}

fn states(s: &Store, id: &str) -> BTreeMap<String, RunState> {
    s.runs(id)
        .unwrap()
        .into_iter()
        .map(|r| (r.run_id, r.state))
        .collect()
}

fn ids(rows: &[ExperimentRow]) -> Vec<&str> {
    rows.iter().map(|e| e.id.as_str()).collect()
}

#[test]
fn experiment_reads_the_one_asked_for_with_every_field() {
    let db = populated();
    let e = db.s.experiment("e3").unwrap().unwrap();
    assert_eq!(e.id, "e3");
    assert_eq!(e.name, "demo-e3");
    assert_eq!(e.source_path, "/home/me/e3.yaml");
    assert_eq!(e.root, "/scratch/optgate-runs/demo/e3");
    assert_eq!(e.scheduler, optgate_store::SchedulerKind::Slurm);
    assert_eq!(e.state, ExperimentState::Decided);
    assert_eq!(e.state_reason.as_deref(), Some("all decided"));
    assert_eq!((e.replicates, e.max_replicates), (2, 4));
    assert!(db.s.experiment("e4").unwrap().is_none());
}

#[test]
fn experiments_lists_every_one_oldest_first() {
    let db = populated();
    assert_eq!(ids(&db.s.experiments().unwrap()), ["e1", "e2", "e3"]);
}

#[test]
fn active_experiments_leaves_out_the_ended_ones() {
    let mut db = populated();
    assert_eq!(ids(&db.s.active_experiments().unwrap()), ["e1", "e2"]);
    for end in [
        ExperimentState::BudgetExhausted,
        ExperimentState::Failed,
        ExperimentState::Cancelled,
    ] {
        db.s.set_state("e2", end, None).unwrap();
        assert_eq!(ids(&db.s.active_experiments().unwrap()), ["e1"], "{end:?}");
    }
    db.s.set_state("e2", ExperimentState::Analysing, None)
        .unwrap();
    assert_eq!(ids(&db.s.active_experiments().unwrap()), ["e1", "e2"]);
}

#[test]
fn source_text_is_the_text_submitted() {
    let db = populated();
    assert_eq!(
        db.s.source_text("e2").unwrap().as_deref(),
        Some("name: demo-e2\n")
    );
    assert_eq!(db.s.source_text("e4").unwrap(), None);
}

#[test]
fn set_state_moves_only_that_experiment_with_its_reason() {
    let mut db = populated();
    db.s.set_state("e2", ExperimentState::Failed, Some("broken"))
        .unwrap();
    let e2 = db.s.experiment("e2").unwrap().unwrap();
    assert_eq!(
        (e2.state, e2.state_reason.as_deref()),
        (ExperimentState::Failed, Some("broken"))
    );
    assert_eq!(
        db.s.experiment("e1").unwrap().unwrap().state,
        ExperimentState::Running
    );
}

#[test]
fn transition_moves_only_from_the_state_given() {
    let mut db = populated();
    let (from, to) = (ExperimentState::Running, ExperimentState::Analysing);
    assert!(
        !db.s.transition("e2", from, to, None).unwrap(),
        "e2 is planned"
    );
    assert_eq!(
        db.s.experiment("e2").unwrap().unwrap().state,
        ExperimentState::Planned
    );
    assert!(db.s.transition("e1", from, to, Some("look")).unwrap());
    let e1 = db.s.experiment("e1").unwrap().unwrap();
    assert_eq!((e1.state, e1.state_reason.as_deref()), (to, Some("look")));
    assert!(
        !db.s.transition("e1", from, to, None).unwrap(),
        "moved once"
    );
}

#[test]
fn cancel_experiment_cancels_pending_runs_and_keeps_queued_and_finished_ones() {
    let mut db = populated();
    assert_eq!(
        db.s.cancel_experiment("e1", "by the user").unwrap(),
        Some(ExperimentState::Running)
    );
    let e1 = db.s.experiment("e1").unwrap().unwrap();
    assert_eq!(
        (e1.state, e1.state_reason.as_deref()),
        (ExperimentState::Cancelled, Some("by the user"))
    );
    let runs = states(&db.s, "e1");
    assert_eq!(runs["b001-baseline"], RunState::Completed);
    assert_eq!(runs["b001-v1"], RunState::Queued, "its job still holds it");
    for arm in ["baseline", "v1", "v2"] {
        assert_eq!(runs[&format!("b002-{arm}")], RunState::Cancelled);
    }
    // Another experiment's pending runs are untouched.
    assert!(
        states(&db.s, "e2")
            .values()
            .all(|s| *s == RunState::Pending)
    );
    // An ended experiment stays as it ended.
    assert_eq!(
        db.s.cancel_experiment("e3", "late").unwrap(),
        Some(ExperimentState::Decided)
    );
    assert_eq!(
        db.s.experiment("e3").unwrap().unwrap().state,
        ExperimentState::Decided
    );
    assert_eq!(db.s.cancel_experiment("e4", "x").unwrap(), None);
}

/// Reopening undoes exactly the cancellation named by its reason: the experiment back to
/// planned and the runs it cancelled back to pending, while a run cancelled for another
/// reason (fail fast) and a finished run keep their state. Catches a reopen that revives
/// every cancelled run, one that ignores the reason, or one that forgets its experiment.
#[test]
fn reopen_cancelled_undoes_only_the_cancellation_with_that_reason() {
    let mut db = populated();
    db.s.update_runs(
        "e1",
        &[RunUpdate {
            run_id: "b002-v2".into(),
            state: RunState::Cancelled,
            detail: Some("stopped by fail fast".into()),
        }],
    )
    .unwrap();
    db.s.cancel_experiment("e1", "interrupted").unwrap();
    db.s.cancel_experiment("e2", "interrupted").unwrap();
    assert!(!db.s.reopen_cancelled("e1", "by the user").unwrap());
    assert!(!db.s.reopen_cancelled("e3", "interrupted").unwrap());
    assert!(db.s.reopen_cancelled("e1", "interrupted").unwrap());
    let e1 = db.s.experiment("e1").unwrap().unwrap();
    assert_eq!(
        (e1.state, e1.state_reason),
        (ExperimentState::Planned, None)
    );
    let runs = states(&db.s, "e1");
    assert_eq!(runs["b002-baseline"], RunState::Pending);
    assert_eq!(runs["b002-v1"], RunState::Pending);
    assert_eq!(runs["b002-v2"], RunState::Cancelled, "fail fast's stays");
    assert_eq!(runs["b001-baseline"], RunState::Completed);
    // e2 was cancelled with the same reason but not reopened.
    assert_eq!(
        db.s.experiment("e2").unwrap().unwrap().state,
        ExperimentState::Cancelled
    );
    assert!(
        states(&db.s, "e2")
            .values()
            .all(|s| *s == RunState::Cancelled)
    );
}

#[test]
fn begin_building_cancels_the_pending_runs_of_the_arms_that_cannot_run() {
    let mut db = populated();
    let na = BTreeMap::from([("v2".to_string(), "no avx512".to_string())]);
    db.s.begin_building("e2", &na).unwrap();
    assert_eq!(
        db.s.experiment("e2").unwrap().unwrap().state,
        ExperimentState::Building
    );
    assert_eq!(db.s.not_applicable("e2").unwrap(), na);
    for r in db.s.runs("e2").unwrap() {
        if r.arm == "v2" {
            assert_eq!(r.state, RunState::Cancelled, "{r:?}");
            assert_eq!(r.detail.as_deref(), Some("not applicable: no avx512"));
        } else {
            assert_eq!(r.state, RunState::Pending, "{r:?}");
        }
    }
    // Only from `planned`: a running experiment does not go back to building.
    db.s.begin_building("e1", &na).unwrap();
    assert_eq!(
        db.s.experiment("e1").unwrap().unwrap().state,
        ExperimentState::Running
    );
    assert_eq!(db.s.not_applicable("e1").unwrap(), BTreeMap::new());
}

#[test]
fn report_is_the_last_one_stored_for_that_experiment() {
    let mut db = populated();
    assert_eq!(db.s.report("e1").unwrap(), None);
    // Each look stores its report with it (`record_look`); the last one is what reads back.
    for (n, json) in [(1, r#"{"look":1}"#), (2, r#"{"look":2}"#)] {
        db.s.set_state("e1", ExperimentState::Analysing, None)
            .unwrap();
        let after = AfterLook::Extend {
            blocks: Vec::new(),
            runs: Vec::new(),
        };
        db.s.record_look("e1", &look(n, n + 1), json, &after)
            .unwrap();
    }
    assert_eq!(db.s.report("e1").unwrap().as_deref(), Some(r#"{"look":2}"#));
    assert_eq!(db.s.report("e2").unwrap(), None);
}

#[test]
fn blocks_are_the_experiments_own_in_order_with_their_arm_order() {
    let db = populated();
    let blocks = db.s.blocks("e2").unwrap();
    assert_eq!(blocks, plan(1..=3).0);
    assert_eq!(blocks[1].order, ["v2", "baseline", "v1"]);
    assert_eq!(db.s.blocks("e3").unwrap().len(), 1);
}

#[test]
fn runs_are_the_experiments_own_by_block_and_position() {
    let db = populated();
    let runs = db.s.runs("e1").unwrap();
    let order: Vec<(u32, u32, &str)> = runs
        .iter()
        .map(|r| (r.block, r.position, r.arm.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            (1, 0, "v1"),
            (1, 1, "v2"),
            (1, 2, "baseline"),
            (2, 0, "v2"),
            (2, 1, "baseline"),
            (2, 2, "v1")
        ]
    );
    let baseline = &runs[2];
    assert_eq!(baseline.run_id, "b001-baseline");
    assert_eq!(baseline.state, RunState::Completed);
    assert_eq!(
        baseline.detail.as_deref(),
        Some("b001-baseline is completed")
    );
}

/// The stored run counts (kept by the triggers) per experiment and state.
#[test]
fn stored_run_counts_are_per_experiment_and_state() {
    let db = populated();
    let all = stored_counts::run_counts(&db.s);
    assert_eq!(all.keys().collect::<Vec<_>>(), ["e1", "e2", "e3"]);
    let e1 = all["e1"];
    assert_eq!(
        (
            e1.total,
            e1.pending,
            e1.queued,
            e1.completed,
            e1.failed,
            e1.cancelled
        ),
        (6, 3, 2, 1, 0, 0)
    );
    assert_eq!((all["e2"].total, all["e2"].pending), (9, 9));
    assert_eq!((all["e3"].total, all["e3"].completed), (3, 3));
}

#[test]
fn run_counts_of_counts_one_experiment_only() {
    let db = populated();
    let e1 = db.s.run_counts_of("e1").unwrap();
    assert_eq!(e1, stored_counts::run_counts(&db.s)["e1"]);
    assert_eq!(
        (e1.total, e1.pending, e1.queued, e1.completed),
        (6, 3, 2, 1)
    );
    assert_eq!(db.s.run_counts_of("e4").unwrap(), RunCounts::default());
}

/// The stored block counts (kept by the triggers) per experiment.
#[test]
fn stored_block_counts_are_per_experiment() {
    let db = populated();
    assert_eq!(
        stored_counts::block_counts(&db.s),
        BTreeMap::from([("e1".into(), 2), ("e2".into(), 3), ("e3".into(), 1)])
    );
}

#[test]
fn update_runs_changes_only_the_experiments_runs_named() {
    let mut db = populated();
    db.s.update_runs(
        "e1",
        &[
            update("b001-v1", RunState::Failed),
            update("b002-v1", RunState::Cancelled),
        ],
    )
    .unwrap();
    let runs = states(&db.s, "e1");
    assert_eq!(runs["b001-v1"], RunState::Failed);
    assert_eq!(runs["b002-v1"], RunState::Cancelled);
    assert_eq!(runs["b001-v2"], RunState::Queued);
    assert_eq!(
        states(&db.s, "e2")["b001-v1"],
        RunState::Pending,
        "another experiment's run"
    );
}

#[test]
fn create_jobs_records_them_submitting_and_queues_their_runs_only_while_running() {
    let mut db = populated();
    let made =
        db.s.create_jobs("e1", &[job("e1", 2, 1, &["b002-v2", "b002-baseline"])])
            .unwrap();
    assert_eq!(made.len(), 1);
    let j = &made[0];
    assert_eq!((j.experiment_id.as_str(), j.block, j.attempt), ("e1", 2, 1));
    assert_eq!(j.state, JobRecordState::Submitting);
    assert_eq!(j.run_ids, ["b002-v2", "b002-baseline"]);
    assert_eq!(j.scheduler_job_id, None);
    let runs = states(&db.s, "e1");
    assert_eq!(runs["b002-v2"], RunState::Queued);
    assert_eq!(runs["b002-v1"], RunState::Pending, "not in the job");
    assert_eq!(states(&db.s, "e2")["b002-v2"], RunState::Pending);
    // Not running: nothing recorded.
    assert!(
        db.s.create_jobs("e2", &[job("e2", 1, 1, &["b001-v1"])])
            .unwrap()
            .is_empty()
    );
    assert!(db.s.jobs("e2").unwrap().is_empty());
    assert_eq!(states(&db.s, "e2")["b001-v1"], RunState::Pending);
}

#[test]
fn job_submitted_records_the_scheduler_id_of_that_job() {
    let mut db = populated();
    let j =
        db.s.create_jobs("e1", &[job("e1", 2, 1, &["b002-v1"])])
            .unwrap()
            .remove(0);
    db.s.job_note(j.id, "sbatch: timed out; trying again")
        .unwrap();
    db.s.job_submitted(j.id, "202").unwrap();
    let j = db.s.job(j.id).unwrap().unwrap();
    assert_eq!(j.state, JobRecordState::Submitted);
    assert_eq!(j.scheduler_job_id.as_deref(), Some("202"));
    assert_eq!(j.detail, None, "the note is cleared");
    assert_eq!(
        db.s.job(db.e1_job.id)
            .unwrap()
            .unwrap()
            .scheduler_job_id
            .as_deref(),
        Some("101")
    );
}

#[test]
fn job_note_says_why_a_job_is_still_submitting() {
    let mut db = populated();
    let j =
        db.s.create_jobs("e1", &[job("e1", 2, 1, &["b002-v1"])])
            .unwrap()
            .remove(0);
    db.s.job_note(j.id, "sbatch: timed out").unwrap();
    let j = db.s.job(j.id).unwrap().unwrap();
    assert_eq!(j.state, JobRecordState::Submitting);
    assert_eq!(j.detail.as_deref(), Some("sbatch: timed out"));
    assert_eq!(db.s.job(db.e1_job.id).unwrap().unwrap().detail, None);
}

#[test]
fn finish_job_records_the_end_and_the_outcomes_together() {
    let mut db = populated();
    let updates = [
        update("b001-v1", RunState::Completed),
        update("b001-v2", RunState::Pending),
    ];
    db.s.finish_job(
        &db.e1_job,
        JobRecordState::Finished,
        Some("lost: NODE_FAIL"),
        &updates,
    )
    .unwrap();
    let j = db.s.job(db.e1_job.id).unwrap().unwrap();
    assert_eq!(j.state, JobRecordState::Finished);
    assert_eq!(j.detail.as_deref(), Some("lost: NODE_FAIL"));
    let runs = states(&db.s, "e1");
    assert_eq!(runs["b001-v1"], RunState::Completed);
    assert_eq!(
        runs["b001-v2"],
        RunState::Pending,
        "back for another attempt"
    );
    assert_eq!(states(&db.s, "e3")["b001-v2"], RunState::Completed);
}

#[test]
fn job_reads_the_one_asked_for() {
    let db = populated();
    let j = db.s.job(db.e3_job.id).unwrap().unwrap();
    assert_eq!((j.experiment_id.as_str(), j.block, j.attempt), ("e3", 1, 1));
    assert_eq!(j.name, "og-e3-b001+r1");
    assert_eq!(j.run_ids, ["b001-v1", "b001-v2", "b001-baseline"]);
    assert_eq!(j.scheduler_job_id.as_deref(), Some("103"));
    assert_eq!(
        (j.state, j.detail.as_deref()),
        (JobRecordState::Finished, Some("completed"))
    );
    assert!(db.s.job(db.e3_job.id + 100).unwrap().is_none());
}

#[test]
fn jobs_are_the_experiments_own_in_the_order_recorded() {
    let mut db = populated();
    let second =
        db.s.create_jobs("e1", &[job("e1", 1, 2, &["b001-v2"])])
            .unwrap()
            .remove(0);
    let jobs = db.s.jobs("e1").unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        [db.e1_job.id, second.id]
    );
    assert_eq!(jobs[1].attempt, 2);
    assert_eq!(db.s.jobs("e3").unwrap().len(), 1);
    assert!(db.s.jobs("e2").unwrap().is_empty());
}

#[test]
fn live_jobs_are_the_submitting_and_submitted_ones_of_every_experiment() {
    let mut db = populated();
    let submitting =
        db.s.create_jobs("e1", &[job("e1", 2, 1, &["b002-v1"])])
            .unwrap()
            .remove(0);
    let live: Vec<i64> = db.s.live_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(
        live,
        [db.e1_job.id, submitting.id],
        "e3's finished job is not live"
    );
    db.s.finish_job(&db.e1_job, JobRecordState::Cancelled, None, &[])
        .unwrap();
    let live: Vec<i64> = db.s.live_jobs().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(live, [submitting.id]);
}

#[test]
fn set_scheduler_states_records_what_the_scheduler_said_per_job() {
    let mut db = populated();
    db.s.set_scheduler_states(&[(db.e1_job.id, "running".into())])
        .unwrap();
    assert_eq!(
        db.s.job(db.e1_job.id)
            .unwrap()
            .unwrap()
            .scheduler_state
            .as_deref(),
        Some("running")
    );
    assert_eq!(
        db.s.job(db.e3_job.id).unwrap().unwrap().scheduler_state,
        None
    );
    db.s.set_scheduler_states(&[(db.e1_job.id, "completing".into())])
        .unwrap();
    assert_eq!(
        db.s.job(db.e1_job.id)
            .unwrap()
            .unwrap()
            .scheduler_state
            .as_deref(),
        Some("completing")
    );
}

fn look(n: u32, blocks: u32) -> LookRow {
    LookRow {
        look: n,
        blocks,
        nominal_alpha: 0.001 * n as f64,
        decisions: format!(r#"{{"look":{n}}}"#),
        created_at: String::new(),
    }
}

#[test]
fn record_look_adds_blocks_and_goes_back_to_running() {
    let mut db = populated();
    db.s.set_state("e1", ExperimentState::Analysing, None)
        .unwrap();
    let (more, more_runs) = plan(3..=3);
    let after = AfterLook::Extend {
        blocks: more.clone(),
        runs: more_runs,
    };
    db.s.record_look("e1", &look(1, 2), r#"{"r":1}"#, &after)
        .unwrap();
    assert_eq!(
        db.s.experiment("e1").unwrap().unwrap().state,
        ExperimentState::Running
    );
    assert_eq!(db.s.blocks("e1").unwrap()[2], more[0]);
    assert_eq!(db.s.run_counts_of("e1").unwrap().pending, 6);
    assert_eq!(db.s.report("e1").unwrap().as_deref(), Some(r#"{"r":1}"#));
    assert_eq!(db.s.looks("e1").unwrap().len(), 1);
}

#[test]
fn record_look_that_ends_the_experiment_records_the_end_and_its_reason() {
    let mut db = populated();
    db.s.set_state("e1", ExperimentState::Analysing, None)
        .unwrap();
    let after = AfterLook::Finish {
        state: ExperimentState::BudgetExhausted,
        reason: Some("4 blocks".into()),
    };
    db.s.record_look("e1", &look(1, 4), "{}", &after).unwrap();
    let e1 = db.s.experiment("e1").unwrap().unwrap();
    assert_eq!(
        (e1.state, e1.state_reason.as_deref()),
        (ExperimentState::BudgetExhausted, Some("4 blocks"))
    );
    assert_eq!(db.s.blocks("e1").unwrap().len(), 2);
}

#[test]
fn record_look_after_a_cancellation_keeps_the_cancellation() {
    let mut db = populated();
    db.s.cancel_experiment("e1", "by the user").unwrap();
    let (more, more_runs) = plan(3..=3);
    let after = AfterLook::Extend {
        blocks: more,
        runs: more_runs,
    };
    db.s.record_look("e1", &look(1, 2), "{}", &after).unwrap();
    assert_eq!(
        db.s.experiment("e1").unwrap().unwrap().state,
        ExperimentState::Cancelled
    );
    assert_eq!(db.s.blocks("e1").unwrap().len(), 2, "no blocks added");
}

#[test]
fn looks_are_the_experiments_own_in_order() {
    let mut db = populated();
    for (id, n) in [("e1", 2), ("e1", 1), ("e3", 1)] {
        db.s.set_state(id, ExperimentState::Analysing, None)
            .unwrap();
        let after = AfterLook::Finish {
            state: ExperimentState::Decided,
            reason: None,
        };
        db.s.record_look(id, &look(n, n + 1), "{}", &after).unwrap();
    }
    let looks = db.s.looks("e1").unwrap();
    assert_eq!(looks.iter().map(|l| l.look).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(
        (looks[1].blocks, looks[1].decisions.as_str()),
        (3, r#"{"look":2}"#)
    );
    assert!((looks[1].nominal_alpha - 0.002).abs() < 1e-12);
    assert!(!looks[0].created_at.is_empty());
    assert_eq!(db.s.looks("e3").unwrap().len(), 1);
    assert!(db.s.looks("e2").unwrap().is_empty());
}

#[test]
fn latest_looks_are_the_last_look_of_each_experiment() {
    let mut db = populated();
    for (id, n) in [("e1", 1), ("e1", 3), ("e1", 2), ("e3", 1)] {
        db.s.set_state(id, ExperimentState::Analysing, None)
            .unwrap();
        let after = AfterLook::Finish {
            state: ExperimentState::Decided,
            reason: None,
        };
        db.s.record_look(id, &look(n, n + 1), "{}", &after).unwrap();
    }
    let latest = |id: &str| db.s.latest_look_of(id).unwrap();
    assert_eq!(latest("e1").map(|l| (l.look, l.blocks)), Some((3, 4)));
    assert_eq!(latest("e3").map(|l| l.look), Some(1));
    assert_eq!(latest("e2"), None);
}

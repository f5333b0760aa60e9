//! Recurrences in the store: the first execution and the recurrence in one write, a
//! re-submission that only goes through at the due time it was decided on (never twice),
//! cancellation, and the ended executions still to judge for a notify.

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
        replicates: 1,
        max_replicates: 1,
    }
}

fn one_block() -> (Vec<BlockRow>, Vec<NewRun>) {
    let order = vec!["baseline".to_string()];
    let runs = vec![NewRun {
        run_id: "b001-baseline".into(),
        block: 1,
        arm: "baseline".into(),
        position: 0,
    }];
    (vec![BlockRow { index: 1, order }], runs)
}

#[test]
fn a_recurrence_resubmits_once_per_due_time_and_stops_when_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(&dir.path().join("state.db")).unwrap();
    let (b, r) = one_block();
    let id = s
        .start_recurrence(
            &new_experiment("e1"),
            &b,
            &r,
            &NewRecurrence {
                name: "demo".into(),
                source_path: "/home/me/exp.yaml".into(),
                source_text: "name: demo\n".into(),
                interval_secs: 60,
                anchor_at: 1000,
                next_due_at: 1060,
                notify: vec!["cat".into()],
            },
        )
        .unwrap();
    let rows = s.recurrences(true).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].executions, rows[0].next_due_at, rows[0].last_state),
        (1, 1060, Some(ExperimentState::Planned))
    );
    assert_eq!(rows[0].notify, vec!["cat".to_string()]);
    assert_eq!(
        s.recurrence_text(id).unwrap().as_deref(),
        Some("name: demo\n")
    );
    // Decided on due time 1060: goes through once; the same decision again does nothing.
    assert!(
        s.resubmit(id, 1060, 1120, &new_experiment("e2"), &b, &r)
            .unwrap()
    );
    assert!(
        !s.resubmit(id, 1060, 1120, &new_experiment("e3"), &b, &r)
            .unwrap()
    );
    assert!(
        s.experiment("e3").unwrap().is_none(),
        "nothing of a refused one is written"
    );
    let row = &s.recurrences(false).unwrap()[0];
    assert_eq!((row.executions, row.next_due_at), (2, 1120));
    assert_eq!(row.last_experiment_id.as_deref(), Some("e2"));
    // Ended executions are listed for judging, each with the one before it, until judged.
    s.set_state("e1", ExperimentState::Decided, None).unwrap();
    s.set_state("e2", ExperimentState::Failed, None).unwrap();
    let ended = s.unjudged_executions().unwrap();
    assert_eq!(ended.len(), 2);
    assert_eq!(ended[1].previous_experiment_id.as_deref(), Some("e1"));
    assert_eq!(ended[0].previous_experiment_id, None);
    s.judge_execution(id, 1, None).unwrap();
    s.judge_execution(id, 2, Some(r#"{"outcome":"started"}"#))
        .unwrap();
    assert!(s.unjudged_executions().unwrap().is_empty());
    assert_eq!(
        s.recurrences(false).unwrap()[0].last_notify.as_deref(),
        Some(r#"{"outcome":"started"}"#)
    );
    // Cancelled: no re-submission goes through any more, and it is not active.
    assert_eq!(
        s.cancel_recurrence(id).unwrap(),
        Some(RecurrenceState::Active)
    );
    assert_eq!(
        s.cancel_recurrence(id).unwrap(),
        Some(RecurrenceState::Cancelled)
    );
    assert_eq!(s.cancel_recurrence(99).unwrap(), None);
    assert!(
        !s.resubmit(id, 1120, 1180, &new_experiment("e4"), &b, &r)
            .unwrap()
    );
    assert!(s.recurrences(true).unwrap().is_empty());
}

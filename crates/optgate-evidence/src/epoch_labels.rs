//! How one run's matched epochs are held against the others': epochs are compared by
//! position, so every complete run must print the same epoch labels (LAMMPS's steps
//! `100, 200`, OpenFOAM's times `0.005, 0.01`); a run that printed others, fewer or more
//! fails, its reason naming its output file and the first difference.

use std::collections::BTreeMap;

use crate::collect::{RunResult, RunStatus};

/// The labels a run printed, by position; a run whose metric carries no labels (traces,
/// a figure of merit) is labelled by its positions.
pub fn printed_labels(r: &RunResult) -> Vec<String> {
    if r.epoch_labels.is_empty() {
        r.epochs.keys().map(|e| e.to_string()).collect()
    } else {
        r.epoch_labels.clone()
    }
}

/// The labels most complete runs printed (ties: the longer list), against which the
/// others are held; None when no run completed.
pub fn expected_labels(runs: &[RunResult]) -> Option<Vec<String>> {
    let mut counts: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.status == RunStatus::Complete) {
        *counts.entry(printed_labels(r)).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(labels, n)| (*n, labels.len()))
        .map(|(labels, _)| labels)
}

/// The labels the report shows beside the positions: those the complete runs printed,
/// or none when they are the positions themselves (`1, 2, …`) or no run completed.
pub fn report_labels(runs: &[RunResult]) -> Vec<String> {
    let labels = expected_labels(runs).unwrap_or_default();
    let positions = (1..).map(|p: usize| p.to_string());
    if labels.iter().zip(positions).all(|(l, p)| *l == p) {
        return Vec::new();
    }
    labels
}

/// How `got` differs from `want` at its first difference, in words; None when equal.
pub fn first_difference(got: &[String], want: &[String]) -> Option<String> {
    let same = got.iter().zip(want).take_while(|(g, w)| g == w).count();
    let n = want.len();
    Some(match (got.get(same), want.get(same)) {
        (None, None) => return None,
        (Some(g), Some(w)) => format!(
            "its epoch {} is labelled {g} where the other runs print {w}",
            same + 1
        ),
        (None, Some(w)) => format!(
            "it printed {} epochs where the other runs print {n} (the next would be {w})",
            got.len()
        ),
        (Some(g), None) => format!(
            "it printed {} epochs where the other runs print {n} (from {g} on, the others print none)",
            got.len()
        ),
    })
}

/// Fails every complete run whose labels are not the expected ones: a run that stopped
/// early, or printed other epochs, cannot be matched epoch for epoch. `output_of` names a
/// run's metric output (by run id) for the reason.
pub fn check_epoch_labels(runs: &mut [RunResult], output_of: impl Fn(&str) -> String) {
    let Some(want) = expected_labels(runs) else {
        return;
    };
    for r in runs.iter_mut().filter(|r| r.status == RunStatus::Complete) {
        if let Some(diff) = first_difference(&printed_labels(r), &want) {
            r.labels_differ = true;
            r.status = RunStatus::Failed {
                reason: format!(
                    "{}: {diff}; every run must print the same epochs to be compared epoch by epoch",
                    output_of(&r.id)
                ),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_experiment::PlannedRun;

    fn run(id: &str, labels: &[&str]) -> RunResult {
        let planned = PlannedRun {
            id: id.into(),
            block: 1,
            replicate: 1,
            arm: "a".into(),
            position: 0,
        };
        let mut r = RunResult::empty(&planned, RunStatus::Complete);
        r.epochs = (1..=labels.len() as u32).map(|p| (p, 1.0)).collect();
        r.epoch_labels = labels.iter().map(|l| l.to_string()).collect();
        r
    }

    fn reasons(runs: &[RunResult]) -> Vec<(&str, String)> {
        runs.iter()
            .filter_map(|r| match &r.status {
                RunStatus::Failed { reason } => Some((r.id.as_str(), reason.clone())),
                _ => None,
            })
            .collect()
    }

    /// Step labels matched across runs: one run printing another step, one stopping
    /// early and one printing an epoch more each fail, naming their output file and the
    /// first difference; the runs printing the common labels stay complete.
    /// Planted bugs caught: labels not compared (only counts: `b` passes), the wrong run
    /// named, the first difference misplaced.
    #[test]
    fn runs_that_print_other_epochs_fail_naming_the_first_difference() {
        let steps = ["100", "200", "300"];
        let mut runs = vec![
            run("a", &steps),
            run("b", &["100", "250", "300"]),
            run("c", &steps),
            run("d", &["100", "200"]),
            run("e", &["100", "200", "300", "400"]),
        ];
        check_epoch_labels(&mut runs, |id| format!("runs/{id}/stdout"));
        let tail = "; every run must print the same epochs to be compared epoch by epoch";
        assert_eq!(
            reasons(&runs),
            [
                (
                    "b",
                    format!(
                        "runs/b/stdout: its epoch 2 is labelled 250 where the other runs print 200{tail}"
                    )
                ),
                (
                    "d",
                    format!(
                        "runs/d/stdout: it printed 2 epochs where the other runs print 3 (the next would be 300){tail}"
                    )
                ),
                (
                    "e",
                    format!(
                        "runs/e/stdout: it printed 4 epochs where the other runs print 3 (from 400 on, the others print none){tail}"
                    )
                ),
            ]
        );
    }

    /// Runs without labels (traces) are held to their positions, as epoch counts were.
    #[test]
    fn unlabelled_runs_compare_by_position() {
        let mut runs = vec![
            run("a", &["1", "2"]),
            run("b", &["1", "2"]),
            run("c", &["1", "2"]),
        ];
        for r in &mut runs {
            r.epoch_labels.clear();
        }
        runs[1].epochs.remove(&2);
        check_epoch_labels(&mut runs, |id| id.to_string());
        let got = reasons(&runs);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, "b");
    }
}

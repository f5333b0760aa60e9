//! The collection of a whole plan: every planned run's outcome read from its directory
//! (`collect::collect_run`), then the checks that hold runs against one another — the
//! epochs every run printed, the outputs of each block against its baseline's.

use std::collections::BTreeMap;

use optgate_experiment::{Experiment, Plan};

use crate::collect::{Collected, RunResult, RunStatus, collect_run, run_evidence};
use crate::layout::Layout;

/// Reads the outcome of every planned run. `not_applicable` maps arms that were not run
/// to the reason.
pub fn collect(
    exp: &Experiment,
    plan: &Plan,
    layout: &Layout,
    not_applicable: &BTreeMap<String, String>,
) -> Collected {
    let mut runs: Vec<RunResult> = plan
        .runs()
        .iter()
        .map(|r| match not_applicable.get(&r.arm) {
            Some(reason) => RunResult::empty(
                r,
                RunStatus::NotApplicable {
                    reason: reason.clone(),
                },
            ),
            None => collect_run(exp, r, &layout.run_dir(&r.id)),
        })
        .collect();
    let metric_file =
        crate::source::source_file(exp.metric.source, exp.metric.file.as_deref()).to_string();
    crate::epoch_labels::check_epoch_labels(&mut runs, |id| {
        layout.run_dir(id).join(&metric_file).display().to_string()
    });
    let correctness = crate::correctness::declared(exp)
        .then(|| crate::correctness::compare_with_baseline(exp, &run_evidence(&runs)));
    Collected { runs, correctness }
}

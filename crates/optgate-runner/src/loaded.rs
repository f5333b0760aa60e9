//! Which runs were measured under load (a node busier than its CPUs), pure over what their
//! manifests recorded: the load a run met, the blocks that had a loaded run, and the
//! report's one-line summary of them. Utilisation and the decisions without the loaded
//! blocks are judged on the same facts as the report's interference list.

use std::collections::BTreeSet;

use crate::node_checks::LOAD_FLAG_RATIO;
use crate::{Collected, RunResult, RunStatus};

/// The load a run was measured at, when it was above [`LOAD_FLAG_RATIO`] × the CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunLoad {
    /// The higher of the 1-minute load averages before and after the run (or, for a
    /// launched step, of its nodes' before the step, relative to their cores).
    pub load: f64,
    pub cpus: u32,
}

/// The load run `r` was measured at, when it was a load above its node's CPUs: the run's
/// own machine (before and after), or any node of its step (before the step).
pub fn run_load(r: &RunResult) -> Option<RunLoad> {
    let own = r.conditions.and_then(|c| {
        let load = c
            .load_avg_start
            .into_iter()
            .chain(c.load_avg_end)
            .reduce(f64::max)?;
        Some(RunLoad {
            load,
            cpus: c.online_cpus?,
        })
    });
    let nodes = r.nodes.iter().filter_map(|n| {
        Some(RunLoad {
            load: n.load_avg?,
            cpus: n.cores?,
        })
    });
    own.into_iter()
        .chain(nodes)
        .filter(|l| l.load > LOAD_FLAG_RATIO * f64::from(l.cpus))
        .max_by(|a, b| (a.load / f64::from(a.cpus)).total_cmp(&(b.load / f64::from(b.cpus))))
}

/// The complete runs, with their load when they were measured under load.
fn complete_runs(collected: &Collected) -> impl Iterator<Item = (&RunResult, Option<RunLoad>)> {
    collected
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Complete)
        .map(|r| (r, run_load(r)))
}

/// The blocks in which at least one complete run was measured under load.
pub fn loaded_blocks(collected: &Collected) -> BTreeSet<u32> {
    complete_runs(collected)
        .filter(|(_, l)| l.is_some())
        .map(|(r, _)| r.block)
        .collect()
}

/// How many of the complete runs were measured under load, and at what loads; None when
/// none was.
pub fn load_summary(collected: &Collected) -> Option<optgate_report::LoadSummary> {
    let runs: Vec<_> = complete_runs(collected).collect();
    let loads: Vec<RunLoad> = runs.iter().filter_map(|(_, l)| *l).collect();
    let first = loads.first()?;
    let cpus = loads
        .iter()
        .all(|l| l.cpus == first.cpus)
        .then_some(first.cpus);
    Some(optgate_report::LoadSummary {
        loaded_runs: loads.len(),
        runs: runs.len(),
        cpus,
        load_min: loads.iter().map(|l| l.load).fold(f64::INFINITY, f64::min),
        load_max: loads
            .iter()
            .map(|l| l.load)
            .fold(f64::NEG_INFINITY, f64::max),
        loaded_blocks: loaded_blocks(collected).into_iter().collect(),
    })
}

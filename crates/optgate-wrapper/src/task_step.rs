//! `optgate step`'s whole job on a compute node, around one launcher task: once per node
//! (the task with local id 0, or every task when no scheduler says) the arm's governor
//! applied where the launcher cannot, the governor in force recorded, the node's record
//! with its RAPL energy around the app; then the app run as the task (`step::run_step`:
//! passed through, signals forwarded, measured, recorded) and its exit passed on. A
//! failure to record is a warning for the caller to print and never stops or changes the
//! run. The CPUs this task may run on are read once, from `Cpus_allowed_list`.

use std::collections::BTreeSet;
use std::path::Path;

use crate::nodes::{EnergyGap, NodeRecord};
use crate::step::{RunDirRefused, StepError, check_run_dir, pass_on, run_step};
use crate::tasks::TaskIdentity;

/// Why `optgate step` could not do its job (a failure to record is only a warning).
#[derive(Debug, thiserror::Error)]
pub enum TaskStepError {
    #[error(transparent)]
    RunDir(#[from] RunDirRefused),
    #[error(transparent)]
    Step(#[from] StepError),
}

/// Wraps one task: never returns when the app ran (the process exits as the app did);
/// returns the shell's status (127, 126) when it could not start. `warn` gets each
/// failure to record, in words.
pub fn wrap_task(
    run_dir: &Path,
    attempt: u32,
    command: &[String],
    mut warn: impl FnMut(String),
) -> Result<i32, TaskStepError> {
    check_run_dir(run_dir, attempt)?;
    let identity = TaskIdentity::from_env(|k| std::env::var(k).ok());
    let first = identity.first_on_node();
    let root = optgate_probe::sysfs_root();
    let cpus = step_cpus();
    // Outside Slurm (no `--cpu-freq`), the first task of a node applies the arm's governor
    // through the experiment's helper before the governor in force is read.
    let governor = match (first, &cpus) {
        (false, _) => None,
        (true, Err(e)) => {
            warn(format!("the governor is not applied: {e}"));
            None
        }
        (true, Ok(cpus)) => begin_governor(run_dir, &identity, &root, cpus),
    };
    // The node's record is written before the app (so a step killed meanwhile still names
    // its node) and again after it, with the node's RAPL energy around the app.
    let node = match first {
        true => node_side_records(run_dir, attempt, &identity, &root, &cpus, &mut warn),
        false => None,
    };
    let energy_before = node.as_ref().and_then(|_| crate::energy::take(&root));
    let step = run_step(run_dir, attempt, command);
    if let Some(mut node) = node {
        node.set_energy(match &step {
            Ok(_) => crate::nodes::energy_between(
                energy_before.as_ref(),
                crate::energy::take(&root).as_ref(),
            ),
            Err(_) => Err(EnergyGap::AppNotRun),
        });
        if let Err(e) = crate::nodes::write_record(run_dir, attempt, &node) {
            warn(format!("cannot record the node's energy: {e}"));
        }
    }
    let outcome = match step {
        Ok(o) => o,
        // As a shell would: the launcher reports 127 (or 126), and no task record is
        // written, since no app ran.
        Err(StepError::Start { program, source }) => {
            warn(format!("cannot start {program}: {source}"));
            return Ok(crate::step::start_failure_status(&source));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(g) = governor
        && let Err(e) = crate::step_governor::write_record(run_dir, attempt, &g.finish())
    {
        warn(format!("cannot write the governor's record: {e}"));
    }
    if let Err(e) = &outcome.written {
        let dir = run_dir.display();
        warn(format!("cannot write the task's record under {dir}: {e}"));
    }
    pass_on(&outcome.record)
}

/// The first task of a node's records before the app: the governor in force, then the
/// node's record (returned, for its energy after the app).
fn node_side_records(
    run_dir: &Path,
    attempt: u32,
    identity: &TaskIdentity,
    root: &Path,
    cpus: &Result<BTreeSet<u32>, String>,
    warn: &mut impl FnMut(String),
) -> Option<NodeRecord> {
    let recorded = cpus
        .as_ref()
        .map_err(String::clone)
        .and_then(|cpus| record_governor_in_force(run_dir, root, cpus));
    if let Err(e) = recorded {
        warn(format!("cannot record the governor in force: {e}"));
    }
    match record_node(run_dir, attempt, identity, root, cpus) {
        Ok(node) => Some(node),
        Err(e) => {
            warn(format!("cannot record the node: {e}"));
            None
        }
    }
}

/// Applies the arm's governor on this node when the plan says so (see
/// `crate::step_governor`); None when there is nothing to apply or record.
fn begin_governor(
    run_dir: &Path,
    identity: &TaskIdentity,
    root: &Path,
    cpus: &BTreeSet<u32>,
) -> Option<crate::step_governor::AppliedGovernor> {
    use crate::step_governor::{begin, plan_for_run, restore_path};
    let plan = plan_for_run(run_dir, identity, root);
    let restore = restore_path(run_dir, &crate::run::hostname());
    begin(root, &plan, cpus, &restore)
}

/// The CPUs this process may run on (`Cpus_allowed_list`): the step's, not the node's.
fn step_cpus() -> Result<BTreeSet<u32>, String> {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .and_then(optgate_probe::parse_cpulist)
        })
        .ok_or_else(|| "cannot read Cpus_allowed_list of /proc/self/status".to_string())
}

/// Writes the governor in force on `cpus` to `RUN_DIR/step-governor.<host>`.
fn record_governor_in_force(
    run_dir: &Path,
    root: &Path,
    cpus: &BTreeSet<u32>,
) -> Result<(), String> {
    let governor = optgate_probe::governor::governor_in_force(root, cpus);
    let host = crate::run::hostname();
    if host.is_empty() || host.contains('/') || host.starts_with('.') {
        return Err(format!("host name {host:?} cannot name a file"));
    }
    let path = run_dir.join(format!("{}{host}", crate::run::STEP_GOVERNOR_PREFIX));
    // Tasks of one node may race; each writes a whole file under its own temporary name
    // (the process id's), fsynced and renamed into place.
    crate::manifest::write_atomic(&path, format!("{governor}\n").as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The node's record (`crate::nodes`): its names, the governor in force on this task's
/// CPUs, the load average and the node's online cores, written once per node before the
/// app (energy not yet measured); the record written.
fn record_node(
    run_dir: &Path,
    attempt: u32,
    identity: &TaskIdentity,
    root: &Path,
    cpus: &Result<BTreeSet<u32>, String>,
) -> Result<NodeRecord, String> {
    let cpus = cpus.as_ref().map_err(String::clone)?;
    let online = root.join("sys/devices/system/cpu/online");
    let record = NodeRecord {
        node: identity.node.clone(),
        host: crate::run::hostname(),
        governor: optgate_probe::governor::governor_in_force(root, cpus),
        load_avg: std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|t| crate::manifest::parse_loadavg(&t)),
        cores: std::fs::read_to_string(&online)
            .ok()
            .and_then(|t| optgate_probe::parse_cpulist(&t))
            .and_then(|c| u32::try_from(c.len()).ok()),
        energy_j: None,
        energy_unmeasured: None,
    };
    crate::nodes::write_record(run_dir, attempt, &record).map_err(|e| e.to_string())?;
    Ok(record)
}

//! Pre-flight checks: what must be true of an experiment on a node before its results can
//! be credited — no over-subscribed cores, thread counts that match the launcher, a governor
//! this user can actually change, the hardware a variant assumes. Pure functions over the
//! experiment and a probe of the node.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use optgate_experiment::Experiment;
use optgate_probe::governor::{Tunability, tunability};
use optgate_probe::{Probe, has_capability};

/// Thread-count variables of the common runtimes, checked against `cpus_per_task`.
pub const THREAD_VARS: [&str; 3] = ["OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Error,
    Warning,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub level: Level,
    pub arm: String,
    pub message: String,
}

/// The cores a node offers to a job: physical cores, or fewer when this process is
/// confined to a smaller CPU set (cgroup cpuset, `taskset`, an allocation).
pub fn usable_cores(probe: &Probe) -> u32 {
    let allowed = probe
        .allocation
        .as_ref()
        .and_then(|a| a.allowed_cpu_count)
        .unwrap_or(u32::MAX);
    probe.physical_cores.min(allowed).max(1)
}

/// Over-subscription: ranks per node × cpus per task against the node's cores, and the
/// thread-count variables against `cpus_per_task`. Errors become warnings when the
/// experiment allows over-subscription explicitly.
pub fn oversubscription(exp: &Experiment, cores_per_node: Option<u32>, node: &str) -> Vec<Finding> {
    let allow = exp.file.preflight.allow_oversubscription;
    let hard = if allow { Level::Warning } else { Level::Error };
    let mut out = Vec::new();
    for arm in &exp.arms {
        let r = &arm.resources;
        let per_node = r.tasks_per_node * r.cpus_per_task;
        if let Some(cores) = cores_per_node
            && per_node > cores
        {
            out.push(Finding {
                level: hard,
                arm: arm.name.clone(),
                message: format!(
                    "{} task(s) per node × {} cpus per task = {per_node} CPUs, but {node} has {cores} cores: over-subscribed",
                    r.tasks_per_node, r.cpus_per_task
                ),
            });
        }
        let mut any_thread_var = false;
        for var in THREAD_VARS {
            let Some(value) = arm.env.get(var) else {
                continue;
            };
            any_thread_var = true;
            match value.trim().parse::<u32>() {
                Ok(n) if n > r.cpus_per_task => out.push(Finding {
                    level: hard,
                    arm: arm.name.clone(),
                    message: format!(
                        "{var}={n} threads per task but cpus_per_task is {}: the threads would share {} CPU(s) (over-subscribed); set launcher.cpus_per_task to {n}",
                        r.cpus_per_task, r.cpus_per_task
                    ),
                }),
                Ok(0) => out.push(Finding {
                    level: Level::Error,
                    arm: arm.name.clone(),
                    message: format!("{var}=0 is not a thread count"),
                }),
                Ok(_) => {}
                Err(_) => out.push(Finding {
                    level: Level::Warning,
                    arm: arm.name.clone(),
                    message: format!("{var}={value:?} is not a plain number; its thread count cannot be checked"),
                }),
            }
        }
        if r.cpus_per_task > 1 && !any_thread_var {
            out.push(Finding {
                level: Level::Warning,
                arm: arm.name.clone(),
                message: format!(
                    "cpus_per_task is {} but no thread-count variable ({}) is set: the runtime may use one thread per rank (leaving {} CPUs idle) or every core of the node — only measured wall time tells",
                    r.cpus_per_task,
                    THREAD_VARS.join(", "),
                    r.cpus_per_task - 1
                ),
            });
        }
    }
    out
}

/// Arms that cannot be tried on this node, with the reason: a governor this user cannot
/// change, a capability the node lacks. The rest of the experiment goes on without them.
pub fn not_applicable(
    exp: &Experiment,
    probe: &Probe,
    sysfs_root: &Path,
) -> BTreeMap<String, String> {
    let node = probe
        .hostname
        .clone()
        .unwrap_or_else(|| "this node".to_string());
    let helper = exp.file.preflight.governor_helper.as_deref();
    let mut out = BTreeMap::new();
    for arm in &exp.arms {
        if let Some(missing) = arm.requires.iter().find(|f| !has_capability(probe, f)) {
            out.insert(
                arm.name.clone(),
                format!("missing hardware capability: `{missing}` is not available on {node}"),
            );
            continue;
        }
        if let Some(target) = &arm.governor {
            match tunability(sysfs_root, helper) {
                Tunability::NotTunable { reason } => {
                    out.insert(arm.name.clone(), reason);
                }
                Tunability::Tunable { .. } => {
                    let offered = probe
                        .cpufreq
                        .policies
                        .iter()
                        .all(|p| p.available_governors.iter().any(|g| g == target));
                    if !offered {
                        out.insert(
                            arm.name.clone(),
                            format!("governor `{target}` is not offered by cpufreq on {node}"),
                        );
                    }
                }
            }
        }
    }
    out
}

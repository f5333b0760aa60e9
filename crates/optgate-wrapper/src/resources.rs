//! What a run used — CPU, memory, energy — as its manifest and its task totals record it.

use serde::{Deserialize, Serialize};

/// The resources one run used. CPU time and memory come from `wait4` on the run's wrapper
/// (its whole process tree, as far as the processes were waited for) — under a launcher,
/// the totals of its `tasks` (CPU summed, RSS the largest task's; see
/// [`crate::tasks::totals`]); energy from RAPL
/// counters read before and after (see [`crate::energy`]) — the node's package energy,
/// so it includes whatever else ran on the node meanwhile.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    /// The largest resident set of one process of the tree, KiB.
    pub max_rss_kib: u64,
    /// Joules, from [`EnergySource`]; None where no counter could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_source: Option<EnergySource>,
}

impl Resources {
    /// User plus system CPU seconds: the core-seconds the run occupied.
    pub fn cpu_s(&self) -> f64 {
        self.cpu_user_s + self.cpu_system_s
    }
}

/// Where an energy figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// The node's RAPL package counters (`/sys/class/powercap/intel-rapl:N`).
    Rapl,
}

/// How a run without a launcher used the cores it was given, measured by the wrapper the
/// way `optgate step` measures a task (its [`crate::tasks::TaskRecord`]'s `cpus_allowed`,
/// `threads_max`, `cpu_s`, `wall_s`), so that utilisation means the same on every backend.
/// The manifest's `core_use`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreUse {
    /// The CPUs the run may run on: the wrapper's affinity mask (`sched_getaffinity`),
    /// which the app inherits — how many, and which (`0-3,8`).
    pub cpus_allowed: u32,
    pub cpus_allowed_list: String,
    /// The most threads one process of the run's tree had at any sample (every
    /// [`crate::threads::THREAD_SAMPLE_INTERVAL`]); None when no sample saw the run.
    pub threads_max: Option<u32>,
    /// The median over the samples of the tree's runnable threads (running or waiting for
    /// a CPU): the cores the run asked for, whatever the node's load let it have.
    #[serde(default)]
    pub runnable_threads: Option<f64>,
    /// User plus system CPU seconds of the tree (`wait4`), and the run's wall seconds.
    pub cpu_s: f64,
    pub wall_s: f64,
}

impl CoreUse {
    /// The record of a run given `cpus`, that used `usage` over `wall_s` with `threads`
    /// sampled.
    pub fn of(
        cpus: &[usize],
        usage: &crate::process::ChildUsage,
        threads: Option<crate::threads::SampledThreads>,
        wall_s: f64,
    ) -> CoreUse {
        CoreUse {
            cpus_allowed: u32::try_from(cpus.len()).unwrap_or(u32::MAX),
            cpus_allowed_list: crate::threads::format_cpu_list(cpus),
            threads_max: threads.and_then(|t| t.threads_max),
            runnable_threads: threads.and_then(|t| t.runnable_median),
            cpu_s: usage.user_s + usage.system_s,
            wall_s,
        }
    }
}

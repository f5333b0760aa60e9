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

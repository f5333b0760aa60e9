//! Reading cpufreq: for each online CPU its policy (shared by the CPUs that switch clock
//! together), current and available governors, driver, limits, and whether this process
//! could write the governor.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::cpulist::format_cpulist;
use crate::fsread::{may_write, read_opt, read_u64, under};
use crate::types::{Cpufreq, CpufreqPolicy};

/// The cpufreq directory of one CPU (`…/cpuN/cpufreq`).
pub fn cpu_cpufreq_dir(root: &Path, cpu: u32) -> PathBuf {
    under(root, &format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq"))
}

/// Groups the online CPUs by cpufreq policy. `cpuN/cpufreq` is a symlink to
/// `../cpufreq/policyM` on current kernels; resolving it finds CPUs that share one.
/// On kernels where it is a plain directory each CPU is its own group. CPUs without
/// cpufreq are returned apart.
pub fn policy_groups(
    root: &Path,
    online: &BTreeSet<u32>,
) -> (BTreeMap<PathBuf, BTreeSet<u32>>, BTreeSet<u32>) {
    let mut groups: BTreeMap<PathBuf, BTreeSet<u32>> = BTreeMap::new();
    let mut without = BTreeSet::new();
    for &cpu in online {
        let dir = cpu_cpufreq_dir(root, cpu);
        if !dir.is_dir() {
            without.insert(cpu);
            continue;
        }
        let key = dir.canonicalize().unwrap_or(dir);
        groups.entry(key).or_default().insert(cpu);
    }
    (groups, without)
}

fn read_policy(dir: &Path, cpus: &BTreeSet<u32>) -> CpufreqPolicy {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.starts_with("policy"))
        .map(str::to_string)
        .unwrap_or_else(|| format!("cpu{}", cpus.first().copied().unwrap_or(0)));
    let governor_path = dir.join("scaling_governor");
    CpufreqPolicy {
        name,
        cpus: format_cpulist(cpus),
        governor: read_opt(&governor_path).filter(|g| !g.is_empty()),
        available_governors: read_opt(&dir.join("scaling_available_governors"))
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default(),
        driver: read_opt(&dir.join("scaling_driver")).filter(|d| !d.is_empty()),
        min_khz: read_u64(&dir.join("cpuinfo_min_freq")),
        max_khz: read_u64(&dir.join("cpuinfo_max_freq")),
        scaling_min_khz: read_u64(&dir.join("scaling_min_freq")),
        scaling_max_khz: read_u64(&dir.join("scaling_max_freq")),
        base_khz: read_u64(&dir.join("base_frequency")),
        governor_writable: governor_path.is_file() && may_write(&governor_path),
    }
}

/// Reads cpufreq for the online CPUs.
pub fn read_cpufreq(root: &Path, online: &BTreeSet<u32>) -> Cpufreq {
    let (groups, without) = policy_groups(root, online);
    let mut policies: Vec<CpufreqPolicy> = groups
        .iter()
        .map(|(dir, cpus)| read_policy(dir, cpus))
        .collect();
    // Order by first CPU so the list reads like the CPU numbering, not like paths
    // (policy10 would otherwise sort before policy2).
    policies.sort_by_key(|p| {
        crate::cpulist::parse_cpulist(&p.cpus)
            .and_then(|s| s.first().copied())
            .unwrap_or(u32::MAX)
    });
    let governors: BTreeSet<String> = policies.iter().filter_map(|p| p.governor.clone()).collect();
    let drivers: BTreeSet<String> = policies.iter().filter_map(|p| p.driver.clone()).collect();
    Cpufreq {
        present: !policies.is_empty(),
        cpus_without_cpufreq: format_cpulist(&without),
        governors: governors.into_iter().collect(),
        drivers: drivers.into_iter().collect(),
        governor_writable: !policies.is_empty() && policies.iter().all(|p| p.governor_writable),
        policies,
    }
}

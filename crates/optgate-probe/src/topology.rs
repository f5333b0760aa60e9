//! CPU topology from sysfs: which logical CPUs are online, which package, die and core
//! each belongs to, and from that the counts of sockets, physical cores and threads,
//! including hybrid parts whose cores are not all alike.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::cpuinfo::Cpuinfo;
use crate::cpulist::{format_cpulist, parse_cpulist};
use crate::error::ProbeError;
use crate::fsread::{numbered_entries, read_opt, read_text, read_u64, under};
use crate::types::CoreKind;

/// Where one online logical CPU sits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuPlace {
    /// Logical CPU id.
    pub cpu: u32,
    /// `physical_package_id` (-1 on firmware that does not say).
    pub package: i64,
    /// `die_id`, where the kernel has it.
    pub die: Option<i64>,
    /// `core_id`, unique only within a package (and die).
    pub core_id: i64,
    /// `thread_siblings_list`: the CPUs the kernel says share this CPU's core.
    pub siblings: BTreeSet<u32>,
}

/// The online CPUs: `sys/devices/system/cpu/online`, or, when that file is missing,
/// every `cpuN` directory whose own `online` file does not say 0.
pub fn online_cpus(root: &Path) -> Result<BTreeSet<u32>, ProbeError> {
    let cpu_dir = under(root, "/sys/devices/system/cpu");
    let online_path = cpu_dir.join("online");
    if let Some(text) = read_opt(&online_path) {
        return parse_cpulist(&text).ok_or_else(|| ProbeError::Parse {
            path: online_path,
            detail: format!("not a CPU list: {text:?}"),
        });
    }
    let mut cpus = BTreeSet::new();
    for (n, dir) in numbered_entries(&cpu_dir, "cpu")? {
        // cpu0 usually has no `online` file because it cannot be taken offline.
        if read_opt(&dir.join("online")).as_deref() != Some("0") {
            cpus.insert(n);
        }
    }
    Ok(cpus)
}

fn read_i64(path: &Path) -> Option<i64> {
    read_opt(path)?.parse().ok()
}

/// Reads the topology of each online CPU. Where sysfs has no topology directory (some
/// containers hide it), the `physical id`/`core id` of `/proc/cpuinfo` stand in, and
/// each CPU counts as its own sibling set.
pub fn places(root: &Path, online: &BTreeSet<u32>, cpuinfo: &Cpuinfo) -> Vec<CpuPlace> {
    let cpu_dir = under(root, "/sys/devices/system/cpu");
    let mut out = Vec::new();
    for &cpu in online {
        let topo = cpu_dir.join(format!("cpu{cpu}/topology"));
        let from_cpuinfo = cpuinfo.processors.iter().find(|p| p.index == cpu);
        let package = read_i64(&topo.join("physical_package_id"))
            .or_else(|| from_cpuinfo.and_then(|p| p.physical_id).map(i64::from))
            .unwrap_or(-1);
        let core_id = read_i64(&topo.join("core_id"))
            .or_else(|| from_cpuinfo.and_then(|p| p.core_id).map(i64::from))
            .unwrap_or(i64::from(cpu));
        let die = read_i64(&topo.join("die_id"));
        let siblings = read_opt(&topo.join("thread_siblings_list"))
            .or_else(|| read_opt(&topo.join("core_cpus_list")))
            .and_then(|s| parse_cpulist(&s))
            .map(|s| s.intersection(online).copied().collect::<BTreeSet<u32>>())
            .filter(|s| s.contains(&cpu))
            .unwrap_or_else(|| BTreeSet::from([cpu]));
        out.push(CpuPlace {
            cpu,
            package,
            die,
            core_id,
            siblings,
        });
    }
    out
}

/// The identity of a physical core.
///
/// `(package, core_id)` alone is not enough: on the 4-socket Opteron 6276 fixture the two
/// dies of a package both number their cores 0-7, and no `die_id` exists on that kernel.
/// The sibling set separates them. The core id in turn separates CPUs the kernel lists
/// as siblings but gives different core ids: Bulldozer compute units pair two integer
/// cores that way, and hwloc (and so Slurm) counts them as two cores, as we do.
type CoreKey = (i64, Option<i64>, i64, Vec<u32>);

fn core_key(p: &CpuPlace) -> CoreKey {
    (
        p.package,
        p.die,
        p.core_id,
        p.siblings.iter().copied().collect(),
    )
}

/// Counts derived from the places of the online CPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Distinct packages.
    pub sockets: u32,
    /// Distinct cores.
    pub physical_cores: u32,
    /// Online CPUs.
    pub hardware_threads: u32,
    /// Most threads on one core.
    pub threads_per_core: u32,
}

/// Counts sockets, cores and threads.
pub fn count(places: &[CpuPlace]) -> Counts {
    let sockets: BTreeSet<i64> = places.iter().map(|p| p.package).collect();
    let mut cores: BTreeMap<CoreKey, u32> = BTreeMap::new();
    for p in places {
        *cores.entry(core_key(p)).or_default() += 1;
    }
    Counts {
        sockets: sockets.len() as u32,
        physical_cores: cores.len() as u32,
        hardware_threads: places.len() as u32,
        threads_per_core: cores.values().copied().max().unwrap_or(0),
    }
}

/// Finds the kinds of cores on a hybrid part, trying in turn: Intel's hybrid PMU
/// directories (`/sys/devices/cpu_core`, `cpu_atom`), distinct Arm core names, and
/// distinct cpufreq `base_frequency` (what hwloc uses on intel_pstate laptops whose
/// kernels lack the PMU directories, such as the i7-1370P fixture). `cpu_capacity` is
/// not used: on the GB10 it takes five values over two core types. Returns an empty
/// list when every core is alike.
pub fn core_kinds(root: &Path, places: &[CpuPlace], cpuinfo: &Cpuinfo) -> Vec<CoreKind> {
    let online: BTreeSet<u32> = places.iter().map(|p| p.cpu).collect();
    let mut groups = kinds_by_hybrid_pmu(root, &online);
    if groups.is_empty() {
        groups = kinds_by_arm_model(cpuinfo, &online);
    }
    if groups.is_empty() {
        groups = kinds_by_base_frequency(root, &online);
    }

    let cpu_dir = under(root, "/sys/devices/system/cpu");
    groups
        .into_iter()
        .map(|(name, basis, cpus)| {
            let members: Vec<CpuPlace> = places
                .iter()
                .filter(|p| cpus.contains(&p.cpu))
                .cloned()
                .collect();
            let counts = count(&members);
            let freq = |file: &str| {
                cpus.iter()
                    .filter_map(|c| read_u64(&cpu_dir.join(format!("cpu{c}/cpufreq/{file}"))))
                    .max()
            };
            CoreKind {
                name,
                basis: basis.to_string(),
                cpus: format_cpulist(&cpus),
                physical_cores: counts.physical_cores,
                hardware_threads: counts.hardware_threads,
                max_khz: freq("cpuinfo_max_freq"),
                base_khz: freq("base_frequency"),
            }
        })
        .collect()
}

/// One kind of core found: its name, the basis it was told apart by, and its CPUs.
type KindGroup = (String, &'static str, BTreeSet<u32>);

/// Performance and efficiency cores from Intel's hybrid PMU directories, when both exist
/// and hold online CPUs.
fn kinds_by_hybrid_pmu(root: &Path, online: &BTreeSet<u32>) -> Vec<KindGroup> {
    let pmu = |name: &str| {
        read_opt(&under(root, &format!("/sys/devices/{name}/cpus")))
            .and_then(|s| parse_cpulist(&s))
            .map(|s| s.intersection(online).copied().collect::<BTreeSet<u32>>())
            .filter(|s| !s.is_empty())
    };
    let mut groups = Vec::new();
    if let (Some(p), Some(e)) = (pmu("cpu_core"), pmu("cpu_atom")) {
        groups.push(("performance".to_string(), "pmu", p));
        groups.push(("efficiency".to_string(), "pmu", e));
    }
    groups
}

/// One kind per distinct Arm core name among the online CPUs, when there is more than one.
fn kinds_by_arm_model(cpuinfo: &Cpuinfo, online: &BTreeSet<u32>) -> Vec<KindGroup> {
    let mut by_model: Vec<(String, BTreeSet<u32>)> = Vec::new();
    for p in &cpuinfo.processors {
        if !online.contains(&p.index) || p.arm_part.is_none() {
            continue;
        }
        let Some(model) = p.model() else { continue };
        match by_model.iter_mut().find(|(m, _)| *m == model) {
            Some((_, set)) => {
                set.insert(p.index);
            }
            None => by_model.push((model, BTreeSet::from([p.index]))),
        }
    }
    if by_model.len() > 1 {
        by_model.into_iter().map(|(m, s)| (m, "midr", s)).collect()
    } else {
        Vec::new()
    }
}

/// One kind per distinct cpufreq `base_frequency`, highest first, when there is more
/// than one; two are named performance and efficiency.
fn kinds_by_base_frequency(root: &Path, online: &BTreeSet<u32>) -> Vec<KindGroup> {
    let cpu_dir = under(root, "/sys/devices/system/cpu");
    let mut by_base: BTreeMap<u64, BTreeSet<u32>> = BTreeMap::new();
    for &cpu in online {
        if let Some(base) = read_u64(&cpu_dir.join(format!("cpu{cpu}/cpufreq/base_frequency"))) {
            by_base.entry(base).or_default().insert(cpu);
        }
    }
    let mut groups = Vec::new();
    if by_base.len() > 1 {
        let n = by_base.len();
        // Highest base frequency first: those are the performance cores.
        for (rank, (base, set)) in by_base.into_iter().rev().enumerate() {
            let name = match (n, rank) {
                (2, 0) => "performance".to_string(),
                (2, _) => "efficiency".to_string(),
                _ => format!("base {} MHz", base / 1000),
            };
            groups.push((name, "base_frequency", set));
        }
    }
    groups
}

/// Lists the `cpuN` directories (to tell a wrong root from a machine without CPUs).
pub fn require_cpu_dir(root: &Path) -> Result<(), ProbeError> {
    numbered_entries(&under(root, "/sys/devices/system/cpu"), "cpu").map(|_| ())
}

/// Reads `proc/cpuinfo` under the root.
pub fn read_cpuinfo(root: &Path) -> Result<Cpuinfo, ProbeError> {
    let text = read_text(&under(root, "/proc/cpuinfo"))?;
    Ok(crate::cpuinfo::parse_cpuinfo(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(cpu: u32, package: i64, core_id: i64, siblings: &[u32]) -> CpuPlace {
        CpuPlace {
            cpu,
            package,
            die: None,
            core_id,
            siblings: siblings.iter().copied().collect(),
        }
    }

    #[test]
    fn smt_pairs_count_once() {
        // Two SMT threads of one core, numbered far apart as Intel does.
        let places = vec![
            place(0, 0, 0, &[0, 2]),
            place(1, 0, 1, &[1, 3]),
            place(2, 0, 0, &[0, 2]),
            place(3, 0, 1, &[1, 3]),
        ];
        let c = count(&places);
        assert_eq!(
            (
                c.sockets,
                c.physical_cores,
                c.hardware_threads,
                c.threads_per_core
            ),
            (1, 2, 4, 2)
        );
    }

    #[test]
    fn repeated_core_ids_in_one_package_are_distinct_cores() {
        // Two dies of one package, both numbering cores from 0, no die_id.
        let places = vec![place(0, 0, 0, &[0]), place(8, 0, 0, &[8])];
        assert_eq!(count(&places).physical_cores, 2);
    }

    #[test]
    fn siblings_with_distinct_core_ids_are_distinct_cores() {
        // Bulldozer compute unit: listed as siblings, but two core ids.
        let places = vec![place(0, 0, 0, &[0, 1]), place(1, 0, 1, &[0, 1])];
        let c = count(&places);
        assert_eq!((c.physical_cores, c.threads_per_core), (2, 1));
    }
}

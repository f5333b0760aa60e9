//! The measured facts the rules read: the node's probe, the baseline's utilisation per
//! task, its environment, launcher, declared build, linked libraries and trace shares.
//! Plain data, built by the caller from its measurements (`Facts::node_from_probe`).

use std::collections::BTreeMap;

use optgate_probe::Probe;
use optgate_probe::governor::Tunability;

/// Everything a rule may look at.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
    pub node: NodeFacts,
    /// The baseline's tasks, medians over its runs (None: nothing measured them).
    pub usage: Option<Usage>,
    /// The baseline arm's effective environment.
    pub env: BTreeMap<String, String>,
    /// The launcher the runs start under (None: local runs, no launcher).
    pub launcher: Option<Launcher>,
    /// The declared build's command as the file writes it (None: a prebuilt binary).
    pub build: Option<String>,
    /// Whether the file declares a `correctness:` check.
    pub has_correctness: bool,
    /// Shared libraries of the app's binary (`ldd`), by file name.
    pub linked: Vec<String>,
    /// Seconds per category from a DFTracer trace of the baseline (None: no trace).
    pub trace: Option<TraceTimes>,
}

/// The node's facts the rules use, from optgate-probe.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeFacts {
    pub hostname: String,
    pub physical_cores: u32,
    pub numa_nodes: u32,
    /// The vector and matrix extensions found, by name (`AVX2`, `AVX-512 (avx512f)`, …).
    pub isa: Vec<String>,
    /// The current governors (distinct).
    pub governors: Vec<String>,
    /// Whether this process can change the governor, and why not.
    pub governor_tunability: Tunability,
    /// Whether the node has cpufreq at all.
    pub cpufreq: bool,
}

/// What the baseline's tasks used: cores allotted and kept busy per task, threads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    pub cores_allotted: f64,
    pub cores_used: f64,
    pub threads: Option<f64>,
    /// Runnable threads, the median of the samples' (None: not sampled).
    pub runnable_threads: Option<f64>,
    /// Most of the baseline's tasks were measured under load.
    pub under_load: bool,
}

impl Usage {
    /// The figures optgate-report judges a finding on.
    pub fn figures(&self) -> optgate_report::utilisation::CoreFigures {
        optgate_report::utilisation::CoreFigures {
            allotted: self.cores_allotted,
            used: self.cores_used,
            threads: self.threads,
            runnable: self.runnable_threads,
            loaded: self.under_load,
        }
    }
}

/// The scheduler whose launcher starts the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LauncherKind {
    Slurm,
    Flux,
}

/// The launch shape of the baseline under a launcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launcher {
    pub kind: LauncherKind,
    pub cpus_per_task: u32,
}

/// Traced seconds per category (DFTracer's `cat`, grouped into the checklist's areas).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct TraceTimes {
    pub io_s: f64,
    pub communication_s: f64,
    pub memory_s: f64,
    pub compute_s: f64,
}

/// The checklist area a DFTracer category's time counts toward; None for categories that
/// say nothing of where the time went (DFTracer's own records, configuration, the
/// benchmark's outer regions, which nest the others).
pub fn area_of_category(category: &str) -> Option<optgate_experiment::checklist::Area> {
    use optgate_experiment::checklist::Area;
    let c = category.to_ascii_lowercase();
    let is = |names: &[&str]| names.iter().any(|n| c == *n);
    if is(&[
        "posix",
        "stdio",
        "io",
        "storage",
        "reader",
        "data_loader",
        "checkpoint",
        "hdf5",
        "mpiio",
    ]) {
        Some(Area::Io)
    } else if is(&["mpi", "comm", "communication", "nccl", "rccl", "collective"]) {
        Some(Area::Communication)
    } else if is(&["memory", "mem", "memcpy", "cuda_memcpy"]) {
        Some(Area::Memory)
    } else if is(&["compute", "cpu", "gpu", "kernel"]) {
        Some(Area::Compute)
    } else {
        None
    }
}

impl TraceTimes {
    /// Seconds per category (a report's breakdown row) grouped into the four areas; None
    /// when no category maps to one.
    pub fn from_categories<'a>(
        categories: impl IntoIterator<Item = (&'a str, f64)>,
    ) -> Option<TraceTimes> {
        use optgate_experiment::checklist::Area;
        let mut t = TraceTimes::default();
        let mut any = false;
        for (category, seconds) in categories {
            let slot = match area_of_category(category) {
                Some(Area::Io) => &mut t.io_s,
                Some(Area::Communication) => &mut t.communication_s,
                Some(Area::Memory) => &mut t.memory_s,
                Some(Area::Compute) => &mut t.compute_s,
                None => continue,
            };
            *slot += seconds.max(0.0);
            any = true;
        }
        any.then_some(t)
    }

    /// Each area's share of the traced time, in canonical order (0 for all when empty).
    pub fn shares(&self) -> [(optgate_experiment::checklist::Area, f64); 4] {
        use optgate_experiment::checklist::Area;
        let total = self.io_s + self.communication_s + self.memory_s + self.compute_s;
        let share = |s: f64| if total > 0.0 { s / total } else { 0.0 };
        [
            (Area::Io, share(self.io_s)),
            (Area::Communication, share(self.communication_s)),
            (Area::Memory, share(self.memory_s)),
            (Area::Compute, share(self.compute_s)),
        ]
    }
}

impl NodeFacts {
    /// The facts of `probe`, with the governor's `tunability` as optgate-probe judged it.
    pub fn from_probe(probe: &Probe, governor_tunability: Tunability) -> NodeFacts {
        let i = &probe.isa;
        let mut isa: Vec<String> = [
            (i.avx2, "AVX2"),
            (i.fma, "FMA"),
            (i.avx_vnni, "AVX-VNNI"),
            (i.neon, "NEON"),
            (i.sve, "SVE"),
            (i.sve2, "SVE2"),
            (i.sme, "SME"),
        ]
        .into_iter()
        .filter(|(has, _)| *has)
        .map(|(_, name)| name.to_string())
        .collect();
        if !i.avx512.is_empty() {
            isa.push(format!("AVX-512 ({})", i.avx512.join(", ")));
        }
        if i.amx {
            isa.push(format!("AMX ({})", i.amx_types.join(", ")));
        }
        NodeFacts {
            hostname: probe.hostname.clone().unwrap_or_else(|| "this node".into()),
            physical_cores: probe.physical_cores,
            numa_nodes: probe.numa_nodes,
            isa,
            governors: probe.cpufreq.governors.clone(),
            governor_tunability,
            cpufreq: probe.cpufreq.present,
        }
    }
}

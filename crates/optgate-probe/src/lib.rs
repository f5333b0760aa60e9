//! optgate-probe: the facts of the node optgate runs on — CPU model, topology, ISA
//! flags, NUMA, memory, cpufreq, GPUs and scheduler allocation — and restorable CPU
//! governor control ([`governor`]), for pre-flight checks and run provenance.
//!
//! [`probe`] reads a root directory's `proc/` and `sys/` (a captured tree or `/`);
//! [`probe_live`] adds what only the running system has. The JSON form of [`Probe`] is
//! documented in `PROBE_JSON.md` beside this crate's `Cargo.toml`.

mod allocation;
mod cpufreq;
mod cpuinfo;
mod cpulist;
mod error;
mod filekind;
mod fsread;
pub mod governor;
mod gpu;
mod isa;
mod memory;
mod render;
mod topology;
mod types;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

pub use allocation::allocation_from_env;
pub use cpuinfo::{Cpuinfo, ProcessorInfo, arm_part_name, parse_cpuinfo};
pub use cpulist::{format_cpulist, parse_cpulist};
pub use error::ProbeError;
pub use filekind::file_kind;
pub use gpu::{GpuParseError, parse_nvidia_smi, parse_rocm_smi};
pub use isa::has_capability;
pub use render::render_text;
pub use types::{
    Allocation, CoreKind, Cpufreq, CpufreqPolicy, Gpu, IsaSummary, NumaNode, Probe, SCHEMA_VERSION,
};

use fsread::{read_opt, under};

/// How long a GPU vendor tool may run before it is killed.
const GPU_TOOL_LIMIT: Duration = Duration::from_secs(20);

/// A field of the `hwloc-nofile-info` file that `hwloc-gather-topology` leaves in
/// captured trees in place of what lives outside `/proc` and `/sys` (host name, kernel).
fn hwloc_info(root: &Path, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(under(root, "/proc/hwloc-nofile-info")).ok()?;
    text.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The host name of the system under `root`: the kernel's, `/etc/hostname`, or what a
/// captured tree recorded.
pub(crate) fn node_name(root: &Path) -> Option<String> {
    read_opt(&under(root, "/proc/sys/kernel/hostname"))
        .or_else(|| read_opt(&under(root, "/etc/hostname")))
        .filter(|h| !h.is_empty())
        .or_else(|| hwloc_info(root, "HostName"))
}

fn kernel_release(root: &Path) -> Option<String> {
    read_opt(&under(root, "/proc/sys/kernel/osrelease"))
        .filter(|r| !r.is_empty())
        .or_else(|| {
            // "Linux version 6.1.0-13-amd64 (debian-kernel@…) …"
            let v = read_opt(&under(root, "/proc/version"))?;
            let mut words = v.split_whitespace();
            (words.next() == Some("Linux") && words.next() == Some("version"))
                .then(|| words.next().map(str::to_string))
                .flatten()
        })
        .or_else(|| hwloc_info(root, "OSRelease"))
}

/// Reads the facts of the system whose `proc/` and `sys/` are under `root` (`/` for
/// this machine, or an unpacked capture of another one).
///
/// Fails only when `proc/cpuinfo` or the `sys/devices/system/cpu` directory cannot be
/// read, which means `root` is not such a tree. Anything else that is missing leaves
/// its field empty and, where that is surprising, a line in [`Probe::notes`]. GPUs and
/// the scheduler allocation are not looked at here; see [`probe_live`].
pub fn probe(root: &Path) -> Result<Probe, ProbeError> {
    let cpuinfo = topology::read_cpuinfo(root)?;
    topology::require_cpu_dir(root)?;
    let mut notes = Vec::new();

    let online = topology::online_cpus(root)?;
    let places = topology::places(root, &online, &cpuinfo);
    let counts = topology::count(&places);
    let core_kinds = topology::core_kinds(root, &places, &cpuinfo);

    let flags: BTreeSet<String> = cpuinfo.common_flags();
    if cpuinfo.processors.is_empty() {
        notes.push(format!(
            "{} lists no processor",
            under(root, "/proc/cpuinfo").display()
        ));
    }
    let models = cpuinfo.models();
    let cpu_model = (!models.is_empty()).then(|| models.join(" + "));
    let cpu_vendor = cpuinfo.processors.iter().find_map(|p| p.vendor());

    let numa = memory::numa_nodes(root)?;
    let meminfo_path = under(root, "/proc/meminfo");
    let memory_total_bytes = std::fs::read_to_string(&meminfo_path)
        .ok()
        .and_then(|t| memory::meminfo_bytes(&t, "MemTotal"));
    if memory_total_bytes.is_none() {
        notes.push(format!("no MemTotal in {}", meminfo_path.display()));
    }

    let cpufreq = cpufreq::read_cpufreq(root, &online);

    Ok(Probe {
        schema_version: SCHEMA_VERSION,
        root: root.display().to_string(),
        live: false,
        hostname: node_name(root),
        kernel: kernel_release(root),
        arch: cpuinfo.arch().or_else(|| hwloc_info(root, "Architecture")),
        cpu_vendor,
        cpu_model,
        sockets: counts.sockets,
        physical_cores: counts.physical_cores,
        hardware_threads: counts.hardware_threads,
        threads_per_core: counts.threads_per_core,
        online_cpus: format_cpulist(&online),
        core_kinds,
        numa_nodes: numa.len() as u32,
        numa,
        isa: isa::summarize(&flags),
        flags: flags.into_iter().collect(),
        memory_total_bytes,
        cpufreq,
        allocation: None,
        gpus: Vec::new(),
        gpu_tools_found: Vec::new(),
        notes,
    })
}

impl Probe {
    /// A record with no facts, for when even `/proc/cpuinfo` cannot be read.
    fn empty(root: &str) -> Probe {
        Probe {
            schema_version: SCHEMA_VERSION,
            root: root.to_string(),
            live: false,
            hostname: None,
            kernel: None,
            arch: None,
            cpu_vendor: None,
            cpu_model: None,
            sockets: 0,
            physical_cores: 0,
            hardware_threads: 0,
            threads_per_core: 0,
            online_cpus: String::new(),
            core_kinds: Vec::new(),
            numa_nodes: 0,
            numa: Vec::new(),
            flags: Vec::new(),
            isa: IsaSummary::default(),
            memory_total_bytes: None,
            cpufreq: Cpufreq::default(),
            allocation: None,
            gpus: Vec::new(),
            gpu_tools_found: Vec::new(),
            notes: Vec::new(),
        }
    }
}

/// The variable that points optgate at a copied `/proc`+`/sys` tree instead of `/` (tests:
/// a fake writable cpufreq tree, RAPL counters).
pub const SYSFS_ROOT_VAR: &str = "OPTGATE_SYSFS_ROOT";

/// The root the node's facts, its governors and its energy counters are read under: `/`,
/// or `$OPTGATE_SYSFS_ROOT`. Every part of optgate that touches them asks here.
pub fn sysfs_root() -> std::path::PathBuf {
    std::env::var_os(SYSFS_ROOT_VAR)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("/"))
}

/// Probes the running system: [`probe`] of `/`, plus host name, kernel and a memory
/// cross-check from `sysinfo`, the scheduler allocation from the environment and
/// `/proc/self/status`, and GPUs from vendor tools on `PATH`. Never fails: what cannot
/// be found is left empty and said in [`Probe::notes`].
pub fn probe_live() -> Probe {
    let mut p = match probe(Path::new("/")) {
        Ok(p) => p,
        Err(e) => {
            let mut p = Probe::empty("/");
            p.notes.push(format!("hardware facts unavailable: {e}"));
            p
        }
    };
    p.live = true;

    if let Some(h) = sysinfo::System::host_name().filter(|h| !h.is_empty()) {
        p.hostname = Some(h);
    }
    if let Some(k) = sysinfo::System::kernel_version().filter(|k| !k.is_empty()) {
        p.kernel = Some(k);
    }
    if p.arch.is_none() {
        p.arch = Some(std::env::consts::ARCH.to_string());
    }
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    let sysinfo_total = sys.total_memory();
    match p.memory_total_bytes {
        None if sysinfo_total > 0 => p.memory_total_bytes = Some(sysinfo_total),
        // Both read MemTotal today; a disagreement means one of them changed its source
        // (a cgroup limit, say), and the record should show it rather than pick one.
        Some(ours) if sysinfo_total > 0 && ours.abs_diff(sysinfo_total) > ours / 100 => {
            p.notes.push(format!(
                "memory total differs: /proc/meminfo says {ours} bytes, sysinfo {sysinfo_total}"
            ));
        }
        _ => {}
    }

    let mut alloc = allocation_from_env(std::env::vars());
    if let Some((list, n)) = allocation::allowed_cpus(Path::new("/proc/self/status")) {
        alloc.allowed_cpus = Some(list);
        alloc.allowed_cpu_count = Some(n);
    }
    p.allocation = Some(alloc);

    let path_var = std::env::var("PATH").unwrap_or_default();
    let scan = gpu::scan(&path_var, GPU_TOOL_LIMIT);
    p.gpus = scan.gpus;
    p.gpu_tools_found = scan.tools_found;
    p.notes.extend(scan.notes);
    p
}

//! The serialisable facts of a node: [`Probe`] and its parts. This is the stable JSON
//! that `optgate probe --json` prints and runs keep as provenance; every field is
//! described in `PROBE_JSON.md`, and any change to a field bumps [`SCHEMA_VERSION`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Version of the JSON layout of [`Probe`]. Bumped whenever a field is renamed, removed
/// or changes meaning; adding a field with a default also bumps it.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything the probe found out about one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Layout version of this record ([`SCHEMA_VERSION`] when it was written).
    pub schema_version: u32,
    /// The root directory whose `proc/` and `sys/` were read (`/` on a live system).
    pub root: String,
    /// Whether this is [`crate::probe_live`]'s record of the running system (true), or a
    /// reading of a captured tree (false: then `gpus`, `gpu_tools_found` and
    /// `allocation` were not looked at and say nothing).
    pub live: bool,
    /// The node's host name, if known.
    pub hostname: Option<String>,
    /// Kernel release (`uname -r`), if known.
    pub kernel: Option<String>,
    /// Machine architecture as `uname -m` names it (`x86_64`, `aarch64`).
    pub arch: Option<String>,
    /// CPU vendor (`GenuineIntel`, `AuthenticAMD`, or the Arm implementer, e.g. `ARM`).
    pub cpu_vendor: Option<String>,
    /// CPU model; on hybrid Arm parts the distinct core names joined by ` + `.
    pub cpu_model: Option<String>,
    /// Number of physical packages (sockets) with at least one online CPU.
    pub sockets: u32,
    /// Number of physical cores with at least one online CPU.
    pub physical_cores: u32,
    /// Number of online logical CPUs (hardware threads).
    pub hardware_threads: u32,
    /// Largest number of online hardware threads on one core (SMT width). On hybrid
    /// parts cores differ; see `core_kinds`.
    pub threads_per_core: u32,
    /// Online CPUs as a kernel CPU list (`0-31`).
    pub online_cpus: String,
    /// Kinds of cores on hybrid parts (P-cores and E-cores, big and LITTLE); empty when
    /// all cores are alike.
    pub core_kinds: Vec<CoreKind>,
    /// Number of NUMA nodes the kernel shows (memory-only nodes included); 0 when the
    /// kernel exposes no NUMA information.
    pub numa_nodes: u32,
    /// The NUMA nodes, ascending.
    pub numa: Vec<NumaNode>,
    /// CPU feature flags common to every processor, lowercase, sorted, as the kernel
    /// names them (`flags` on x86, `Features` on Arm).
    pub flags: Vec<String>,
    /// A summary of the vector and matrix extensions in `flags`.
    pub isa: IsaSummary,
    /// Total memory from `/proc/meminfo` `MemTotal`, in bytes.
    pub memory_total_bytes: Option<u64>,
    /// CPU frequency scaling: governors, drivers, limits and whether they can be changed.
    pub cpufreq: Cpufreq,
    /// The scheduler allocation this process runs in (live probes only).
    pub allocation: Option<Allocation>,
    /// GPUs reported by vendor tools (live probes only); empty is a fact, not an error.
    pub gpus: Vec<Gpu>,
    /// Vendor GPU tools found on `PATH` (`nvidia-smi`, `rocm-smi`).
    pub gpu_tools_found: Vec<String>,
    /// Things the probe noticed but could not settle: a missing file, a failing tool,
    /// two sources that disagree. Empty on a clean probe.
    pub notes: Vec<String>,
}

/// One kind of core on a hybrid part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoreKind {
    /// `performance`/`efficiency` on Intel hybrid parts, the core name on Arm.
    pub name: String,
    /// How the kinds were told apart: `pmu` (`/sys/devices/cpu_core`, `cpu_atom`),
    /// `midr` (Arm implementer and part), or `base_frequency` (cpufreq base frequency).
    pub basis: String,
    /// Online CPUs of this kind, as a kernel CPU list.
    pub cpus: String,
    /// Physical cores of this kind.
    pub physical_cores: u32,
    /// Hardware threads of this kind.
    pub hardware_threads: u32,
    /// Highest `cpuinfo_max_freq` among these CPUs, in kHz, if cpufreq is present.
    pub max_khz: Option<u64>,
    /// Highest `base_frequency` among these CPUs, in kHz, if the driver reports one.
    pub base_khz: Option<u64>,
}

/// One NUMA node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NumaNode {
    /// Node number.
    pub id: u32,
    /// CPUs of the node as a kernel CPU list (empty for memory-only nodes).
    pub cpus: String,
    /// The node's `MemTotal`, in bytes.
    pub memory_total_bytes: Option<u64>,
}

/// The vector and matrix extensions the CPU flags reveal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsaSummary {
    /// x86 SSE4.2 (`sse4_2`).
    pub sse4_2: bool,
    /// x86 AVX (`avx`).
    pub avx: bool,
    /// x86 AVX2 (`avx2`).
    pub avx2: bool,
    /// Fused multiply-add: x86 `fma`; on Arm it is part of `asimd`, so true there too.
    pub fma: bool,
    /// The AVX-512 flags present (`avx512f`, `avx512_bf16`, …), sorted; empty without
    /// AVX-512.
    pub avx512: Vec<String>,
    /// x86 AVX-VNNI (`avx_vnni`), the VEX-encoded form on parts without AVX-512.
    pub avx_vnni: bool,
    /// x86 AMX tiles (`amx_tile`).
    pub amx: bool,
    /// The AMX flags present (`amx_bf16`, `amx_int8`, `amx_tile`, …), sorted.
    pub amx_types: Vec<String>,
    /// Arm Advanced SIMD (`asimd` on AArch64, `neon` on 32-bit Arm).
    pub neon: bool,
    /// Arm SVE (`sve`).
    pub sve: bool,
    /// Arm SVE2 (`sve2`).
    pub sve2: bool,
    /// Arm SME (`sme`).
    pub sme: bool,
    /// Some bfloat16 arithmetic: `avx512_bf16`, `amx_bf16` or Arm `bf16`.
    pub bf16: bool,
}

/// CPU frequency scaling on the node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpufreq {
    /// Whether any online CPU has a `cpufreq` directory.
    pub present: bool,
    /// Online CPUs without cpufreq, as a kernel CPU list (empty when all have it).
    pub cpus_without_cpufreq: String,
    /// Distinct current governors over all policies, sorted.
    pub governors: Vec<String>,
    /// Distinct scaling drivers (`intel_pstate`, `acpi-cpufreq`, `cppc_cpufreq`), sorted.
    pub drivers: Vec<String>,
    /// True when cpufreq is present and every policy's `scaling_governor` is writable by
    /// this process.
    pub governor_writable: bool,
    /// One entry per cpufreq policy (a group of CPUs that share a clock setting).
    pub policies: Vec<CpufreqPolicy>,
}

/// One cpufreq policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpufreqPolicy {
    /// The policy directory's name (`policy0`), or `cpuN` on kernels without policies.
    pub name: String,
    /// Online CPUs governed by this policy, as a kernel CPU list.
    pub cpus: String,
    /// Current governor (`scaling_governor`).
    pub governor: Option<String>,
    /// Governors the driver accepts (`scaling_available_governors`).
    pub available_governors: Vec<String>,
    /// Scaling driver (`scaling_driver`).
    pub driver: Option<String>,
    /// Hardware minimum frequency (`cpuinfo_min_freq`), kHz.
    pub min_khz: Option<u64>,
    /// Hardware maximum frequency (`cpuinfo_max_freq`), kHz.
    pub max_khz: Option<u64>,
    /// Current lower limit set by policy (`scaling_min_freq`), kHz.
    pub scaling_min_khz: Option<u64>,
    /// Current upper limit set by policy (`scaling_max_freq`), kHz.
    pub scaling_max_khz: Option<u64>,
    /// Base (non-turbo) frequency (`base_frequency`, intel_pstate only), kHz.
    pub base_khz: Option<u64>,
    /// Whether `scaling_governor` exists and this process may write it (`access(W_OK)`;
    /// the file is not touched).
    pub governor_writable: bool,
}

/// The scheduler allocation the process runs in, as its environment shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    /// `flux` when `FLUX_JOB_ID` or `FLUX_ENCLOSING_ID` (a `flux batch` script) is set
    /// (Flux may run inside a Slurm job, and then it is the inner, nearer allocation), else
    /// `slurm` when `SLURM_JOB_ID` is set, else none.
    pub scheduler: Option<String>,
    /// The job id of that scheduler.
    pub job_id: Option<String>,
    /// `SLURM_CPUS_PER_TASK`.
    pub cpus_per_task: Option<u32>,
    /// `SLURM_NTASKS` (or `SLURM_NPROCS`), or `FLUX_JOB_SIZE` under Flux.
    pub ntasks: Option<u32>,
    /// `SLURM_CPUS_ON_NODE`: CPUs allocated on this node.
    pub cpus_on_node: Option<u32>,
    /// `SLURM_JOB_NODELIST` (or `SLURM_NODELIST`), in Slurm's compressed notation.
    pub nodelist: Option<String>,
    /// CPUs this process may run on (`Cpus_allowed_list` of `/proc/self/status`), which
    /// is what cgroups and affinity leave of the node.
    pub allowed_cpus: Option<String>,
    /// Number of CPUs in `allowed_cpus`.
    pub allowed_cpu_count: Option<u32>,
    /// Every `SLURM_*` and `FLUX_*` variable, sorted by name.
    pub env: BTreeMap<String, String>,
}

/// One GPU as its vendor tool reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// `nvidia` or `amd`.
    pub vendor: String,
    /// Index in the tool's listing (0-based).
    pub index: u32,
    /// Product name (`NVIDIA H100 80GB HBM3`, `AMD Instinct MI210`).
    pub name: String,
    /// Device memory in bytes; `None` when the tool reports none (unified memory on a
    /// GB10 reads `[N/A]`) or cannot say.
    pub memory_total_bytes: Option<u64>,
    /// Driver version, when reported.
    pub driver_version: Option<String>,
}

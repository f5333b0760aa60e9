//! The per-run manifest: what happened to one run (start, end, exit status, host, the
//! environment it was given). Written atomically after the run ends, so a run directory
//! without a manifest is never mistaken for data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const MANIFEST_FILE: &str = "manifest.json";

/// An empty file a run's wrapper leaves when its output or manifest could not be written
/// for lack of space (ENOSPC, EDQUOT): an empty file needs no data block, so it can be
/// made on a full disk. The engine then records the run as hit by ENOSPC (and runs it
/// again) instead of lost; the next attempt removes it.
pub const NO_SPACE_MARK: &str = "manifest.enospc";

/// Whether `e` is a lack of space (ENOSPC or EDQUOT).
pub fn is_no_space(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::StorageFull
        || matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Whether the run in `run_dir` left [`NO_SPACE_MARK`].
pub fn hit_by_no_space(run_dir: &Path) -> bool {
    run_dir.join(NO_SPACE_MARK).exists()
}
pub const MANIFEST_SCHEMA: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Exited with status 0.
    Completed,
    /// Exited non-zero or was killed by a signal it did not get from optgate.
    Failed,
    /// Killed by optgate after the run's time limit.
    TimedOut,
    /// Stopped because the user interrupted optgate (Ctrl-C) or the daemon stopped.
    Interrupted,
}

impl Outcome {
    /// The one rule of resumption: a manifest is final (the run counts as done, completed
    /// or failed, and is never run again) unless the run was interrupted.
    pub fn is_final(self) -> bool {
        self != Outcome::Interrupted
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunManifest {
    pub schema: u32,
    pub experiment: String,
    pub run_id: String,
    pub arm: String,
    pub block: u32,
    pub replicate: u32,
    pub host: String,
    pub started_at: String,
    pub ended_at: String,
    pub elapsed_s: f64,
    pub outcome: Outcome,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Variables the arm sets and removes, as rendered into the run script.
    pub env_set: BTreeMap<String, String>,
    pub env_unset: Vec<String>,
    /// The environment the run's process started with, as far as it is safe to keep:
    /// every variable the arm sets, and inherited ones whose names are on
    /// [`RECORDED_ENV_PREFIXES`] / [`RECORDED_ENV_NAMES`] (what shapes a measurement:
    /// threading, schedulers, CUDA, PyTorch). Other inherited values may be secrets.
    pub environment: BTreeMap<String, String>,
    /// Names of the inherited variables whose values were not recorded.
    #[serde(default)]
    pub environment_withheld: Vec<String>,
    /// How busy the node was around the run (load, CPU steal), where `/proc` tells.
    #[serde(default)]
    pub conditions: Option<NodeConditions>,
    pub script: PathBuf,
    #[serde(default)]
    pub scheduler_job_id: Option<String>,
    pub optgate_version: String,
    /// The job attempt whose wrapper wrote this manifest (1 for a block's first job, 2 for
    /// its first resubmission, …); None in manifests written before optgate recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// The cpufreq governor in force inside the run's step, per node: host → governor, as
    /// `optgate step` read it on the CPUs the step was given (after `srun
    /// --cpu-freq` applied the arm's governor). `none`: no cpufreq; names joined by `,`
    /// when the CPUs disagree. Empty when not recorded (a run started without a launcher,
    /// older manifests).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub step_governors: BTreeMap<String, String>,
    /// Every task the run's launcher started, as `optgate step` measured it inside the
    /// step (rank, node, CPUs allowed, threads, CPU time, peak RSS, how it ended), in rank
    /// order. Empty for a run without a launcher (its app is the wrapper's own child) and
    /// in older manifests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<crate::tasks::TaskRecord>,
    /// Every node of the run's step, as its first task's `optgate step` found it (names,
    /// governor in force, load average, cores), by host. Empty without a launcher and in
    /// older manifests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<crate::nodes::NodeRecord>,
    /// The step's records that were not believed, each `FILE: the rule it broke` (or why
    /// it could not be read): their figures are left out — no `tasks`, no `resources` from
    /// them, or no `nodes` — rather than shown as measured. Empty when every record held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<String>,
    /// What the run used: CPU time and peak memory of its process tree, and energy where
    /// the node lets it be read. None in manifests written before optgate recorded it.
    #[serde(default)]
    pub resources: Option<Resources>,
    /// A run without a launcher: the cores it was given and used, and its threads, as the
    /// wrapper measured them (a launched run's tasks carry the same in `tasks`). None under
    /// a launcher and in older manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_use: Option<CoreUse>,
    /// Compile caches and page cache as they were set up before the run.
    #[serde(default)]
    pub isolation: Option<IsolationRecord>,
}

/// Where a run's compile caches (`TORCHINDUCTOR_CACHE_DIR`, `TRITON_CACHE_DIR`,
/// `OPTGATE_CACHE_DIR`) live: the arm's `caches` in the experiment file, carried as is by
/// the run spec and the manifest.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    /// A fresh cache in each run's directory: every replicate pays the compile, as a
    /// production job's first run does.
    #[default]
    Cold,
    /// One cache per arm, filled by one untimed warm-up run before the arm's first timed
    /// run: what a job that runs again with its caches in place pays.
    Warm,
}

/// What happens to the page cache of the declared `inputs` before each run: the arm's
/// `page_cache` in the experiment file, carried as is by the run spec and the manifest.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum PageCacheMode {
    /// Nothing: whatever earlier runs left cached stays (the report says so).
    #[default]
    Leave,
    /// Evict the inputs (`posix_fadvise(POSIX_FADV_DONTNEED)`), so each run reads them
    /// from storage.
    Cold,
    /// Read the inputs once, so each run finds them cached.
    Warm,
    /// Drop the whole page cache (`/proc/sys/vm/drop_caches`) when optgate runs as root;
    /// otherwise as `cold`, and the manifest says so.
    Drop,
}

/// What the manifest says about a run's isolation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IsolationRecord {
    pub caches: CacheMode,
    /// The folder `OPTGATE_CACHE_DIR` (and the Inductor and Triton caches below it) named.
    pub cache_dir: PathBuf,
    /// `caches: warm`: whether this run did the arm's warm-up, and how it went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupRecord>,
    pub page_cache: PageCacheRecord,
}

/// The untimed warm-up run this run did before its timed one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmupRecord {
    pub outcome: Outcome,
    pub elapsed_s: f64,
}

/// What was done to the page cache of the inputs before the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageCacheRecord {
    pub mode: PageCacheMode,
    /// Files evicted or read (0 for `leave`).
    pub files: usize,
    pub bytes: u64,
    /// Anything that did not go as asked: missing inputs, unreadable files, `drop` without
    /// root, more files than [`crate::isolation::MAX_INPUT_FILES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

pub use crate::files::write_atomic;
pub use crate::resources::{CoreUse, EnergySource, Resources};

/// How busy a node was while a run ran: the 1-minute load average before and after it,
/// and the share of CPU time the hypervisor took (steal) over the run. A load above the
/// online CPUs means other work competed with the run; steal means the VM's CPUs were
/// someone else's part of the time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct NodeConditions {
    pub online_cpus: Option<u32>,
    pub load_avg_start: Option<f64>,
    pub load_avg_end: Option<f64>,
    pub steal_pct: Option<f64>,
}

impl NodeConditions {
    /// The higher of the 1-minute load averages before and after the run (either, when
    /// only one was read).
    pub fn load_avg_max(&self) -> Option<f64> {
        self.load_avg_start
            .into_iter()
            .chain(self.load_avg_end)
            .reduce(f64::max)
    }
}

/// A snapshot of `/proc/loadavg` and the `cpu` line of `/proc/stat` (pure parse in
/// [`parse_loadavg`] and [`parse_cpu_ticks`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeSnapshot {
    pub load_avg: Option<f64>,
    /// (steal ticks, all ticks) of the aggregate `cpu` line.
    pub ticks: Option<(u64, u64)>,
}

impl NodeSnapshot {
    pub fn take() -> NodeSnapshot {
        NodeSnapshot {
            load_avg: std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|t| parse_loadavg(&t)),
            ticks: std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|t| parse_cpu_ticks(&t)),
        }
    }

    /// The conditions between this snapshot (taken before a run) and `after`.
    pub fn until(&self, after: &NodeSnapshot, online_cpus: Option<u32>) -> NodeConditions {
        let steal_pct = match (self.ticks, after.ticks) {
            (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
                Some(100.0 * s1.saturating_sub(s0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        NodeConditions {
            online_cpus,
            load_avg_start: self.load_avg,
            load_avg_end: after.load_avg,
            steal_pct,
        }
    }
}

/// The 1-minute load average of `/proc/loadavg` ("0.52 0.58 0.59 1/467 12345").
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// (steal, total) ticks of the aggregate `cpu` line of `/proc/stat`
/// ("cpu user nice system idle iowait irq softirq steal guest guest_nice"); guest time is
/// already counted in user time, so it is left out of the total.
pub fn parse_cpu_ticks(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let steal = *v.get(7).unwrap_or(&0);
    let total: u64 = v.iter().take(8).sum();
    Some((steal, total))
}

/// Inherited variables whose values a manifest records, by prefix: what changes how a run
/// behaves, not who runs it. Everything else inherited is recorded by name only.
pub const RECORDED_ENV_PREFIXES: &[&str] = &[
    "OMP_",
    "KMP_",
    "GOMP_",
    "MKL_",
    "OPENBLAS_",
    "BLIS_",
    "SLURM_",
    "FLUX_",
    "PMI_",
    "CUDA_",
    "NCCL_",
    "ROCR_",
    "HIP_",
    "TORCH",
    "PYTORCH_",
    "TRITON_",
    "OPTGATE_",
    "DFTRACER_",
];

/// Inherited variables recorded by exact name.
pub const RECORDED_ENV_NAMES: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "HOSTNAME",
    "LANG",
    "LC_ALL",
    "TZ",
];

/// Splits an inherited environment (with the arm's own variables applied) into what a
/// manifest may record and the names it withholds. The arm's `set` variables are always
/// recorded: they are in the experiment file already.
pub fn recordable_environment(
    inherited: impl IntoIterator<Item = (String, String)>,
    set: &BTreeMap<String, String>,
    unset: &[String],
) -> (BTreeMap<String, String>, Vec<String>) {
    let mut kept = BTreeMap::new();
    let mut withheld = Vec::new();
    for (name, value) in inherited {
        if set.contains_key(&name) || unset.contains(&name) {
            continue;
        }
        let recorded = RECORDED_ENV_NAMES.contains(&name.as_str())
            || RECORDED_ENV_PREFIXES.iter().any(|p| name.starts_with(p));
        if recorded {
            kept.insert(name, value);
        } else {
            withheld.push(name);
        }
    }
    kept.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
    withheld.sort();
    (kept, withheld)
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid run manifest: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl RunManifest {
    pub fn write(&self, run_dir: &Path) -> Result<(), ManifestError> {
        let path = run_dir.join(MANIFEST_FILE);
        let json = serde_json::to_vec_pretty(self).expect("manifest serialises");
        write_atomic(&path, &json).map_err(|source| ManifestError::Io {
            op: "write",
            path,
            source,
        })
    }

    /// Reads a run's manifest; `Ok(None)` when the run has not finished (no manifest).
    pub fn read(run_dir: &Path) -> Result<Option<RunManifest>, ManifestError> {
        let path = run_dir.join(MANIFEST_FILE);
        let read = crate::untrusted::read_bytes(
            run_dir,
            Path::new(MANIFEST_FILE),
            crate::untrusted::MAX_MANIFEST_BYTES,
        );
        let bytes = match read {
            Ok(b) => b,
            Err(e) if e.is_absent() => return Ok(None),
            Err(e) => {
                return Err(ManifestError::Io {
                    op: "read",
                    path,
                    source: e.into_io(),
                });
            }
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| ManifestError::Parse { path, source })
    }
}

/// A completed-looking manifest with `outcome`: the one fixture of a run's manifest for the
/// tests of this crate and of those above it (feature `fixtures`), which change only the
/// fields they are about (`RunManifest { arm: …, ..fixture_manifest(outcome) }`).
#[cfg(any(test, feature = "fixtures"))]
pub fn fixture_manifest(outcome: Outcome) -> RunManifest {
    RunManifest {
        schema: MANIFEST_SCHEMA,
        experiment: "e".into(),
        run_id: "b001-v".into(),
        arm: "v".into(),
        block: 1,
        replicate: 1,
        host: "n1".into(),
        started_at: "2026-01-01T00:00:00Z".into(),
        ended_at: "2026-01-01T00:00:01Z".into(),
        elapsed_s: 1.0,
        outcome,
        exit_code: Some(0),
        signal: None,
        env_set: Default::default(),
        env_unset: vec![],
        environment: Default::default(),
        environment_withheld: vec![],
        conditions: None,
        script: "run.sh".into(),
        scheduler_job_id: None,
        optgate_version: "0".into(),
        attempt: Some(1),
        step_governors: Default::default(),
        nodes: Vec::new(),
        tasks: Vec::new(),
        not_measured: Vec::new(),
        resources: None,
        core_use: None,
        isolation: None,
    }
}

#[cfg(test)]
mod conditions_tests {
    use super::*;

    #[test]
    fn load_and_steal_from_proc_text() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 1/467 12345\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        // user nice system idle iowait irq softirq steal guest guest_nice
        let stat = "cpu  100 0 50 800 10 0 0 40 7 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n";
        assert_eq!(parse_cpu_ticks(stat), Some((40, 1000)));
        assert_eq!(parse_cpu_ticks("intr 1 2 3\n"), None);
        let before = NodeSnapshot {
            load_avg: Some(0.5),
            ticks: Some((40, 1000)),
        };
        let after = NodeSnapshot {
            load_avg: Some(2.5),
            ticks: Some((90, 2000)),
        };
        let c = before.until(&after, Some(2));
        assert_eq!(c.steal_pct, Some(5.0));
        assert_eq!((c.load_avg_start, c.load_avg_end), (Some(0.5), Some(2.5)));
        // No tick advanced: no steal figure rather than a division by zero.
        assert_eq!(before.until(&before, None).steal_pct, None);
    }
}

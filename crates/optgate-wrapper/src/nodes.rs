//! What one node of a run's step was like, as `optgate step` records it once per node (the
//! task with local rank 0): the node's names, the governor in force on the step's CPUs,
//! the load average, the node's cores and the RAPL energy the node used around that
//! task's app, one small JSON file per node (`HOST.json`, or `HOST+NODE.json` with the
//! scheduler's name: fake nodes of one machine share a host) in the attempt's own `nodes.attempt-N/`
//! folder, gathered into the manifest's `nodes` (and their energy into its `resources`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The stem of the per-attempt node-record folders.
pub const NODES_DIR: &str = "nodes";

/// The folder of an attempt's node records, in the run directory: `nodes.attempt-N`.
pub fn nodes_dir(run_dir: &Path, attempt: u32) -> PathBuf {
    run_dir.join(crate::files::attempt_file(NODES_DIR, attempt))
}

/// One node of the step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// The scheduler's name for the node (Slurm's node name, Flux's broker rank).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub host: String,
    /// The cpufreq governor in force on the step's CPUs (`none`: no cpufreq).
    pub governor: String,
    /// The 1-minute load average when the node's first task started.
    pub load_avg: Option<f64>,
    /// The node's online cores (None: not readable).
    pub cores: Option<u32>,
    /// Joules the node's RAPL packages counted around its first task's app (the whole
    /// node's, so whatever else ran there meanwhile too); None with `energy_unmeasured`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// Why `energy_j` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_unmeasured: Option<EnergyGap>,
}

/// Why a node has no energy figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum EnergyGap {
    /// No RAPL package zone could be read before or after the app (no powercap, or
    /// `energy_uj` root-only).
    #[error("RAPL counters unreadable")]
    RaplUnreadable,
    /// The package zones read after the app were not those read before.
    #[error("RAPL zones changed during the step")]
    ZonesChanged,
    /// The app did not run (it could not be started), so there was nothing to measure.
    #[error("the app did not run")]
    AppNotRun,
}

/// The node's energy between two RAPL snapshots taken around its first task's app.
pub fn energy_between(
    before: Option<&crate::energy::RaplSnapshot>,
    after: Option<&crate::energy::RaplSnapshot>,
) -> Result<f64, EnergyGap> {
    match (before, after) {
        (Some(b), Some(a)) => crate::energy::joules_between(b, a).ok_or(EnergyGap::ZonesChanged),
        _ => Err(EnergyGap::RaplUnreadable),
    }
}

impl NodeRecord {
    /// Sets the energy figure, or why there is none.
    pub fn set_energy(&mut self, energy: Result<f64, EnergyGap>) {
        (self.energy_j, self.energy_unmeasured) = match energy {
            Ok(j) => (Some(j), None),
            Err(gap) => (None, Some(gap)),
        };
    }
}

/// Why a step's energy is not the sum over its nodes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepEnergyGap {
    #[error("no node records")]
    NoNodes,
    #[error("not measured on node {node} ({why})")]
    NotMeasuredOn { node: String, why: String },
}

/// The step's energy: the sum over its node records when every node has a figure; else
/// the first node without one, by name (a sum over part of the allocation would be a
/// wrong figure, not a low one).
pub fn step_energy(nodes: &[NodeRecord]) -> Result<f64, StepEnergyGap> {
    if nodes.is_empty() {
        return Err(StepEnergyGap::NoNodes);
    }
    let mut joules = 0.0;
    for n in nodes {
        match n.energy_j {
            Some(j) => joules += j,
            None => {
                return Err(StepEnergyGap::NotMeasuredOn {
                    node: n.host.clone(),
                    why: n
                        .energy_unmeasured
                        .map_or("no figure recorded".to_string(), |g| g.to_string()),
                });
            }
        }
    }
    Ok(joules)
}

/// Why a node's record could not be written.
#[derive(Debug, thiserror::Error)]
pub enum NodeRecordError {
    #[error("node name {0:?} cannot name a file")]
    HostName(String),
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The file name of `record`: `HOST.json`, or `HOST+NODE.json` when the scheduler names
/// the node (several brokers or slurmds on one machine share its host name); `None` when
/// a part would leave the folder or hide the file.
fn file_name(record: &NodeRecord) -> Option<String> {
    let safe = |s: &str| !s.is_empty() && !s.contains('/') && !s.starts_with('.');
    match &record.node {
        Some(node) if safe(&record.host) && safe(node) => {
            Some(format!("{}+{node}.json", record.host))
        }
        None if safe(&record.host) => Some(format!("{}.json", record.host)),
        _ => None,
    }
}

/// Writes `record` as `nodes.attempt-N/` + [`file_name`], whole (fsynced and renamed into
/// place); the path written.
pub fn write_record(
    run_dir: &Path,
    attempt: u32,
    record: &NodeRecord,
) -> Result<PathBuf, NodeRecordError> {
    let Some(name) = file_name(record) else {
        let node = record.node.as_deref().unwrap_or("");
        return Err(NodeRecordError::HostName(format!("{}+{node}", record.host)));
    };
    let dir = nodes_dir(run_dir, attempt);
    let path = dir.join(name);
    let write = || -> Result<(), std::io::Error> {
        crate::files::ensure_real_dir(&dir)?;
        let json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
        crate::files::write_atomic(&path, &json)
    };
    write().map_err(|source| NodeRecordError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Cores a node record may claim at most (past any machine built).
pub const MAX_NODE_CORES: u32 = 1 << 16;
/// A node's 1-minute load average may be at most this many times its cores: a load past
/// it is not a reading of a machine that still runs the step.
pub const MAX_LOAD_PER_CORE: f64 = 100.0;

/// What is wrong with one node record, if anything: its cores within
/// [`MAX_NODE_CORES`], its load finite, ≥ 0 and at most [`MAX_LOAD_PER_CORE`] × cores,
/// its energy finite and ≥ 0.
pub fn check_node(n: &NodeRecord) -> Result<(), String> {
    if let Some(c) = n.cores
        && !(1..=MAX_NODE_CORES).contains(&c)
    {
        return Err(format!("cores {c} is not within 1..={MAX_NODE_CORES}"));
    }
    if let Some(load) = n.load_avg {
        let cores = n.cores.unwrap_or(MAX_NODE_CORES);
        let most = f64::from(cores) * MAX_LOAD_PER_CORE;
        if !(load.is_finite() && (0.0..=most).contains(&load)) {
            return Err(format!(
                "load average {load} is not within 0..={most} ({MAX_LOAD_PER_CORE} per core)"
            ));
        }
    }
    if let Some(j) = n.energy_j
        && !(j.is_finite() && j >= 0.0)
    {
        return Err(format!("energy_j {j} is not a finite number ≥ 0"));
    }
    Ok(())
}

/// An attempt's node records (`nodes.attempt-N/` of `run_dir`), by host then node, each
/// read as untrusted ([`crate::untrusted`]) and checked ([`check_node`]); the first
/// problem, naming the file, when any is unreadable or fails a rule.
pub fn read_records(
    run_dir: &Path,
    attempt: u32,
) -> Result<Vec<NodeRecord>, crate::untrusted::RecordProblem> {
    let folder = PathBuf::from(crate::files::attempt_file(NODES_DIR, attempt));
    let records: Vec<(String, NodeRecord)> = crate::untrusted::read_json_records(run_dir, &folder)?;
    for (file, n) in &records {
        check_node(n).map_err(|why| crate::untrusted::RecordProblem {
            file: file.clone(),
            why,
        })?;
    }
    let mut records: Vec<NodeRecord> = records.into_iter().map(|(_, n)| n).collect();
    records.sort_by(|a, b| (&a.host, &a.node).cmp(&(&b.host, &b.node)));
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(host: &str) -> NodeRecord {
        NodeRecord {
            node: Some("0".into()),
            host: host.into(),
            governor: "performance".into(),
            load_avg: Some(0.5),
            cores: Some(2),
            energy_j: Some(1.5),
            energy_unmeasured: None,
        }
    }

    /// The step's energy is the sum over its nodes, and absent, naming the node, when one
    /// node has no figure. Planted bugs caught: one node's figure taken for the step's,
    /// a node without a figure counted as 0 J, an empty step summed to 0 J.
    #[test]
    fn the_steps_energy_is_the_sum_over_every_node() {
        let mut n2 = record("n2");
        n2.set_energy(Ok(2.25));
        assert_eq!(step_energy(&[record("n1"), n2.clone()]), Ok(3.75));
        let mut n3 = record("n3");
        n3.set_energy(Err(EnergyGap::RaplUnreadable));
        assert_eq!(
            (n3.energy_j, n3.energy_unmeasured),
            (None, Some(EnergyGap::RaplUnreadable))
        );
        let gap = step_energy(&[record("n1"), n3, n2]).unwrap_err();
        assert_eq!(
            gap.to_string(),
            "not measured on node n3 (RAPL counters unreadable)"
        );
        assert_eq!(step_energy(&[]), Err(StepEnergyGap::NoNodes));
    }

    /// RAPL read from a fixture sysfs root (a double for the counters this build machine
    /// lacks: it has no /sys/class/powercap): the advance between the two snapshots, and
    /// a reason when either side is unreadable or the zones differ. Planted bugs caught:
    /// a missing snapshot read as 0 J, a zone-set change summed anyway.
    #[test]
    fn a_nodes_energy_comes_from_rapl_around_the_app() {
        use crate::energy::{POWERCAP_DIR, take};
        let tmp = tempfile::tempdir().unwrap();
        let zone = |name: &str, uj: &str| {
            let d = tmp.path().join(POWERCAP_DIR).join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("energy_uj"), uj).unwrap();
            std::fs::write(d.join("max_energy_range_uj"), "262143328850\n").unwrap();
        };
        zone("intel-rapl:0", "1000000\n");
        let before = take(tmp.path());
        zone("intel-rapl:0", "4000000\n");
        let after = take(tmp.path());
        assert_eq!(energy_between(before.as_ref(), after.as_ref()), Ok(3.0));
        assert_eq!(
            energy_between(None, after.as_ref()),
            Err(EnergyGap::RaplUnreadable)
        );
        zone("intel-rapl:1", "5\n");
        let more = take(tmp.path());
        assert_eq!(
            energy_between(before.as_ref(), more.as_ref()),
            Err(EnergyGap::ZonesChanged)
        );
    }

    /// Records written for two hosts read back whole and by host; a half-written
    /// temporary (dot name) is left out, a file that is not a record is the problem, named.
    /// Planted bugs caught: records read unsorted, temporaries counted, a foreign file
    /// believed or skipped silently.
    #[test]
    fn node_records_round_trip_by_host() {
        let tmp = tempfile::tempdir().unwrap();
        write_record(tmp.path(), 2, &record("n2")).unwrap();
        let p = write_record(tmp.path(), 2, &record("n1")).unwrap();
        assert_eq!(p, tmp.path().join("nodes.attempt-2/n1+0.json"));
        let dir = nodes_dir(tmp.path(), 2);
        std::fs::write(dir.join(".n3.json.tmp"), "{").unwrap();
        let got = read_records(tmp.path(), 2).unwrap();
        assert_eq!(got, vec![record("n1"), record("n2")]);
        assert!(read_records(tmp.path(), 1).unwrap().is_empty());
        std::fs::write(dir.join("n4.json"), "{\"host\":").unwrap();
        let err = read_records(tmp.path(), 2).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("nodes.attempt-2/n4.json: not a record"),
            "{err}"
        );
    }

    /// Planted bugs caught: a load of 100,000,000 believed, a negative or infinite energy
    /// summed, 0 cores accepted.
    #[test]
    fn an_implausible_node_record_is_refused_naming_the_rule() {
        assert_eq!(check_node(&record("n1")), Ok(()));
        let mut n = record("n1");
        n.load_avg = Some(1e8);
        assert!(
            check_node(&n)
                .unwrap_err()
                .contains("load average 100000000")
        );
        n.load_avg = Some(-1.0);
        assert!(check_node(&n).is_err());
        let mut n = record("n1");
        n.energy_j = Some(f64::INFINITY);
        assert!(check_node(&n).unwrap_err().contains("energy_j inf"));
        n.energy_j = Some(-3.0);
        assert!(check_node(&n).is_err());
        let mut n = record("n1");
        n.cores = Some(0);
        assert!(check_node(&n).unwrap_err().contains("cores 0"));
    }

    /// A host name that would leave the folder or hide the file is refused.
    #[test]
    fn a_host_name_that_cannot_name_a_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in ["", "../x", ".hidden"] {
            let e = write_record(tmp.path(), 1, &record(bad)).unwrap_err();
            assert!(matches!(e, NodeRecordError::HostName(_)), "{bad}: {e}");
            let mut named = record("n1");
            named.node = Some(bad.into());
            let e = write_record(tmp.path(), 1, &named).unwrap_err();
            assert!(matches!(e, NodeRecordError::HostName(_)), "{bad}: {e}");
        }
    }

    /// Two nodes of one machine (two Flux brokers, two slurmds) keep a record each; with no
    /// scheduler name the host alone names the file. Planted bug caught: files named by
    /// host only (the second broker's record replaces the first's).
    #[test]
    fn nodes_sharing_a_host_keep_a_record_each() {
        let tmp = tempfile::tempdir().unwrap();
        let mut second = record("vm");
        second.node = Some("1".into());
        write_record(tmp.path(), 1, &second).unwrap();
        write_record(tmp.path(), 1, &record("vm")).unwrap();
        let mut unnamed = record("other");
        unnamed.node = None;
        let p = write_record(tmp.path(), 1, &unnamed).unwrap();
        assert_eq!(p, tmp.path().join("nodes.attempt-1/other.json"));
        let got = read_records(tmp.path(), 1).unwrap();
        assert_eq!(got, vec![unnamed, record("vm"), second]);
    }
}

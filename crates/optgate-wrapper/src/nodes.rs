//! What one node of a run's step was like, as `optgate step` records it once per node (the
//! task with local rank 0): the node's names, the governor in force on the step's CPUs,
//! the load average and the node's cores, one small JSON file per host in the attempt's
//! own `nodes.attempt-N/` folder, gathered into the manifest's `nodes`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The stem of the per-attempt node-record folders.
pub const NODES_DIR: &str = "nodes";

/// The folder of an attempt's node records, in the run directory: `nodes.attempt-N`.
pub fn nodes_dir(run_dir: &Path, attempt: u32) -> PathBuf {
    run_dir.join(crate::run::attempt_file(NODES_DIR, attempt))
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
}

/// Why a node's record could not be written.
#[derive(Debug, thiserror::Error)]
pub enum NodeRecordError {
    #[error("host name {0:?} cannot name a file")]
    HostName(String),
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Writes `record` as `nodes.attempt-N/<host>.json`, whole (fsynced and renamed into
/// place); the path written.
pub fn write_record(
    run_dir: &Path,
    attempt: u32,
    record: &NodeRecord,
) -> Result<PathBuf, NodeRecordError> {
    let host = &record.host;
    if host.is_empty() || host.contains('/') || host.starts_with('.') {
        return Err(NodeRecordError::HostName(host.clone()));
    }
    let dir = nodes_dir(run_dir, attempt);
    let path = dir.join(format!("{host}.json"));
    let write = || -> Result<(), std::io::Error> {
        std::fs::create_dir_all(&dir)?;
        let json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
        crate::manifest::write_atomic(&path, &json)
    };
    write().map_err(|source| NodeRecordError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// An attempt's node records, by host; files that are not whole records are left out.
pub fn read_records(dir: &Path) -> Vec<NodeRecord> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut records: Vec<NodeRecord> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".json") && !name.starts_with('.')
        })
        .filter_map(|e| serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok())
        .collect();
    records.sort_by(|a, b| a.host.cmp(&b.host));
    records
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
        }
    }

    /// Records written for two hosts read back whole and by host; a half-written
    /// temporary (dot name) and a torn file are left out. Planted bugs caught: records
    /// read unsorted, temporaries counted, a torn file failing the whole read.
    #[test]
    fn node_records_round_trip_by_host() {
        let tmp = tempfile::tempdir().unwrap();
        write_record(tmp.path(), 2, &record("n2")).unwrap();
        let p = write_record(tmp.path(), 2, &record("n1")).unwrap();
        assert_eq!(p, tmp.path().join("nodes.attempt-2/n1.json"));
        let dir = nodes_dir(tmp.path(), 2);
        std::fs::write(dir.join(".n3.json.tmp"), "{").unwrap();
        std::fs::write(dir.join("n4.json"), "{\"host\":").unwrap();
        let got = read_records(&dir);
        assert_eq!(got, vec![record("n1"), record("n2")]);
        assert!(read_records(&nodes_dir(tmp.path(), 1)).is_empty());
    }

    /// A host name that would leave the folder or hide the file is refused.
    #[test]
    fn a_host_name_that_cannot_name_a_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        for bad in ["", "../x", ".hidden"] {
            let e = write_record(tmp.path(), 1, &record(bad)).unwrap_err();
            assert!(matches!(e, NodeRecordError::HostName(_)), "{bad}: {e}");
        }
    }
}

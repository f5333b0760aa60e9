//! What one launched task of a run's step used, as `optgate step` records it (one small
//! JSON file per task in the attempt's own `tasks.attempt-N/` folder), and the pure parts
//! around it: who the task is from the scheduler's environment, the file's name, reading an
//! attempt's records back, and the run's totals over its tasks.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::resources::{EnergySource, Resources};

/// The folder of an attempt's task records, in the run directory: `tasks.attempt-N`.
pub fn tasks_dir(run_dir: &Path, attempt: u32) -> PathBuf {
    run_dir.join(crate::files::attempt_file(TASKS_DIR, attempt))
}

/// The stem of the per-attempt task-record folders.
pub const TASKS_DIR: &str = "tasks";

/// Which scheduler started the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepScheduler {
    Slurm,
    Flux,
}

/// Who a task is, from the variables its launcher sets: Slurm's `SLURM_PROCID`,
/// `SLURM_LOCALID`, `SLURM_STEP_NUM_TASKS` and `SLURMD_NODENAME`; Flux's `FLUX_TASK_RANK`,
/// `FLUX_TASK_LOCAL_ID`, `FLUX_JOB_SIZE` and the broker rank that ends its `FLUX_URI`
/// (`local:///…/local-3`). Flux first: a Flux instance started inside a Slurm job is the
/// nearer launcher.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskIdentity {
    pub scheduler: Option<StepScheduler>,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    /// The scheduler's name for the node: Slurm's node name, Flux's broker rank.
    pub node: Option<String>,
    /// How many tasks the step launched.
    pub step_size: Option<u32>,
}

impl TaskIdentity {
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> TaskIdentity {
        let num = |k: &str| var(k).and_then(|v| v.trim().parse::<u32>().ok());
        if let Some(rank) = num("FLUX_TASK_RANK") {
            return TaskIdentity {
                scheduler: Some(StepScheduler::Flux),
                rank: Some(rank),
                local_rank: num("FLUX_TASK_LOCAL_ID"),
                node: var("FLUX_URI").and_then(|u| flux_broker_rank(&u)),
                step_size: num("FLUX_JOB_SIZE"),
            };
        }
        if let Some(rank) = num("SLURM_PROCID") {
            return TaskIdentity {
                scheduler: Some(StepScheduler::Slurm),
                rank: Some(rank),
                local_rank: num("SLURM_LOCALID"),
                node: var("SLURMD_NODENAME").filter(|n| !n.trim().is_empty()),
                step_size: num("SLURM_STEP_NUM_TASKS").or_else(|| num("SLURM_NTASKS")),
            };
        }
        TaskIdentity::default()
    }

    /// Whether this task is the first of its node (local rank 0, or no scheduler says).
    pub fn first_on_node(&self) -> bool {
        self.local_rank.is_none_or(|r| r == 0)
    }

    /// The record's file name: `rank-3.json`, or `pid-1234.json` when no scheduler named
    /// the task's rank.
    pub fn record_name(&self, pid: u32) -> String {
        match self.rank {
            Some(r) => format!("rank-{r}.json"),
            None => format!("pid-{pid}.json"),
        }
    }
}

/// The broker rank at the end of a Flux URI (`local:///run/flux/local-3` → `3`).
pub fn flux_broker_rank(uri: &str) -> Option<String> {
    let last = uri.trim_end_matches('/').rsplit('/').next()?;
    let rank = last.strip_prefix("local-")?;
    (!rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit())).then(|| rank.to_string())
}

/// How a task's app ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskEnd {
    /// Exited with `exit_code`.
    Exited,
    /// Killed by `signal` (forwarded by the wrapper or sent to it directly).
    Signaled,
}

/// One launched task, as `optgate step` measured it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler: Option<StepScheduler>,
    pub rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    pub node: Option<String>,
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_size: Option<u32>,
    /// The CPUs the task may run on (its affinity mask): how many, and which
    /// (`0-3,8`).
    pub cpus_allowed: u32,
    pub cpus_allowed_list: String,
    /// The most threads one process of the app's tree (it and its descendants) had at
    /// any sample
    /// (every [`crate::threads::THREAD_SAMPLE_INTERVAL`]); None when no sample saw the app.
    pub threads_max: Option<u32>,
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub cpu_s: f64,
    pub max_rss_kib: u64,
    pub wall_s: f64,
    pub end: TaskEnd,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// The last signal the wrapper passed on to the app's group (the launcher stopping
    /// the step at a time limit or a cancel), when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_signal: Option<i32>,
}

/// A task record's CPU may exceed its wall time × allotted cores by this factor (the
/// kernel's accounting and the record's clock are read at slightly different moments);
/// past it the record is not a measurement of that task.
pub const CPU_WALL_TOLERANCE: f64 = 1.25;
/// Seconds of CPU a task record may show beyond that product (clock-tick granularity of a
/// short task).
pub const CPU_SLACK_S: f64 = 0.1;

pub use crate::untrusted::RecordProblem;

/// What is wrong with one task record, if anything: figures finite and non-negative, at
/// least one allotted CPU, its rank within the step, CPU ≤ wall × allotted cores ×
/// [`CPU_WALL_TOLERANCE`] + [`CPU_SLACK_S`].
pub fn check_task(t: &TaskRecord) -> Result<(), String> {
    for (name, v) in [
        ("cpu_user_s", t.cpu_user_s),
        ("cpu_system_s", t.cpu_system_s),
        ("cpu_s", t.cpu_s),
        ("wall_s", t.wall_s),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!("{name} {v} is not a finite number ≥ 0"));
        }
    }
    if t.cpus_allowed == 0 {
        return Err("cpus_allowed is 0".into());
    }
    if let (Some(rank), Some(size)) = (t.rank, t.step_size)
        && rank >= size
    {
        return Err(format!("rank {rank} is not within a step of {size} tasks"));
    }
    let cpu = t.cpu_s.max(t.cpu_user_s + t.cpu_system_s);
    let most = t.wall_s * f64::from(t.cpus_allowed) * CPU_WALL_TOLERANCE + CPU_SLACK_S;
    if cpu > most {
        return Err(format!(
            "{cpu} CPU seconds in {} s of wall time on {} allotted cores is more than a task can use",
            t.wall_s, t.cpus_allowed
        ));
    }
    Ok(())
}

/// The task records of one attempt (`tasks.attempt-N/` of `run_dir`), in rank order, each
/// read as untrusted ([`crate::untrusted`]) and checked ([`check_task`], ranks unique);
/// the first problem, naming the file, when any record is unreadable or fails a rule (a
/// figure from part of the step, or from a planted file, would be a wrong figure).
pub fn read_records(run_dir: &Path, attempt: u32) -> Result<Vec<TaskRecord>, RecordProblem> {
    let folder = PathBuf::from(crate::files::attempt_file(TASKS_DIR, attempt));
    let records: Vec<(String, TaskRecord)> = crate::untrusted::read_json_records(run_dir, &folder)?;
    let mut ranks = std::collections::BTreeMap::new();
    for (file, r) in &records {
        let problem = |why: String| RecordProblem {
            file: file.clone(),
            why,
        };
        check_task(r).map_err(problem)?;
        if let Some(rank) = r.rank
            && let Some(first) = ranks.insert(rank, file.clone())
        {
            return Err(problem(format!("rank {rank} again (first in {first})")));
        }
    }
    let mut records: Vec<TaskRecord> = records.into_iter().map(|(_, r)| r).collect();
    records.sort_by_key(|r| (r.rank.unwrap_or(u32::MAX), r.host.clone()));
    Ok(records)
}

/// The run's resources from its tasks: CPU seconds summed, RSS the largest task's peak;
/// energy the sum over the step's node records when there are any and every node has a
/// figure ([`crate::nodes::step_energy`]; absent otherwise, the node records saying
/// which node lacks one and why), else (no node records) the batch host's reading
/// around the step only when every task ran on that host, since it counts that node
/// alone. None — not measured — when there are no
/// records, or when the launcher said how many tasks it started and fewer left one (a
/// total over part of the step would be a wrong figure, not a low one).
pub fn totals(
    tasks: &[TaskRecord],
    batch_host: &str,
    batch_energy_j: Option<f64>,
    nodes: &[crate::nodes::NodeRecord],
) -> Option<Resources> {
    let first = tasks.first()?;
    let expected = first.step_size.map(|n| n as usize);
    if expected.is_some_and(|n| n != tasks.len()) {
        return None;
    }
    let on_batch_host = tasks.iter().all(|t| t.host == batch_host);
    let energy_j = if nodes.is_empty() {
        batch_energy_j.filter(|_| on_batch_host)
    } else {
        crate::nodes::step_energy(nodes).ok()
    };
    Some(Resources {
        cpu_user_s: tasks.iter().map(|t| t.cpu_user_s).sum(),
        cpu_system_s: tasks.iter().map(|t| t.cpu_system_s).sum(),
        max_rss_kib: tasks.iter().map(|t| t.max_rss_kib).max().unwrap_or(0),
        energy_j,
        energy_source: energy_j.map(|_| EnergySource::Rapl),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job_env::env;

    /// The variables as this machine's real Slurm 22.05 and Flux 0.88 set them per task.
    #[test]
    fn a_task_is_named_by_the_launcher_that_started_it() {
        let slurm = [
            ("SLURM_PROCID", "1"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_STEP_NUM_TASKS", "2"),
            ("SLURM_NTASKS", "4"),
            ("SLURMD_NODENAME", "vm"),
        ];
        let s = TaskIdentity::from_env(env(&slurm));
        assert_eq!(
            s,
            TaskIdentity {
                scheduler: Some(StepScheduler::Slurm),
                rank: Some(1),
                local_rank: Some(1),
                node: Some("vm".into()),
                step_size: Some(2),
            }
        );
        assert!(!s.first_on_node());
        // Flux inside a Slurm job: Flux launched this task.
        let flux = [
            ("FLUX_TASK_RANK", "0"),
            ("FLUX_TASK_LOCAL_ID", "0"),
            ("FLUX_JOB_SIZE", "2"),
            ("FLUX_URI", "local:///var/lib/optgate-flux/run/local-3"),
            ("SLURM_PROCID", "5"),
        ];
        let f = TaskIdentity::from_env(env(&flux));
        assert_eq!(f.scheduler, Some(StepScheduler::Flux));
        assert_eq!((f.rank, f.node.as_deref()), (Some(0), Some("3")));
        assert!(f.first_on_node());
        let none = TaskIdentity::from_env(env(&[]));
        assert_eq!(none, TaskIdentity::default());
        assert!(none.first_on_node());
        assert_eq!(none.record_name(42), "pid-42.json");
        assert_eq!(s.record_name(42), "rank-1.json");
    }

    #[test]
    fn the_broker_rank_is_the_number_after_local() {
        assert_eq!(
            flux_broker_rank("local:///run/local-12").as_deref(),
            Some("12")
        );
        assert_eq!(flux_broker_rank("local:///run/local-").as_deref(), None);
        assert_eq!(flux_broker_rank("ssh://host/run/x").as_deref(), None);
        assert_eq!(flux_broker_rank("local:///run/local-1x").as_deref(), None);
    }

    fn task(rank: u32, host: &str, cpu: f64, rss: u64, size: Option<u32>) -> TaskRecord {
        TaskRecord {
            scheduler: Some(StepScheduler::Slurm),
            rank: Some(rank),
            local_rank: Some(rank),
            node: Some(host.into()),
            host: host.into(),
            step_size: size,
            cpus_allowed: 2,
            cpus_allowed_list: "0-1".into(),
            threads_max: Some(1),
            cpu_user_s: cpu,
            cpu_system_s: 0.5,
            cpu_s: cpu + 0.5,
            max_rss_kib: rss,
            wall_s: 1.0,
            end: TaskEnd::Exited,
            exit_code: Some(0),
            signal: None,
            forwarded_signal: None,
        }
    }

    /// Planted bugs caught: RSS summed instead of the peak, CPU of one task only, energy of
    /// the batch host credited to a step that ran elsewhere, a partial step totalled.
    #[test]
    fn the_runs_totals_are_the_sum_of_cpu_and_the_peak_of_rss() {
        let both = [
            task(0, "n1", 2.0, 100, Some(2)),
            task(1, "n1", 3.0, 300, Some(2)),
        ];
        let t = totals(&both, "n1", Some(9.0), &[]).unwrap();
        assert_eq!(
            (t.cpu_user_s, t.cpu_system_s, t.max_rss_kib),
            (5.0, 1.0, 300)
        );
        assert_eq!(
            (t.energy_j, t.energy_source),
            (Some(9.0), Some(EnergySource::Rapl))
        );
        let elsewhere = [
            task(0, "n1", 2.0, 100, Some(2)),
            task(1, "n2", 3.0, 300, Some(2)),
        ];
        assert_eq!(
            totals(&elsewhere, "n1", Some(9.0), &[]).unwrap().energy_j,
            None
        );
        // One of two tasks left no record: not measured rather than half the figure.
        assert_eq!(totals(&both[..1], "n1", None, &[]), None);
        assert_eq!(totals(&[], "n1", None, &[]), None);
        // A launcher that did not say how many: what is there.
        let no_size = [task(0, "n1", 2.0, 100, None)];
        assert_eq!(totals(&no_size, "n1", None, &[]).unwrap().cpu_user_s, 2.0);
    }

    /// With node records the step's energy is their sum, on every node, not the batch
    /// host's; one node without a figure leaves it absent. Planted bugs caught: the batch
    /// host's reading kept over the nodes' sum, a node without a figure counted as 0 J.
    #[test]
    fn the_steps_energy_is_summed_over_its_node_records() {
        use crate::nodes::{EnergyGap, NodeRecord};
        let node = |host: &str, energy: Result<f64, EnergyGap>| {
            let mut n = NodeRecord {
                node: None,
                host: host.into(),
                governor: "none".into(),
                load_avg: None,
                cores: Some(2),
                energy_j: None,
                energy_unmeasured: None,
            };
            n.set_energy(energy);
            n
        };
        let spread = [
            task(0, "n1", 2.0, 100, Some(2)),
            task(1, "n2", 3.0, 300, Some(2)),
        ];
        let both = [node("n1", Ok(4.0)), node("n2", Ok(5.5))];
        let t = totals(&spread, "n1", Some(100.0), &both).unwrap();
        assert_eq!(
            (t.energy_j, t.energy_source),
            (Some(9.5), Some(EnergySource::Rapl))
        );
        let gap = [
            node("n1", Ok(4.0)),
            node("n2", Err(EnergyGap::RaplUnreadable)),
        ];
        let t = totals(&spread, "n1", Some(100.0), &gap).unwrap();
        assert_eq!((t.energy_j, t.energy_source), (None, None));
    }

    /// Planted bugs caught (each alone makes its record a figure): no finiteness check
    /// (`1e308` summed to inf), negative CPU accepted, duplicate rank counted, rank past
    /// the step, CPU beyond wall × cores (a planted record's "50.3 of 1.5 cores").
    #[test]
    fn a_record_that_breaks_a_rule_is_not_measured_naming_the_file_and_the_rule() {
        let ok = task(0, "n1", 1.0, 1, Some(2));
        assert_eq!(check_task(&ok), Ok(()));
        let bad = |f: &dyn Fn(&mut TaskRecord)| {
            let mut t = ok.clone();
            f(&mut t);
            check_task(&t).unwrap_err()
        };
        assert!(bad(&|t| t.cpu_user_s = -1000.0).contains("cpu_user_s -1000"));
        assert!(bad(&|t| t.cpu_s = f64::NAN).contains("cpu_s NaN"));
        assert!(bad(&|t| t.wall_s = f64::INFINITY).contains("wall_s inf"));
        assert!(bad(&|t| t.rank = Some(2)).contains("rank 2 is not within a step of 2"));
        assert!(bad(&|t| t.cpu_user_s = 1e308).contains("more than a task can use"));
        assert!(bad(&|t| t.cpus_allowed = 0).contains("cpus_allowed is 0"));
        // Up to 1.25 × wall × cores + slack is still a measurement (2.6 s here).
        let mut edge = ok.clone();
        (edge.cpu_user_s, edge.cpu_system_s, edge.cpu_s) = (2.55, 0.0, 2.55);
        assert_eq!(check_task(&edge), Ok(()));
        edge.cpu_s = 2.7;
        assert!(check_task(&edge).is_err());

        let dir = tempfile::tempdir().unwrap();
        let tasks = tasks_dir(dir.path(), 1);
        std::fs::create_dir_all(&tasks).unwrap();
        let put = |name: &str, r: &TaskRecord| {
            std::fs::write(tasks.join(name), serde_json::to_vec(r).unwrap()).unwrap()
        };
        put("rank-0.json", &ok);
        put("rank-1.json", &ok);
        let err = read_records(dir.path(), 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tasks.attempt-1/rank-1.json: rank 0 again (first in tasks.attempt-1/rank-0.json)"
        );
        put("rank-1.json", &task(1, "n1", 1.0, 1, Some(2)));
        assert_eq!(read_records(dir.path(), 1).unwrap().len(), 2);
        std::fs::write(tasks.join("rank-1.json"), r#"{"cpu_user_s": 1e999}"#).unwrap();
        let err = read_records(dir.path(), 1).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("tasks.attempt-1/rank-1.json: not a record"),
            "{err}"
        );
        std::fs::remove_file(tasks.join("rank-1.json")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", tasks.join("rank-1.json")).unwrap();
        let err = read_records(dir.path(), 1).unwrap_err();
        assert!(err.to_string().contains("a symbolic link"), "{err}");
    }

    #[test]
    fn records_are_read_back_in_rank_order_and_temporaries_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = tasks_dir(dir.path(), 1);
        std::fs::create_dir_all(&tasks).unwrap();
        for r in [task(1, "n1", 1.0, 1, None), task(0, "n1", 1.0, 1, None)] {
            let name = format!("rank-{}.json", r.rank.unwrap());
            std::fs::write(tasks.join(name), serde_json::to_vec(&r).unwrap()).unwrap();
        }
        std::fs::write(tasks.join(".rank-2.json.tmp9"), "{}").unwrap();
        let back = read_records(dir.path(), 1).unwrap();
        assert_eq!(
            back.iter().map(|r| r.rank).collect::<Vec<_>>(),
            vec![Some(0), Some(1)]
        );
        assert!(read_records(dir.path(), 2).unwrap().is_empty());
    }
}

//! Utilisation, measured: per arm, how many cores each launched task was allotted, how many
//! it kept busy (CPU seconds over wall seconds) and how many threads it ran, and what that
//! says — cores left idle, or more busy threads than cores. Pure over the tasks' records;
//! docs/SCHEDULERS.md "Reading utilisation" explains the thresholds.

use serde::{Deserialize, Serialize};

/// An arm is `idle_cores` when its tasks, allotted at least this many cores, …
pub const IDLE_MIN_ALLOTTED: f64 = 2.0;
/// … kept busy less than this share of them. One busy thread of 2 allotted cores reads
/// about 1.0 (a little over with helper processes, a little under with start-up): 0.6 × 2 =
/// 1.2 flags it with room for both, while two busy threads (about 2.0) stay clear.
pub const IDLE_USED_SHARE: f64 = 0.6;
/// An arm is `oversubscribed` when its tasks ran more threads than allotted cores and kept
/// at least this share of the allotted cores busy (the threads compete for the cores).
pub const OVERSUBSCRIBED_USED_SHARE: f64 = 0.9;

/// What one task's record says about its use of the node (from `optgate step`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskUse {
    /// Cores in the task's affinity mask.
    pub cpus_allowed: u32,
    /// User plus system CPU seconds of the task and its children.
    pub cpu_s: f64,
    pub wall_s: f64,
    /// The most threads seen at once (None: not sampled).
    pub threads_max: Option<u32>,
}

/// What an arm's utilisation says, when it says anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UtilisationFinding {
    /// Most allotted cores were not used.
    IdleCores,
    /// More busy threads than allotted cores.
    Oversubscribed,
}

impl UtilisationFinding {
    /// The words of the proposal table's mark.
    pub fn label(self) -> &'static str {
        match self {
            UtilisationFinding::IdleCores => "idle cores",
            UtilisationFinding::Oversubscribed => "oversubscribed",
        }
    }
}

/// One arm's utilisation: medians over the tasks of its complete runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmUtilisation {
    pub arm: String,
    /// Cores allotted per task (the affinity mask's size).
    pub cores_allotted: f64,
    /// Cores kept busy per task: CPU seconds over wall seconds.
    pub cores_used: f64,
    /// Threads per task (None: no task's threads were sampled).
    pub threads: Option<f64>,
    pub finding: Option<UtilisationFinding>,
}

impl ArmUtilisation {
    /// One sentence for the text report ("each task used 1.0 of 2 allotted cores, 1 thread").
    pub fn describe(&self) -> String {
        let threads = self
            .threads
            .map(|t| format!(", {} thread{}", num(t), if t == 1.0 { "" } else { "s" }))
            .unwrap_or_default();
        let what = match self.finding {
            Some(UtilisationFinding::IdleCores) => ": most allotted cores idle",
            Some(UtilisationFinding::Oversubscribed) => ": more busy threads than cores",
            None => "",
        };
        format!(
            "{}: each task used {:.1} of {} allotted cores{threads}{what}",
            self.arm,
            self.cores_used,
            num(self.cores_allotted)
        )
    }
}

/// A count as it is read: "2", or "1.5" for a median between two.
fn num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The median of `v` (None when empty).
fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    })
}

/// What `allotted` cores, `used` busy cores and `threads` threads say.
pub fn finding(allotted: f64, used: f64, threads: Option<f64>) -> Option<UtilisationFinding> {
    if allotted >= IDLE_MIN_ALLOTTED && used < IDLE_USED_SHARE * allotted {
        return Some(UtilisationFinding::IdleCores);
    }
    match threads {
        Some(t) if t > allotted && used >= OVERSUBSCRIBED_USED_SHARE * allotted => {
            Some(UtilisationFinding::Oversubscribed)
        }
        _ => None,
    }
}

/// The utilisation of arm `arm` from its tasks' records; None when it has none (runs not
/// wrapped by `optgate step`, such as local runs) or none that ran for a measurable time.
pub fn arm_utilisation(arm: &str, tasks: &[TaskUse]) -> Option<ArmUtilisation> {
    let timed: Vec<&TaskUse> = tasks.iter().filter(|t| t.wall_s > 0.0).collect();
    let cores_allotted = median(timed.iter().map(|t| f64::from(t.cpus_allowed)).collect())?;
    let cores_used = median(timed.iter().map(|t| t.cpu_s / t.wall_s).collect())?;
    let threads = median(
        timed
            .iter()
            .filter_map(|t| t.threads_max.map(f64::from))
            .collect(),
    );
    Some(ArmUtilisation {
        arm: arm.to_string(),
        cores_allotted,
        cores_used,
        threads,
        finding: finding(cores_allotted, cores_used, threads),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(cpus: u32, cpu_s: f64, wall_s: f64, threads: u32) -> TaskUse {
        TaskUse {
            cpus_allowed: cpus,
            cpu_s,
            wall_s,
            threads_max: Some(threads),
        }
    }

    /// Both sides of the idle threshold: 1.0 and 1.19 of 2 cores are idle, 1.2 of 2 is not
    /// (catches `<=` for `<` and a share of 0.5: one busy thread's 1.0 must be flagged); a
    /// single allotted core is never idle, even unused (catches a missing
    /// `IDLE_MIN_ALLOTTED`).
    #[test]
    fn idle_cores_below_the_share_of_two_or_more_allotted() {
        for used in [1.0, 1.19] {
            assert_eq!(
                finding(2.0, used, Some(1.0)),
                Some(UtilisationFinding::IdleCores),
                "{used}"
            );
        }
        assert_eq!(finding(2.0, 1.2, Some(1.0)), None);
        assert_eq!(finding(1.0, 0.1, Some(1.0)), None);
        assert_eq!(
            finding(IDLE_MIN_ALLOTTED, 0.0, None),
            Some(UtilisationFinding::IdleCores)
        );
    }

    /// Both sides of the oversubscription threshold: 4 threads keeping 0.9 of 1 core busy
    /// are oversubscribed, 0.89 are not (catches a share other than 0.9); as many threads as
    /// cores is not (catches `>=` for `>`), nor unknown threads.
    #[test]
    fn oversubscribed_with_more_threads_than_cores_all_busy() {
        assert_eq!(
            finding(1.0, 0.9, Some(4.0)),
            Some(UtilisationFinding::Oversubscribed)
        );
        assert_eq!(finding(1.0, 0.89, Some(4.0)), None);
        assert_eq!(finding(2.0, 2.0, Some(2.0)), None);
        assert_eq!(finding(2.0, 2.0, None), None);
    }

    /// The entry is the medians over tasks: the odd task out does not decide (catches a
    /// mean or the first task), and used cores are CPU over wall seconds (catches a swap).
    #[test]
    fn an_arms_utilisation_is_the_median_over_its_tasks() {
        let tasks = [
            task(2, 10.0, 10.0, 1),
            task(2, 11.0, 10.0, 1),
            task(2, 40.0, 10.0, 9),
        ];
        let u = arm_utilisation("baseline", &tasks).unwrap();
        assert_eq!(u.cores_allotted, 2.0);
        assert!((u.cores_used - 1.1).abs() < 1e-9, "{}", u.cores_used);
        assert_eq!(u.threads, Some(1.0));
        assert_eq!(u.finding, Some(UtilisationFinding::IdleCores));
        assert_eq!(
            u.describe(),
            "baseline: each task used 1.1 of 2 allotted cores, 1 thread: most allotted cores idle"
        );
    }

    /// An arm without task records (local runs) gets no entry, and a task that ran no
    /// measurable time is left out rather than dividing by zero (catches a NaN entry).
    #[test]
    fn no_tasks_no_entry() {
        assert_eq!(arm_utilisation("baseline", &[]), None);
        assert_eq!(arm_utilisation("baseline", &[task(2, 0.0, 0.0, 1)]), None);
    }

    /// The JSON spelling of the finding is snake_case (what the report's readers match).
    #[test]
    fn findings_serialise_in_snake_case() {
        let s = serde_json::to_string(&[
            UtilisationFinding::IdleCores,
            UtilisationFinding::Oversubscribed,
        ])
        .unwrap();
        assert_eq!(s, r#"["idle_cores","oversubscribed"]"#);
    }
}

//! Utilisation, measured: per arm, how many cores each launched task (or each run without a
//! launcher) was allotted, how many it kept busy (CPU seconds over wall seconds) and how
//! many threads it ran, and what that says — cores left idle, or more busy threads than
//! cores. Pure over the tasks' records and the runs' `core_use`; docs/SCHEDULERS.md
//! "Reading utilisation" explains the thresholds.

use serde::{Deserialize, Serialize};

/// An arm is `idle_cores` when its tasks, allotted at least this many cores, …
pub const IDLE_MIN_ALLOTTED: f64 = 2.0;
/// … kept busy less than this share of them. One busy thread of 2 allotted cores reads
/// about 1.0 (a little over with helper processes, a little under with start-up): 0.6 × 2 =
/// 1.2 flags it with room for both, while two busy threads (about 2.0) stay clear.
pub const IDLE_USED_SHARE: f64 = 0.6;
/// An arm is `oversubscribed` when its tasks ran more threads than allotted cores and kept
/// at least this share of the allotted cores busy (the threads compete for the cores) —
/// or were measured under load, where the other work, not the app, kept the share down.
pub const OVERSUBSCRIBED_USED_SHARE: f64 = 0.9;

/// What one task's record (from `optgate step`) or one local run's `core_use` (from the
/// run wrapper) says about its use of the node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskUse {
    /// Cores in the task's affinity mask.
    pub cpus_allowed: u32,
    /// User plus system CPU seconds of the task and its children.
    pub cpu_s: f64,
    pub wall_s: f64,
    /// The most threads seen at once (None: not sampled).
    pub threads_max: Option<u32>,
    /// The median runnable threads of the tree over the samples (None: not sampled).
    pub runnable_threads: Option<f64>,
    /// Its run was measured at a load above the node's CPUs (see the report's
    /// interference).
    pub loaded: bool,
}

/// What an arm's entry was measured on: launched tasks or whole local runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UseOf {
    /// The tasks `optgate step` recorded inside a launcher's step.
    #[default]
    Tasks,
    /// Runs without a launcher, measured by the run wrapper.
    Runs,
}

impl UseOf {
    fn word(self) -> &'static str {
        match self {
            UseOf::Tasks => "task",
            UseOf::Runs => "run",
        }
    }
}

/// The figures an arm's finding is judged on (medians over its tasks).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreFigures {
    pub allotted: f64,
    pub used: f64,
    pub threads: Option<f64>,
    pub runnable: Option<f64>,
    /// Most of the tasks were measured under load.
    pub loaded: bool,
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
    /// Runnable threads per task, the median of the samples' (None: not sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runnable_threads: Option<f64>,
    /// Most of the arm's tasks were measured at a load above the node's CPUs.
    #[serde(default)]
    pub under_load: bool,
    /// Tasks of launched steps, or local runs.
    #[serde(default)]
    pub of: UseOf,
    pub finding: Option<UtilisationFinding>,
}

impl ArmUtilisation {
    /// One sentence for the text report ("each task used 1.0 of 2 allotted cores, 1 thread").
    pub fn describe(&self) -> String {
        let threads = self
            .threads
            .map(|t| format!(", {} thread{}", num(t), if t == 1.0 { "" } else { "s" }))
            .unwrap_or_default();
        let held_down =
            self.under_load && self.cores_used < OVERSUBSCRIBED_USED_SHARE * self.cores_allotted;
        let what = match self.finding {
            Some(UtilisationFinding::IdleCores) => ": most allotted cores idle",
            Some(UtilisationFinding::Oversubscribed) if held_down => {
                ": more threads than cores (measured under load: the load, not the app, \
                 kept the cores from being busy)"
            }
            Some(UtilisationFinding::Oversubscribed) => ": more busy threads than cores",
            None => "",
        };
        format!(
            "{}: each {} used {:.1} of {} allotted cores{threads}{what}",
            self.arm,
            self.of.word(),
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

/// What the figures say. Idle: fewer cores busy than [`IDLE_USED_SHARE`] of two or more
/// allotted, and — where sampled — fewer runnable threads too (a load that kept the app's
/// threads waiting lowers the busy share, not the threads asking for cores).
/// Oversubscribed: more threads than cores, busy at [`OVERSUBSCRIBED_USED_SHARE`] or
/// measured under load.
pub fn finding(f: &CoreFigures) -> Option<UtilisationFinding> {
    let idle_bar = IDLE_USED_SHARE * f.allotted;
    if f.allotted >= IDLE_MIN_ALLOTTED
        && f.used < idle_bar
        && f.runnable.is_none_or(|r| r < idle_bar)
    {
        return Some(UtilisationFinding::IdleCores);
    }
    match f.threads {
        Some(t)
            if t > f.allotted && (f.loaded || f.used >= OVERSUBSCRIBED_USED_SHARE * f.allotted) =>
        {
            Some(UtilisationFinding::Oversubscribed)
        }
        _ => None,
    }
}

/// The utilisation of arm `arm` from its tasks' records (or its local runs' `core_use`,
/// `of`); None when it has none or none that ran for a measurable time.
pub fn arm_utilisation(arm: &str, of: UseOf, tasks: &[TaskUse]) -> Option<ArmUtilisation> {
    let timed: Vec<&TaskUse> = tasks.iter().filter(|t| t.wall_s > 0.0).collect();
    let cores_allotted = median(timed.iter().map(|t| f64::from(t.cpus_allowed)).collect())?;
    let cores_used = median(timed.iter().map(|t| t.cpu_s / t.wall_s).collect())?;
    let threads = median(
        timed
            .iter()
            .filter_map(|t| t.threads_max.map(f64::from))
            .collect(),
    );
    let runnable_threads = median(timed.iter().filter_map(|t| t.runnable_threads).collect());
    let under_load = 2 * timed.iter().filter(|t| t.loaded).count() > timed.len();
    let figures = CoreFigures {
        allotted: cores_allotted,
        used: cores_used,
        threads,
        runnable: runnable_threads,
        loaded: under_load,
    };
    Some(ArmUtilisation {
        arm: arm.to_string(),
        cores_allotted,
        cores_used,
        threads,
        runnable_threads,
        under_load,
        of,
        finding: finding(&figures),
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
            runnable_threads: None,
            loaded: false,
        }
    }

    /// The figures of an unloaded arm without runnable-thread samples.
    fn finding_of(allotted: f64, used: f64, threads: Option<f64>) -> Option<UtilisationFinding> {
        finding(&CoreFigures {
            allotted,
            used,
            threads,
            runnable: None,
            loaded: false,
        })
    }

    /// Both sides of the idle threshold: 1.0 and 1.19 of 2 cores are idle, 1.2 of 2 is not
    /// (catches `<=` for `<` and a share of 0.5: one busy thread's 1.0 must be flagged); a
    /// single allotted core is never idle, even unused (catches a missing
    /// `IDLE_MIN_ALLOTTED`).
    #[test]
    fn idle_cores_below_the_share_of_two_or_more_allotted() {
        for used in [1.0, 1.19] {
            assert_eq!(
                finding_of(2.0, used, Some(1.0)),
                Some(UtilisationFinding::IdleCores),
                "{used}"
            );
        }
        assert_eq!(finding_of(2.0, 1.2, Some(1.0)), None);
        assert_eq!(finding_of(1.0, 0.1, Some(1.0)), None);
        assert_eq!(
            finding_of(IDLE_MIN_ALLOTTED, 0.0, None),
            Some(UtilisationFinding::IdleCores)
        );
    }

    /// Both sides of the oversubscription threshold: 4 threads keeping 0.9 of 1 core busy
    /// are oversubscribed, 0.89 are not (catches a share other than 0.9); as many threads as
    /// cores is not (catches `>=` for `>`), nor unknown threads.
    #[test]
    fn oversubscribed_with_more_threads_than_cores_all_busy() {
        assert_eq!(
            finding_of(1.0, 0.9, Some(4.0)),
            Some(UtilisationFinding::Oversubscribed)
        );
        assert_eq!(finding_of(1.0, 0.89, Some(4.0)), None);
        assert_eq!(finding_of(2.0, 2.0, Some(2.0)), None);
        assert_eq!(finding_of(2.0, 2.0, None), None);
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
        let u = arm_utilisation("baseline", UseOf::Tasks, &tasks).unwrap();
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
        assert_eq!(arm_utilisation("baseline", UseOf::Runs, &[]), None);
        assert_eq!(
            arm_utilisation("baseline", UseOf::Runs, &[task(2, 0.0, 0.0, 1)]),
            None
        );
    }

    /// Under load, two runnable threads on 2 cores are not idle though the load left them
    /// 0.8 cores, while one runnable thread is (planted bugs caught: the runnable threads
    /// ignored — both idle —, or taken alone — an unsampled arm never idle).
    #[test]
    fn runnable_threads_tell_a_loaded_arm_from_an_idle_one() {
        let loaded = |used: f64, runnable: Option<f64>| {
            finding(&CoreFigures {
                allotted: 2.0,
                used,
                threads: Some(2.0),
                runnable,
                loaded: true,
            })
        };
        assert_eq!(loaded(0.8, Some(2.0)), None);
        assert_eq!(loaded(0.8, Some(1.0)), Some(UtilisationFinding::IdleCores));
        assert_eq!(loaded(0.8, None), Some(UtilisationFinding::IdleCores));
        assert_eq!(loaded(1.5, Some(1.0)), None);
    }

    /// 4 threads on 1 allotted core that read 0.77 busy (the 4-broker Flux under other
    /// work): oversubscribed when measured under load, and the sentence says the load held
    /// it down; the same figures unloaded are not flagged. Planted bugs caught: the load
    /// ignored, the load alone enough (as many threads as cores).
    #[test]
    fn more_threads_than_cores_under_load_is_oversubscribed_below_the_busy_share() {
        let mut t = task(1, 0.77, 1.0, 4);
        t.loaded = true;
        let u = arm_utilisation("v", UseOf::Tasks, &[t, t, task(1, 0.77, 1.0, 4)]).unwrap();
        assert!(u.under_load);
        assert_eq!(u.finding, Some(UtilisationFinding::Oversubscribed));
        assert_eq!(
            u.describe(),
            "v: each task used 0.8 of 1 allotted cores, 4 threads: more threads than cores \
             (measured under load: the load, not the app, kept the cores from being busy)"
        );
        let quiet = arm_utilisation("v", UseOf::Runs, &[task(1, 0.77, 1.0, 4)]).unwrap();
        assert_eq!((quiet.under_load, quiet.finding), (false, None));
        let mut even = task(2, 0.5, 1.0, 2);
        even.loaded = true;
        even.runnable_threads = Some(2.0);
        let u = arm_utilisation("v", UseOf::Runs, &[even]).unwrap();
        assert_eq!(u.finding, None);
        assert!(
            u.describe().starts_with("v: each run used 0.5 of 2"),
            "{}",
            u.describe()
        );
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

//! One history: each ended execution — the daemon's and `optgate run`'s — becomes a row
//! of the user's database (`Store::record_execution`) with its identity and outcome, and
//! an experiment's history is read back with its change points (on the baseline's
//! steady-state value and on each variant's speed-up, `optgate_stats::change_points`).
//!
//! The daemon's engine writes the rows of the experiments its database queued as ended
//! ([`record_due`]); `optgate run` writes its own into the user's database when it ends
//! ([`record_in_user_history`]), the only write a process other than the daemon makes there.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use optgate_report::Report;
use optgate_sched::command::{CommandRunner, Invocation, SystemRunner};
use optgate_stats::change_points::{ChangePointConfig, MAX_CHANGE_POINT_SERIES, change_points};
use optgate_store::{
    BuildIdentity, Execution, ExecutionKind, ExperimentRow, RunCounts, Store, StoreError,
    VariantOutcome,
};

use crate::error::DaemonError;
use crate::paths::StatePaths;

/// How long each `git` question about a workdir may take: a workdir on a hung network
/// file system must not hold up a submission.
pub const GIT_DEADLINE: Duration = Duration::from_secs(5);

/// The series name of the baseline's steady-state value in [`ChangePointJson::series`].
pub const BASELINE_SERIES: &str = "baseline";

/// The workdir's git commit and dirty flag, asked of `git` with [`GIT_DEADLINE`] each;
/// none when git is absent, the workdir is no checkout, or git does not answer in time.
pub fn build_identity(workdir: &Path) -> BuildIdentity {
    let runner = SystemRunner {
        deadline: GIT_DEADLINE,
        stop: None,
    };
    let ask = |args: &[&str]| {
        let inv = Invocation::new("git", args.iter().copied()).cwd(workdir);
        runner
            .run(&inv)
            .ok()
            .filter(|o| o.success())
            .map(|o| o.stdout)
    };
    let Some(commit) = ask(&["rev-parse", "--verify", "HEAD"]) else {
        return BuildIdentity::default();
    };
    let dirty = ask(&["status", "--porcelain", "--untracked-files=no"]);
    identity_from(&commit, dirty.as_deref())
}

/// The identity from `git rev-parse HEAD`'s and `git status --porcelain`'s outputs (pure).
pub fn identity_from(rev_parse: &str, status: Option<&str>) -> BuildIdentity {
    let commit = rev_parse.trim();
    let is_hash = !commit.is_empty() && commit.chars().all(|c| c.is_ascii_hexdigit());
    BuildIdentity {
        git_commit: is_hash.then(|| commit.to_string()),
        git_dirty: is_hash
            .then_some(())
            .and(status.map(|s| !s.trim().is_empty())),
    }
}

/// The execution an ended experiment's stored row, report and counts make (pure): the
/// decisions, speed-ups and System Impact of its last look, the baseline's steady-state
/// value, and the hosts its runs ran on.
pub fn execution_of(
    row: &ExperimentRow,
    kind: ExecutionKind,
    build: BuildIdentity,
    report: Option<&Report>,
    counts: &RunCounts,
    looks: u32,
) -> Execution {
    Execution {
        id: row.id.clone(),
        name: row.name.clone(),
        kind,
        scheduler: row.scheduler,
        state: row.state,
        state_reason: row.state_reason.clone(),
        source_path: row.source_path.clone(),
        source_sha256: row.source_sha256.clone(),
        root: row.root.clone(),
        build,
        nodes: report.map(nodes_of).unwrap_or_default(),
        started_at: row.created_at.clone(),
        ended_at: row.updated_at.clone(),
        runs_completed: counts.completed,
        runs_total: counts.total,
        looks,
        baseline: report.map(|r| r.analysis.baseline.clone()),
        baseline_median_s: report.and_then(baseline_steady_value),
        variants: report.map(outcomes_of).unwrap_or_default(),
    }
}

fn outcomes_of(report: &Report) -> Vec<VariantOutcome> {
    report
        .analysis
        .variants
        .iter()
        .map(|v| VariantOutcome {
            variant: v.name.clone(),
            decision: v.decision,
            reason: v.reason.clone(),
            speedup: v.speedup.estimate,
            speedup_ci_low: v.speedup.ci_low,
            speedup_ci_high: v.speedup.ci_high,
            system_impact_pct: v.system_impact_pct,
            system_impact_ci_low: v.system_impact_ci_low,
            system_impact_ci_high: v.system_impact_ci_high,
        })
        .collect()
}

/// The baseline's steady-state value: the mean, over the steady epochs the analysis used
/// (the first variant's; every epoch when none), of the baseline's per-epoch medians.
fn baseline_steady_value(report: &Report) -> Option<f64> {
    let arm = report
        .arms
        .iter()
        .find(|a| a.name == report.analysis.baseline)?;
    let steady: BTreeSet<u32> = report
        .analysis
        .variants
        .iter()
        .find(|v| !v.steady_epochs.is_empty())
        .map(|v| v.steady_epochs.iter().copied().collect())
        .unwrap_or_default();
    let medians: Vec<f64> = arm
        .epochs
        .iter()
        .filter(|e| steady.is_empty() || steady.contains(&e.epoch))
        .map(|e| e.median)
        .collect();
    (!medians.is_empty()).then(|| medians.iter().sum::<f64>() / medians.len() as f64)
}

/// The hosts the report's runs name (`provenance.runs[].host`, else `provenance.node`).
fn nodes_of(report: &Report) -> Vec<String> {
    let Some(p) = &report.provenance else {
        return Vec::new();
    };
    let mut hosts: BTreeSet<String> = p["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["host"].as_str().map(str::to_string))
        .collect();
    if hosts.is_empty()
        && let Some(h) = p["node"]["hostname"].as_str()
    {
        hosts.insert(h.to_string());
    }
    hosts.into_iter().collect()
}

/// The execution of experiment `id` as its database holds it, if it ended.
pub fn read_execution(
    s: &Store,
    id: &str,
    kind: ExecutionKind,
) -> Result<Option<Execution>, StoreError> {
    let Some(row) = s.experiment(id)?.filter(|r| r.state.is_terminal()) else {
        return Ok(None);
    };
    // A report that does not parse is left out: the execution is still recorded.
    let report = s
        .report(id)?
        .and_then(|t| serde_json::from_str::<Report>(&t).ok());
    let looks = s.looks(id)?.last().map_or(0, |l| l.look);
    let (counts, build) = (s.run_counts_of(id)?, s.build_identity(id)?);
    Ok(Some(execution_of(
        &row,
        kind,
        build,
        report.as_ref(),
        &counts,
        looks,
    )))
}

/// Writes the history row of every experiment the database queued as ended (the
/// daemon's engine, each pass; nothing to do costs one indexed read). Returns how many.
pub fn record_due(s: &mut Store) -> Result<usize, StoreError> {
    let due = s.executions_due()?;
    for id in &due {
        match read_execution(s, id, ExecutionKind::Daemon)? {
            Some(e) => s.record_execution(&e)?,
            // Gone, or reopened (a resumed execution ends again later).
            None => s.drop_execution_due(id)?,
        }
    }
    Ok(due.len())
}

/// `optgate run`'s one write to the user's database: its ended execution, as a `run`
/// row (the state directory checked first, as the daemon checks it; the database opened
/// without its integrity check, created and migrated when there is none yet).
pub fn record_in_user_history(paths: &StatePaths, e: &Execution) -> Result<(), DaemonError> {
    paths.prepare_dir()?;
    let mut store = Store::open_for_history(&paths.db())?;
    for file in paths.state_files() {
        crate::paths::private_file(&file)?;
    }
    let row = Execution {
        kind: ExecutionKind::Run,
        ..e.clone()
    };
    store.record_execution(&row)?;
    Ok(())
}

/// One change in a series of the history (`optgate history --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangePointJson {
    /// [`BASELINE_SERIES`] (its steady-state value) or a variant's name (its speed-up).
    pub series: String,
    /// The 1-based index, among the listed executions, of the first at the new level.
    pub at: usize,
    pub before: f64,
    pub after: f64,
    pub p: f64,
}

/// An experiment's history: its executions, oldest first, and the changes found in them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub executions: Vec<Execution>,
    pub change_points: Vec<ChangePointJson>,
    /// Every series searched (the baseline, then each variant), changed or not.
    pub series: Vec<String>,
    /// What the reader must know about what was searched: a series longer than the search
    /// covers ([`MAX_CHANGE_POINT_SERIES`]), a damaged row left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The history of experiment `name` with its change points (pure over the rows).
pub fn history_of(executions: Vec<Execution>) -> History {
    let mut series = vec![BASELINE_SERIES.to_string()];
    for e in &executions {
        for v in &e.variants {
            if !series.contains(&v.variant) {
                series.push(v.variant.clone());
            }
        }
    }
    let mut change_points = Vec::new();
    let mut notes = Vec::new();
    for name in &series {
        let points = series_points(name, &executions);
        change_points.extend(series_changes(name, &points));
        notes.extend(searched_only_in_part(name, &points));
    }
    History {
        executions,
        change_points,
        series,
        notes,
    }
}

/// [`history_of`] the rows read, each damaged one left out and named in a note.
pub fn history_of_rows(rows: Vec<optgate_store::EachExecution>) -> History {
    let mut damaged = Vec::new();
    let executions = rows
        .into_iter()
        .filter_map(|row| {
            row.map_err(|d| {
                damaged.push(format!(
                    "execution {} left out: its row is damaged ({})",
                    d.id, d.error
                ))
            })
            .ok()
        })
        .collect();
    let mut h = history_of(executions);
    h.notes.extend(damaged);
    h
}

/// The positions (0-based execution index) and finite values of one series.
fn series_points(name: &str, executions: &[Execution]) -> Vec<(usize, f64)> {
    executions
        .iter()
        .enumerate()
        .filter_map(|(i, e)| value_of(e, name).map(|v| (i, v)))
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// "baseline: only its newest 500 of 10000 values were searched for changes (executions
/// 9501–10000)" when the series is longer than the search covers.
fn searched_only_in_part(name: &str, points: &[(usize, f64)]) -> Option<String> {
    let first = points.len().checked_sub(MAX_CHANGE_POINT_SERIES)?;
    (first > 0).then(|| {
        format!(
            "{name}: only its newest {MAX_CHANGE_POINT_SERIES} of {} values were searched for \
             changes (executions {}–{}); a change before execution {} is not looked for",
            points.len(),
            points[first].0 + 1,
            points[points.len() - 1].0 + 1,
            points[first].0 + 1
        )
    })
}

/// The changes of one series: its values where an execution has one, each change's
/// position mapped back to the execution's 1-based index.
fn series_changes(name: &str, points: &[(usize, f64)]) -> Vec<ChangePointJson> {
    let values: Vec<f64> = points.iter().map(|p| p.1).collect();
    change_points(&values, &ChangePointConfig::default())
        .into_iter()
        .map(|c| ChangePointJson {
            series: name.to_string(),
            at: points[c.index].0 + 1,
            before: c.before,
            after: c.after,
            p: c.p,
        })
        .collect()
}

/// An execution's value in a series: the baseline's steady-state value, or a variant's
/// speed-up estimate.
pub fn value_of(e: &Execution, series: &str) -> Option<f64> {
    if series == BASELINE_SERIES {
        return e.baseline_median_s;
    }
    e.variants
        .iter()
        .find(|v| v.variant == series)
        .and_then(|v| v.speedup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_store::{ExperimentState, SchedulerKind};

    /// An execution row with the baseline at `base` and omp6's speed-up `speedup`.
    fn execution(i: usize, base: Option<f64>, speedup: f64) -> Execution {
        Execution {
            id: format!("e{i}"),
            name: "demo".into(),
            kind: ExecutionKind::Daemon,
            scheduler: SchedulerKind::Local,
            state: ExperimentState::Decided,
            state_reason: None,
            source_path: "/w/exp.yaml".into(),
            source_sha256: String::new(),
            root: String::new(),
            build: BuildIdentity::default(),
            nodes: Vec::new(),
            started_at: format!("2026-01-0{i}"),
            ended_at: String::new(),
            runs_completed: 6,
            runs_total: 6,
            looks: 1,
            baseline: Some("baseline".into()),
            baseline_median_s: base,
            variants: vec![VariantOutcome {
                variant: "omp6".into(),
                decision: optgate_stats::Decision::Accept,
                reason: String::new(),
                speedup: Some(speedup),
                speedup_ci_low: None,
                speedup_ci_high: None,
                system_impact_pct: None,
                system_impact_ci_low: None,
                system_impact_ci_high: None,
            }],
        }
    }

    const NOISE: [f64; 8] = [0.0, 0.02, -0.01, 0.01, -0.02, 0.015, -0.005, 0.005];

    /// Eight executions (rows as the store holds them), the baseline 15 % slower from the
    /// fifth on: one change, in the baseline, at 5 (1-based); omp6's speed-up unchanged.
    #[test]
    fn a_baseline_step_at_the_fifth_of_eight_is_found_at_five() {
        let rows = (0..8)
            .map(|i| {
                let level = if i >= 4 { 1.15 } else { 1.0 };
                execution(
                    i,
                    Some(level * (1.0 + NOISE[i])),
                    1.3 * (1.0 + NOISE[7 - i]),
                )
            })
            .collect();
        let h = history_of(rows);
        assert_eq!(h.series, ["baseline", "omp6"]);
        assert_eq!(h.change_points.len(), 1, "{:?}", h.change_points);
        let c = &h.change_points[0];
        assert_eq!((c.series.as_str(), c.at), ("baseline", 5));
        assert!((c.after / c.before - 1.15).abs() < 0.03, "{c:?}");
    }

    /// A series longer than the search covers says which executions were searched; one
    /// that fits (gaps not counted) says nothing.
    #[test]
    fn a_series_longer_than_the_search_says_what_was_searched() {
        let n = MAX_CHANGE_POINT_SERIES + 3;
        let rows: Vec<Execution> = (0..n).map(|i| execution(i, Some(1.0), 1.3)).collect();
        let note =
            searched_only_in_part("baseline", &series_points("baseline", &rows)).expect("a note");
        assert!(
            note.contains(&format!("newest 500 of {n} values"))
                && note.contains(&format!("(executions 4–{n})")),
            "{note}"
        );
        let with_gaps: Vec<Execution> = (0..n)
            .map(|i| execution(i, (i % 200 != 7).then_some(1.0), 1.3))
            .collect();
        assert_eq!(
            searched_only_in_part("baseline", &series_points("baseline", &with_gaps)),
            None
        );
    }

    /// A damaged row is left out of the history and named; the others are all there.
    #[test]
    fn a_damaged_row_is_left_out_and_named() {
        let damaged = optgate_store::DamagedExperimentRow {
            id: "e-bad".into(),
            name: "demo".into(),
            error: Box::new(optgate_store::StoreError::BadValue {
                path: "/x/optgate.db".into(),
                what: "executions.variants",
                value: "[{".into(),
            }),
        };
        let rows = vec![
            Ok(execution(0, Some(1.0), 1.3)),
            Err(damaged),
            Ok(execution(1, Some(1.0), 1.3)),
        ];
        let h = history_of_rows(rows);
        assert_eq!(h.executions.len(), 2);
        assert_eq!(h.notes.len(), 1, "{:?}", h.notes);
        assert!(
            h.notes[0].contains("execution e-bad left out") && h.notes[0].contains("variants"),
            "{:?}",
            h.notes
        );
    }

    /// Eight stable executions: no change in any series.
    #[test]
    fn eight_stable_executions_have_no_change_point() {
        let rows = (0..8)
            .map(|i| execution(i, Some(1.0 + NOISE[i]), 1.3 * (1.0 + NOISE[7 - i])))
            .collect();
        assert!(history_of(rows).change_points.is_empty());
    }

    /// An execution without a baseline value (a failed one) is left out of that series,
    /// and a change's `at` still names the execution by its place in the whole list.
    #[test]
    fn a_gap_in_a_series_keeps_at_pointing_at_the_execution() {
        let rows = (0..9)
            .map(|i| {
                let level = if i >= 5 { 1.15 } else { 1.0 };
                let base = (i != 2).then(|| level * (1.0 + NOISE[i % 8]));
                execution(i, base, 1.3)
            })
            .collect();
        let h = history_of(rows);
        let at: Vec<(String, usize)> = h
            .change_points
            .iter()
            .map(|c| (c.series.clone(), c.at))
            .collect();
        assert_eq!(at, [("baseline".to_string(), 6)]);
    }

    /// A real checkout: its commit, clean, then dirty after a tracked file changes; a
    /// directory that is no checkout has no identity (and no error).
    #[test]
    fn a_workdirs_git_identity_is_its_commit_and_dirty_flag() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(build_identity(dir.path()), BuildIdentity::default());
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t", "-C"])
                .arg(dir.path())
                .args(args)
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        std::fs::write(dir.path().join("app.c"), "int main(){}\n").unwrap();
        if !(git(&["init", "-q"]) && git(&["add", "app.c"]) && git(&["commit", "-qm", "x"])) {
            eprintln!("no git here: only the no-checkout case is checked");
            return;
        }
        let clean = build_identity(dir.path());
        assert_eq!(
            clean.git_commit.as_ref().map(String::len),
            Some(40),
            "{clean:?}"
        );
        assert_eq!(clean.git_dirty, Some(false));
        std::fs::write(dir.path().join("app.c"), "int main(){return 1;}\n").unwrap();
        assert_eq!(build_identity(dir.path()).git_dirty, Some(true));
    }

    #[test]
    fn a_git_identity_needs_a_hash() {
        let id = identity_from("0123abcd\n", Some(" M src/main.c\n"));
        assert_eq!(id.git_commit.as_deref(), Some("0123abcd"));
        assert_eq!(id.git_dirty, Some(true));
        assert_eq!(identity_from("0123abcd", Some("")).git_dirty, Some(false));
        assert_eq!(
            identity_from("fatal: not a git repository", Some("")),
            BuildIdentity::default()
        );
        assert_eq!(identity_from("0123abcd", None).git_dirty, None);
    }
}

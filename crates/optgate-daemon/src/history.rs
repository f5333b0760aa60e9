//! One history: each ended execution — the daemon's and `optgate run`'s — becomes a row
//! of the user's database (`Store::record_execution`) with its identity and outcome. It is
//! read back, with its change points, by `optgate_client::history`.
//!
//! The daemon's engine writes the rows of the experiments its database queued as ended
//! ([`record_due`]); `optgate run` writes its own into the user's database when it ends
//! ([`record_in_user_history`]), the only write a process other than the daemon makes there.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use optgate_client::StatePaths;
use optgate_report::Report;
use optgate_sched::command::{CommandRunner, Invocation, SystemRunner};
use optgate_store::{
    BuildIdentity, Execution, ExecutionKind, ExperimentRow, RunCounts, Store, StoreError,
    VariantOutcome,
};

use crate::error::DaemonError;

/// How long each `git` question about a workdir may take: a workdir on a hung network
/// file system must not hold up a submission.
pub const GIT_DEADLINE: Duration = Duration::from_secs(5);

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
        optgate_client::paths::private_file(&file)?;
    }
    let row = Execution {
        kind: ExecutionKind::Run,
        ..e.clone()
    };
    store.record_execution(&row)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

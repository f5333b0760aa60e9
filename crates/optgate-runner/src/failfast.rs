//! Fail fast (issue 12): after each completed block, whether what the runs so far left on
//! disk already says that more runs cannot help — the metric pattern matched nothing in
//! any run, or every run of an arm failed — so that `optgate run` and the daemon stop the
//! experiment (or that arm) with the reason instead of executing every run first.

use std::collections::{BTreeMap, BTreeSet};

use optgate_experiment::{BASELINE, Experiment};
use optgate_wrapper::run::STDOUT_FILE;

use crate::collect::{RunResult, RunStatus};
use crate::layout::Layout;

/// Lines and bytes of a run's stdout quoted when the metric matched nothing.
pub const STDOUT_EXCERPT_LINES: usize = 5;
pub const STDOUT_EXCERPT_BYTES: usize = 300;

/// What the runs so far say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailFast {
    /// Stop the whole experiment, with this reason.
    pub stop_experiment: Option<String>,
    /// Stop these arms (no more runs of them), with the reason per arm.
    pub stop_arms: BTreeMap<String, String>,
}

/// Judges the finished runs `done` (every run so far, not-applicable arms left out) after
/// block `block` completed. The metric rule: no run has yielded the metric, and a run's
/// output did not match the pattern at all. The arm rule: no run of the arm completed and
/// all of its finished runs failed; the baseline stopped stops the experiment.
pub fn judge(exp: &Experiment, layout: &Layout, block: u32, done: &[RunResult]) -> FailFast {
    let mut out = FailFast::default();
    let complete: BTreeSet<&str> = done
        .iter()
        .filter(|r| r.status == RunStatus::Complete)
        .map(|r| r.arm.as_str())
        .collect();
    let no_match = done.iter().find(
        |r| matches!(&r.status, RunStatus::Failed { reason } if reason.contains("never matched")),
    );
    if complete.is_empty()
        && let Some(r) = no_match
    {
        let m = &exp.file.metric;
        let pattern = m.pattern.as_deref().unwrap_or_default();
        out.stop_experiment = Some(format!(
            "stopped after block {block}: the metric pattern `{pattern}` matched nothing in any \
             run (run {}: {}); its output begins: {}",
            r.id,
            match &r.status {
                RunStatus::Failed { reason } => reason.as_str(),
                _ => "",
            },
            excerpt(layout, r, m.file.as_deref())
        ));
        return out;
    }
    let mut arms: BTreeMap<&str, Vec<&RunResult>> = BTreeMap::new();
    for r in done {
        arms.entry(r.arm.as_str()).or_default().push(r);
    }
    for (arm, runs) in arms {
        if complete.contains(arm)
            || !runs
                .iter()
                .all(|r| matches!(r.status, RunStatus::Failed { .. }))
        {
            continue;
        }
        let first = runs[0];
        let RunStatus::Failed { reason } = &first.status else {
            continue;
        };
        let tail = first
            .stderr_tail
            .as_ref()
            .map(|t| format!("; its stderr ends: {t}"))
            .unwrap_or_default();
        let why = format!(
            "stopped after block {block}: every run of `{arm}` so far failed ({} of {}) — run {}: \
             {reason}{tail}",
            runs.len(),
            runs.len(),
            first.id
        );
        if arm == BASELINE {
            out.stop_experiment = Some(why);
            return out;
        }
        out.stop_arms.insert(arm.to_string(), why);
    }
    out
}

/// The first lines of the run's metric source (stdout, or the metric file).
fn excerpt(layout: &Layout, r: &RunResult, file: Option<&str>) -> String {
    let dir = layout.run_dir(&r.id);
    let path = match (&file, &r.status) {
        (Some(f), _) if !f.is_empty() => dir.join(f),
        _ => dir.join(STDOUT_FILE),
    };
    let Ok(bytes) = std::fs::read(&path) else {
        return format!("({} cannot be read)", path.display());
    };
    let head = &bytes[..bytes.len().min(4 * STDOUT_EXCERPT_BYTES)];
    let text = String::from_utf8_lossy(head);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(STDOUT_EXCERPT_LINES)
        .collect();
    if lines.is_empty() {
        return "(nothing: the output is empty)".to_string();
    }
    let joined = lines.join(" | ");
    match joined.char_indices().nth(STDOUT_EXCERPT_BYTES) {
        Some((i, _)) => format!("{}…", &joined[..i]),
        None => joined,
    }
}

//! Reading finished runs back: manifest first (it decides whether a run completed), then the
//! metric, the system metric and the correctness evidence from the run's outputs. Output
//! never depends on a scheduler's memory, only on what the run left on disk.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use optgate_experiment::{Experiment, MetricSource, PlannedRun};
use optgate_metrics::{EpochClock, EpochSeconds, extract_epochs, extract_value, extract_values};
use optgate_wrapper::manifest::{Outcome, RunManifest};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RunStatus {
    Complete,
    Failed { reason: String },
    NotRun,
    NotApplicable { reason: String },
}

/// What one run produced.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub id: String,
    pub arm: String,
    pub block: u32,
    pub replicate: u32,
    pub status: RunStatus,
    /// The primary metric: seconds (or values) per epoch by position (1 = the first
    /// printed); a figure of merit's one value is epoch 1.
    pub epochs: EpochSeconds,
    /// The epochs' labels as the run printed them (`100`, `0.005`), by position; empty
    /// when the metric has none (traces, a figure of merit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub epoch_labels: Vec<String>,
    /// Each guardrail's value in this run, by name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub guardrails: BTreeMap<String, f64>,
    pub system_value: Option<f64>,
    /// CPU time, peak memory and energy, from the manifest (None before optgate recorded
    /// them, or when the wait failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<optgate_wrapper::manifest::Resources>,
    /// What each launched task used (from `optgate step`; empty for local runs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<optgate_wrapper::tasks::TaskRecord>,
    /// The step's nodes as their first tasks recorded them (the manifest's `nodes`).
    pub nodes: Vec<optgate_wrapper::nodes::NodeRecord>,
    /// A run without a launcher: the cores it was given and used (the manifest's
    /// `core_use`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub core_use: Option<optgate_wrapper::manifest::CoreUse>,
    pub host: Option<String>,
    pub elapsed_s: Option<f64>,
    /// When the run started and ended (RFC 3339, from its manifest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<(String, String)>,
    /// How busy the node was around the run (from its manifest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<optgate_wrapper::manifest::NodeConditions>,
    /// DFTracer metrics only: the run's traced seconds per category.
    pub trace_categories: Option<BTreeMap<String, f64>>,
    /// A failed run's last lines of stderr (at most [`STDERR_TAIL_LINES`] lines and
    /// [`STDERR_TAIL_BYTES`] bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
    #[serde(skip)]
    pub evidence: Option<Evidence>,
    /// Failed by the check across runs (`epoch_labels`: it printed other epochs than the
    /// others), not by anything in its own directory: the run itself completed, and a
    /// look must not run it again for it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub labels_differ: bool,
}

pub use crate::correctness::{ArmCorrectness, Evidence};

#[derive(Debug, Clone, Serialize)]
pub struct Collected {
    pub runs: Vec<RunResult>,
    /// None when the experiment declares no correctness checks.
    pub correctness: Option<BTreeMap<String, ArmCorrectness>>,
}

impl Collected {
    pub fn complete_runs<'a>(&'a self, arm: &'a str) -> impl Iterator<Item = &'a RunResult> + 'a {
        self.runs
            .iter()
            .filter(move |r| r.arm == arm && r.status == RunStatus::Complete)
    }
}

/// The correctness evidence of the complete runs among `runs`.
pub fn run_evidence(runs: &[RunResult]) -> Vec<crate::correctness::RunEvidence<'_>> {
    runs.iter()
        .filter(|r| r.status == RunStatus::Complete)
        .filter_map(|r| {
            Some(crate::correctness::RunEvidence {
                id: &r.id,
                arm: &r.arm,
                block: r.block,
                evidence: r.evidence.as_ref()?,
            })
        })
        .collect()
}

/// The error of the experiment when a completed baseline run among `runs` fails its own
/// correctness checks ([`crate::correctness::baseline_error`]).
pub fn baseline_error(exp: &Experiment, runs: &[RunResult]) -> Option<String> {
    crate::correctness::baseline_error(exp, &run_evidence(runs))
}

/// The runs the engine recorded as completed (`recorded_completed`) that no longer collect
/// as complete: their manifest was replaced or removed since it was read. A look must not
/// count them as decided data; they run again. A run of an arm the look finds not
/// applicable is not one of them (its manifest is not read). Pure over what was collected.
pub fn changed_since_recorded(
    collected: &Collected,
    recorded_completed: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    collected
        .runs
        .iter()
        .filter(|r| recorded_completed.contains(&r.id))
        .filter(|r| matches!(r.status, RunStatus::Failed { .. } | RunStatus::NotRun))
        .filter(|r| !r.labels_differ)
        .map(|r| r.id.clone())
        .collect()
}

impl RunResult {
    /// The result of planned run `r` with nothing read from its directory yet: only its
    /// place in the plan and `status` (a run not run or not applicable stays like this;
    /// `collect_run` fills in what the manifest and the metric say).
    pub fn empty(r: &PlannedRun, status: RunStatus) -> RunResult {
        RunResult {
            id: r.id.clone(),
            arm: r.arm.clone(),
            block: r.block,
            replicate: r.replicate,
            status,
            epochs: EpochSeconds::new(),
            epoch_labels: Vec::new(),
            guardrails: BTreeMap::new(),
            system_value: None,
            resources: None,
            tasks: Vec::new(),
            nodes: Vec::new(),
            core_use: None,
            host: None,
            elapsed_s: None,
            interval: None,
            conditions: None,
            trace_categories: None,
            stderr_tail: None,
            evidence: None,
            labels_differ: false,
        }
    }
}

/// Lines of a failed run's stderr kept for the reason of a `failed` decision.
pub const STDERR_TAIL_LINES: usize = 5;
/// Bytes of those lines kept at most (the end of the file).
pub const STDERR_TAIL_BYTES: usize = 400;

/// The last lines of `run_dir/stderr`, or None when it is missing or empty.
pub fn stderr_tail(run_dir: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(run_dir.join(optgate_wrapper::run::STDERR_FILE)).ok()?;
    let len = f.metadata().ok()?.len();
    let start = len.saturating_sub(4 * STDERR_TAIL_BYTES as u64);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.take(4 * STDERR_TAIL_BYTES as u64)
        .read_to_end(&mut buf)
        .ok()?;
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join(" | ");
    let tail = match tail.char_indices().rev().nth(STDERR_TAIL_BYTES) {
        Some((i, _)) => format!("…{}", &tail[i + 1..]),
        None => tail,
    };
    (!tail.is_empty()).then_some(tail)
}

/// Why a finished run yields no metric (its `failed` reason in the report).
#[derive(Debug, thiserror::Error)]
pub enum RunMetricError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Metric(#[from] optgate_metrics::MetricError),
    #[error(transparent)]
    Trace(#[from] optgate_dftracer::TraceError),
    #[error(
        "{}: the traces hold no per-epoch {what} events (events need `args.epoch` — run with DFTRACER_INC_METADATA=1 — or set `metric.epoch_marker`)",
        dir.display()
    )]
    NoEpochEvents {
        dir: std::path::PathBuf,
        what: String,
    },
}

/// The run's `source` as text, keeping (of a huge output) the lines `re` matches.
fn read_source(
    run_dir: &Path,
    source: MetricSource,
    file: Option<&str>,
    re: &regex::Regex,
) -> Result<(String, String), RunMetricError> {
    crate::source::read_text(run_dir, source, file, &|line| re.is_match(line))
        .map_err(|(path, source)| RunMetricError::Read { path, source })
}

/// Reads one run. Public so a backend can check a run as soon as it ends.
pub fn collect_run(exp: &Experiment, r: &PlannedRun, run_dir: &Path) -> RunResult {
    let manifest = match RunManifest::read(run_dir) {
        Ok(Some(m)) => m,
        Ok(None) => return RunResult::empty(r, RunStatus::NotRun),
        Err(e) => {
            return RunResult::empty(
                r,
                RunStatus::Failed {
                    reason: e.to_string(),
                },
            );
        }
    };
    let mut result = RunResult::empty(r, RunStatus::Complete);
    result.host = Some(manifest.host.clone());
    result.elapsed_s = Some(manifest.elapsed_s);
    result.interval = Some((manifest.started_at.clone(), manifest.ended_at.clone()));
    result.conditions = manifest.conditions;
    result.resources = manifest.resources;
    result.tasks = manifest.tasks.clone();
    result.nodes = manifest.nodes.clone();
    result.core_use = manifest.core_use.clone();
    if let Some(reason) = manifest_failure(&manifest, run_dir) {
        result.status = RunStatus::Failed { reason };
        result.stderr_tail = stderr_tail(run_dir);
        return result;
    }
    match run_metric(exp, run_dir) {
        Ok(m) => {
            result.epochs = m.epochs;
            result.epoch_labels = m.labels;
            result.trace_categories = m.trace_categories;
        }
        Err(e) => {
            result.status = RunStatus::Failed {
                reason: e.to_string(),
            };
            return result;
        }
    }
    match guardrail_values(exp, run_dir) {
        Ok(v) => result.guardrails = v,
        Err(e) => {
            result.status = RunStatus::Failed {
                reason: e.to_string(),
            };
            return result;
        }
    }
    match system_value(exp, run_dir) {
        Ok(v) => result.system_value = v,
        Err(e) => {
            result.status = RunStatus::Failed {
                reason: e.to_string(),
            };
            return result;
        }
    }
    result.evidence = crate::correctness::evidence(exp, run_dir);
    result
}

/// Why a run whose manifest is there did not complete; None when it completed.
fn manifest_failure(manifest: &RunManifest, run_dir: &Path) -> Option<String> {
    match manifest.outcome {
        Outcome::Completed => None,
        Outcome::Failed => Some(match (manifest.exit_code, manifest.signal) {
            (Some(c), _) => format!(
                "the app exited with status {c} (see {}/stderr)",
                run_dir.display()
            ),
            (_, Some(s)) => format!("the app was killed by signal {s}"),
            _ => "the app failed".to_string(),
        }),
        Outcome::TimedOut => Some("the run exceeded its time limit and was killed".to_string()),
        Outcome::Interrupted => Some("the run was interrupted before it finished".to_string()),
    }
}

/// Each guardrail's one value in the run (its pattern's last match), by name; a guardrail
/// that cannot be read makes the run yield no metric, as the primary would.
fn guardrail_values(
    exp: &Experiment,
    run_dir: &Path,
) -> Result<BTreeMap<String, f64>, RunMetricError> {
    let mut out = BTreeMap::new();
    for (g, re) in exp.guardrails.iter().zip(&exp.patterns.guardrails) {
        let re = re.as_ref().expect("validated");
        let (text, name) = read_source(run_dir, g.spec.source, g.spec.file.as_deref(), re)?;
        out.insert(g.name.clone(), extract_value(re, &text, &name)?);
    }
    Ok(out)
}

/// The run's system metric (its last report: apps print running figures and a final
/// one); None when the experiment declares none.
fn system_value(exp: &Experiment, run_dir: &Path) -> Result<Option<f64>, RunMetricError> {
    let Some(sm) = &exp.system_metric else {
        return Ok(None);
    };
    let re = exp.patterns.system_metric.as_ref().expect("validated");
    let (text, name) = read_source(run_dir, sm.source, sm.file.as_deref(), re)?;
    Ok(extract_values(re, &text, &name)?.last().copied())
}

/// What the metric source yields for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunMetric {
    pub epochs: EpochSeconds,
    /// The epochs' labels as printed, by position (empty for traces and figures of merit).
    pub labels: Vec<String>,
    /// For DFTracer metrics: the whole run's traced seconds per category.
    pub trace_categories: Option<BTreeMap<String, f64>>,
}

/// The per-epoch metric of one finished run (and, from traces, the time per category).
pub fn run_metric(exp: &Experiment, run_dir: &Path) -> Result<RunMetric, RunMetricError> {
    let m = &exp.metric;
    match m.source {
        MetricSource::Stdout | MetricSource::File => {
            let re = exp.patterns.metric.as_ref().expect("validated");
            let (text, name) = read_source(run_dir, m.source, m.file.as_deref(), re)?;
            let (epochs, labels) = if exp.per_run {
                // A figure of merit: its one value, held as epoch 1.
                let value = extract_value(re, &text, &name)?;
                (EpochSeconds::from([(1, value)]), Vec::new())
            } else {
                let clock = if m.cumulative {
                    EpochClock::Running
                } else {
                    EpochClock::PerEpoch
                };
                let e = extract_epochs(re, &text, &name, clock)?;
                (e.seconds, e.labels)
            };
            Ok(RunMetric {
                epochs,
                labels,
                trace_categories: None,
            })
        }
        MetricSource::Dftracer => {
            let dir = run_dir.join(m.dir.as_deref().unwrap_or("."));
            let summary = trace_summary(exp, &dir)?;
            let epochs = optgate_dftracer::epoch_seconds(&summary, m.category.as_deref());
            if epochs.is_empty() {
                return Err(RunMetricError::NoEpochEvents {
                    what: m
                        .category
                        .as_deref()
                        .map(|c| format!("`{c}`"))
                        .unwrap_or_else(|| "traced".into()),
                    dir,
                });
            }
            optgate_metrics::check_contiguous(&epochs, &dir.display().to_string())?;
            let categories = summary
                .total
                .by_category
                .iter()
                .map(|(c, st)| (c.clone(), st.dur_s))
                .collect();
            Ok(RunMetric {
                epochs,
                labels: Vec::new(),
                trace_categories: Some(categories),
            })
        }
    }
}

/// The DFTracer summary of one run's trace folder, aggregated the way the metric asks.
pub fn trace_summary(
    exp: &Experiment,
    dir: &Path,
) -> Result<optgate_dftracer::TraceSummary, optgate_dftracer::TraceError> {
    let m = &exp.metric;
    let opts = optgate_dftracer::AggregateOptions {
        epoch_marker: m.epoch_marker.clone(),
        ..Default::default()
    };
    let summary = optgate_dftracer::summarize_paths(&[dir.to_path_buf()], &opts)?;
    for d in &summary.diagnostics {
        tracing::warn!("{}:{}: {}", d.file.display(), d.line, d.message);
    }
    Ok(summary)
}

pub use crate::node_checks::LOAD_FLAG_RATIO;
/// Steal above this share of CPU time means a VM's CPUs were elsewhere part of the run.
pub const STEAL_FLAG_PCT: f64 = 5.0;

pub use optgate_report::InterferenceFlag;

/// The completed runs measured under interference: a node busier than its CPUs (load
/// average at the start or end above [`LOAD_FLAG_RATIO`] × online CPUs), CPU steal above
/// [`STEAL_FLAG_PCT`], another run of the same experiment running on the same host at
/// the same time, or — judged per node of the step from its node records
/// ([`crate::node_checks::judge_nodes`]) — a node over-subscribed or busy before the
/// step, named. Pure: reads only what the manifests recorded.
pub fn interference(collected: &Collected) -> Vec<InterferenceFlag> {
    let complete: Vec<&RunResult> = collected
        .runs
        .iter()
        .filter(|r| r.status == RunStatus::Complete)
        .collect();
    let mut flags = Vec::new();
    for r in &complete {
        let mut why = Vec::new();
        if let Some(c) = r.conditions {
            if let (Some(load), Some(cpus)) = (c.load_avg_max(), c.online_cpus)
                && load > LOAD_FLAG_RATIO * f64::from(cpus)
            {
                why.push(format!("load average {load:.2} on {cpus} CPU(s)"));
            }
            if let Some(steal) = c.steal_pct
                && steal > STEAL_FLAG_PCT
            {
                why.push(format!("{steal:.1}% CPU steal"));
            }
        }
        let overlapping: Vec<&str> = complete
            .iter()
            .filter(|o| o.id != r.id && o.host.is_some() && o.host == r.host && overlaps(r, o))
            .map(|o| o.id.as_str())
            .collect();
        if !overlapping.is_empty() {
            why.push(format!(
                "ran at the same time as {} on the same host",
                overlapping.join(", ")
            ));
        }
        why.extend(
            crate::node_checks::judge_nodes(&r.tasks, &r.nodes)
                .iter()
                .map(|f| f.to_string()),
        );
        if !why.is_empty() {
            flags.push(InterferenceFlag {
                run_id: r.id.clone(),
                arm: r.arm.clone(),
                reason: why.join("; "),
            });
        }
    }
    flags
}

/// Whether two runs' recorded intervals intersect (RFC 3339 strings of one clock).
fn overlaps(a: &RunResult, b: &RunResult) -> bool {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    match (&a.interval, &b.interval) {
        (Some((a0, a1)), Some((b0, b1))) => match (parse(a0), parse(a1), parse(b0), parse(b1)) {
            (Some(a0), Some(a1), Some(b0), Some(b1)) => a0 < b1 && b0 < a1,
            _ => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod interference_tests {
    use super::*;
    use optgate_wrapper::manifest::NodeConditions;

    fn run(id: &str, host: &str, from: &str, to: &str, c: Option<NodeConditions>) -> RunResult {
        let planned = PlannedRun {
            id: id.into(),
            block: 1,
            replicate: 1,
            arm: "a".into(),
            position: 0,
        };
        RunResult {
            host: Some(host.into()),
            elapsed_s: Some(1.0),
            interval: Some((from.into(), to.into())),
            conditions: c,
            ..RunResult::empty(&planned, RunStatus::Complete)
        }
    }

    #[test]
    fn busy_nodes_steal_and_overlapping_runs_are_flagged() {
        let quiet = NodeConditions {
            online_cpus: Some(2),
            load_avg_start: Some(0.4),
            load_avg_end: Some(1.9),
            steal_pct: Some(0.2),
        };
        let busy = NodeConditions {
            load_avg_end: Some(2.6),
            ..quiet
        };
        let stolen = NodeConditions {
            steal_pct: Some(12.5),
            ..quiet
        };
        let t = |s: u32| format!("2026-11-30T20:00:{s:02}Z");
        let collected = Collected {
            runs: vec![
                run("r1", "n1", &t(0), &t(10), Some(quiet)),
                run("r2", "n1", &t(10), &t(20), Some(busy)),
                run("r3", "n1", &t(20), &t(30), Some(stolen)),
                // r4 overlaps r5 on n2; r6 on n3 at the same time does not count.
                run("r4", "n2", &t(30), &t(40), Some(quiet)),
                run("r5", "n2", &t(35), &t(45), Some(quiet)),
                run("r6", "n3", &t(30), &t(40), None),
            ],
            correctness: None,
        };
        let flags = interference(&collected);
        let got: Vec<(&str, &str)> = flags
            .iter()
            .map(|f| (f.run_id.as_str(), f.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("r2", "load average 2.60 on 2 CPU(s)"),
                ("r3", "12.5% CPU steal"),
                ("r4", "ran at the same time as r5 on the same host"),
                ("r5", "ran at the same time as r4 on the same host"),
            ]
        );
    }

    /// A run whose step over-subscribed one of its nodes is flagged, the node named; its
    /// quiet node is not. Planted bug caught: the node records not consulted by the
    /// report's interference (the per-node judgement computed but dropped).
    #[test]
    fn a_node_of_the_step_over_subscribed_is_flagged_by_name() {
        use optgate_wrapper::nodes::NodeRecord;
        use optgate_wrapper::tasks::{TaskEnd, TaskRecord};
        let t = "2026-11-30T20:00:00Z";
        let task = |host: &str, threads: u32| TaskRecord {
            scheduler: None,
            rank: None,
            local_rank: None,
            node: None,
            host: host.into(),
            step_size: None,
            cpus_allowed: 2,
            cpus_allowed_list: String::new(),
            threads_max: Some(threads),
            cpu_user_s: f64::from(threads.min(2)),
            cpu_system_s: 0.0,
            cpu_s: f64::from(threads.min(2)),
            max_rss_kib: 0,
            wall_s: 1.0,
            end: TaskEnd::Exited,
            exit_code: Some(0),
            signal: None,
            forwarded_signal: None,
        };
        let node = |host: &str| NodeRecord {
            node: None,
            host: host.into(),
            governor: "none".into(),
            load_avg: Some(0.1),
            cores: Some(2),
            energy_j: None,
            energy_unmeasured: None,
        };
        let mut spread = run("r1", "n1", t, t, None);
        spread.tasks = vec![task("n1", 2), task("n2", 2), task("n2", 1)];
        // n1: 2 threads on its 2 cores (not flagged); n2: 3 threads on 2 cores, its two
        // tasks' CPU 2 + 1 per wall second (busy).
        spread.nodes = vec![node("n1"), node("n2")];
        let collected = Collected {
            runs: vec![spread],
            correctness: None,
        };
        let flags = interference(&collected);
        let got: Vec<&str> = flags.iter().map(|f| f.reason.as_str()).collect();
        assert_eq!(
            got,
            ["node n2 over-subscribed: its tasks ran 3 thread(s) on 2 core(s), 3.0 of them busy"]
        );
    }

    /// A stale attempt replaced a counted run's manifest with an interrupted one: the run
    /// no longer collects as complete, so the look must not count it.
    #[test]
    fn a_recorded_run_that_no_longer_collects_complete_is_named() {
        let t = "2026-11-30T20:00:00Z";
        let mut replaced = run("b001-v1", "n1", t, t, None);
        replaced.status = RunStatus::Failed {
            reason: "the run was interrupted before it finished".into(),
        };
        let mut never = run("b002-v1", "n1", t, t, None);
        never.status = RunStatus::NotRun;
        // A governor variant the look finds not applicable (its steps ran another governor).
        let mut na = run("b001-perf", "n1", t, t, None);
        na.status = RunStatus::NotApplicable {
            reason: "the step ran another governor".into(),
        };
        // A run that completed but printed other epochs than the others: failed by the
        // check across runs, not changed (running it again would print the same: a loop).
        let mut other_labels = run("b003-v1", "n1", t, t, None);
        other_labels.status = RunStatus::Failed {
            reason: "its epoch 1 is labelled 0.01 where the other runs print 0.005".into(),
        };
        other_labels.labels_differ = true;
        let collected = Collected {
            runs: vec![
                run("b001-baseline", "n1", t, t, None),
                replaced,
                never,
                na,
                other_labels,
            ],
            correctness: None,
        };
        let recorded: std::collections::BTreeSet<String> =
            ["b001-baseline", "b001-v1", "b001-perf", "b003-v1"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        assert_eq!(changed_since_recorded(&collected, &recorded), ["b001-v1"]);
        // A run the store never recorded completed is the look's ordinary business.
        assert!(changed_since_recorded(&collected, &Default::default()).is_empty());
    }
}

#[cfg(test)]
mod run_file_tests {
    use super::*;

    /// The stderr tail's limits: the last [`STDERR_TAIL_LINES`] non-blank lines, cut from
    /// the front to [`STDERR_TAIL_BYTES`] characters; nothing for a missing or blank file.
    /// Catches a limit off by one, the first lines kept instead of the last, and blank
    /// lines quoted.
    #[test]
    fn the_stderr_tail_keeps_the_last_lines_within_its_limits() {
        let dir = tempfile::tempdir().unwrap();
        let tail_of = |text: &str| {
            std::fs::write(dir.path().join(optgate_wrapper::run::STDERR_FILE), text).unwrap();
            stderr_tail(dir.path())
        };
        let seven: String = (1..=7).map(|i| format!("e{i}\n\n")).collect();
        assert_eq!(tail_of(&seven).unwrap(), "e3 | e4 | e5 | e6 | e7");
        let wide = format!("a{}", "z".repeat(STDERR_TAIL_BYTES));
        assert_eq!(
            tail_of(&wide).unwrap(),
            format!("…{}", "z".repeat(STDERR_TAIL_BYTES))
        );
        let exact = "q".repeat(STDERR_TAIL_BYTES);
        assert_eq!(tail_of(&exact).unwrap(), exact);
        assert_eq!(tail_of(" \n\t\n"), None);
        std::fs::remove_file(dir.path().join(optgate_wrapper::run::STDERR_FILE)).unwrap();
        assert_eq!(stderr_tail(dir.path()), None);
    }

    /// `metric.epoch_marker` reaches the trace aggregation: in a trace whose events carry
    /// no `args.epoch`, the marker events alone make the epochs (dropping the marker
    /// finds no epochs at all).
    #[test]
    fn a_dftracer_metric_takes_its_epochs_from_the_marker_events() {
        let yaml = "name: t\napp: { command: [app] }\n\
             metric: { source: dftracer, dir: traces, epoch_marker: epoch }\n\
             replicates: 6\nvariants:\n\
             \x20 - { name: v, dimension: l2_threading_model, env: { X: '1' } }\n";
        let exp = optgate_experiment::load_str(yaml, Path::new("/tmp/t.yaml"))
            .unwrap()
            .experiment;
        let ev = |id: u32, name: &str, cat: &str, ts: u32, dur: u32| {
            format!(
                r#"{{"id":{id},"name":"{name}","cat":"{cat}","type":6,"pid":7,"tid":7,"ts":{ts},"dur":{dur},"ph":1}}"#
            )
        };
        let trace = [
            ev(1, "forward", "compute", 110, 10),
            ev(2, "epoch", "app", 100, 100),
            ev(3, "forward", "compute", 210, 30),
            ev(4, "epoch", "app", 200, 100),
        ]
        .join("\n");
        let run = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(run.path().join("traces")).unwrap();
        std::fs::write(run.path().join("traces/r0.pfw"), trace).unwrap();
        let metric = run_metric(&exp, run.path()).unwrap();
        assert_eq!(metric.epochs.keys().copied().collect::<Vec<_>>(), [1, 2]);
        assert!(
            (metric.epochs[&2] - 30e-6).abs() < 1e-12,
            "{:?}",
            metric.epochs
        );
    }
}

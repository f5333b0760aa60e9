//! Fail fast: after each completed block, whether what the runs so far left on
//! disk already says that more runs cannot help — the metric pattern matched nothing in
//! any run, a baseline run failed its own correctness checks, or every run of an arm
//! failed — so that `optgate run` and the daemon stop the experiment (or that arm) with
//! the reason instead of executing every run first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::collect::{RunResult, RunStatus};
use crate::layout::Layout;
use crate::source::source_file;
use optgate_experiment::{BASELINE, Experiment};

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
/// output did not match the pattern at all. The baseline rule: a completed baseline run
/// fails its own correctness checks ([`crate::collect::baseline_error`]). The arm
/// rule: no run of the arm completed and all of its finished runs failed; the baseline
/// stopped stops the experiment.
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
        let m = &exp.metric;
        let pattern = m.pattern.as_deref().unwrap_or_default();
        out.stop_experiment = Some(format!(
            "stopped after block {block}: the metric pattern `{pattern}` matched nothing in any \
             run (run {}: {}); its output begins: {}",
            r.id,
            match &r.status {
                RunStatus::Failed { reason } => reason.as_str(),
                _ => "",
            },
            excerpt(layout, r, source_file(m.source, m.file.as_deref()))
        ));
        return out;
    }
    if let Some(why) = crate::collect::baseline_error(exp, done) {
        out.stop_experiment = Some(format!("stopped after block {block}: {why}"));
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

/// The first lines of the run's metric source, `file` in its run directory.
fn excerpt(layout: &Layout, r: &RunResult, file: &str) -> String {
    let run_dir = layout.run_dir(&r.id);
    let path = run_dir.join(file);
    // Only its head is read, and never through a link, a pipe or a device.
    let cap = 4 * STDOUT_EXCERPT_BYTES as u64;
    let opened = optgate_wrapper::untrusted::open_regular(
        &run_dir,
        Path::new(file),
        optgate_wrapper::untrusted::MAX_OUTPUT_BYTES,
    );
    let mut bytes = Vec::new();
    let read = opened.map_err(|e| e.reason()).and_then(|(f, _)| {
        std::io::Read::read_to_end(&mut std::io::Read::take(f, cap), &mut bytes)
            .map_err(|e| e.to_string())
    });
    if let Err(why) = read {
        return format!("({} cannot be read: {why})", path.display());
    }
    let head = &bytes[..];
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

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_wrapper::run::STDOUT_FILE;
    use std::path::Path;

    const PATTERN: &str = r"epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s";

    fn experiment() -> Experiment {
        experiment_with("")
    }

    /// The experiment with `metric_keys` (`key: value, `…) added to its metric.
    fn experiment_with(metric_keys: &str) -> Experiment {
        let yaml = format!(
            "name: t\napp: {{ command: [app] }}\nmetric: {{ {metric_keys}pattern: '{PATTERN}' }}\n\
             replicates: 6\nvariants:\n\
             \x20 - {{ name: v, dimension: l2_threading_model, env: {{ X: '1' }} }}\n\
             \x20 - {{ name: w, dimension: l2_threading_model, env: {{ X: '2' }} }}\n"
        );
        optgate_experiment::load_str(&yaml, Path::new("/tmp/t.yaml"))
            .unwrap()
            .experiment
    }

    fn run(block: u32, arm: &str, status: RunStatus) -> RunResult {
        let planned = optgate_experiment::PlannedRun {
            id: format!("b{block:03}-{arm}"),
            block,
            replicate: block,
            arm: arm.into(),
            position: 0,
        };
        RunResult::empty(&planned, status)
    }

    fn ok(block: u32, arm: &str) -> RunResult {
        run(block, arm, RunStatus::Complete)
    }

    fn failed(block: u32, arm: &str, reason: &str) -> RunResult {
        run(
            block,
            arm,
            RunStatus::Failed {
                reason: reason.into(),
            },
        )
    }

    fn no_match(block: u32, arm: &str) -> RunResult {
        failed(
            block,
            arm,
            &format!("stdout: the pattern `{PATTERN}` never matched"),
        )
    }

    /// A layout in `dir` whose run `b001-baseline` printed `stdout`.
    fn layout_with_output(dir: &Path, stdout: &str) -> Layout {
        let layout = Layout::new(dir);
        let run = layout.run_dir("b001-baseline");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::write(run.join(STDOUT_FILE), stdout).unwrap();
        layout
    }

    #[test]
    fn a_pattern_that_matched_nothing_in_any_run_stops_the_experiment_quoting_the_output() {
        let exp = experiment();
        let dir = tempfile::tempdir().unwrap();
        let layout = layout_with_output(dir.path(), "\nepoch 1: 0.5s\n\nepoch 2: 0.6s\n");
        let done = [no_match(1, "baseline"), no_match(1, "v"), no_match(1, "w")];
        let verdict = judge(&exp, &layout, 1, &done);
        let why = verdict.stop_experiment.expect("the experiment stops");
        assert!(
            why.starts_with("stopped after block 1: the metric pattern"),
            "{why}"
        );
        assert!(why.contains(PATTERN), "{why}");
        assert!(why.contains("run b001-baseline"), "{why}");
        assert!(
            why.ends_with("its output begins: epoch 1: 0.5s | epoch 2: 0.6s"),
            "{why}"
        );
        assert!(verdict.stop_arms.is_empty());
    }

    #[test]
    fn one_completed_run_anywhere_means_the_pattern_works() {
        let exp = experiment();
        let dir = tempfile::tempdir().unwrap();
        let layout = layout_with_output(dir.path(), "");
        // The variant's output does not match (it prints something else): that variant
        // stops, the experiment goes on.
        let done = [ok(1, "baseline"), no_match(1, "v"), ok(1, "w")];
        let verdict = judge(&exp, &layout, 1, &done);
        assert_eq!(verdict.stop_experiment, None);
        assert_eq!(verdict.stop_arms.keys().collect::<Vec<_>>(), ["v"]);
    }

    #[test]
    fn a_variant_none_of_whose_runs_completed_stops_and_only_it() {
        let exp = experiment();
        let layout = Layout::new("/nonexistent");
        let mut broken = failed(2, "w", "exit code 3");
        broken.stderr_tail = Some("segfault".into());
        let done = [
            ok(1, "baseline"),
            failed(1, "w", "exit code 3"),
            ok(1, "v"),
            ok(2, "baseline"),
            broken,
            ok(2, "v"),
        ];
        let verdict = judge(&exp, &layout, 2, &done);
        assert_eq!(verdict.stop_experiment, None);
        assert_eq!(verdict.stop_arms.len(), 1, "{verdict:?}");
        let why = &verdict.stop_arms["w"];
        assert_eq!(
            why,
            "stopped after block 2: every run of `w` so far failed (2 of 2) — run b001-w: exit code 3"
        );
    }

    #[test]
    fn a_baseline_none_of_whose_runs_completed_stops_the_experiment() {
        let exp = experiment();
        let layout = Layout::new("/nonexistent");
        let mut base = failed(1, "baseline", "exit code 1");
        base.stderr_tail = Some("no such file".into());
        let done = [base, ok(1, "v"), ok(1, "w")];
        let verdict = judge(&exp, &layout, 1, &done);
        let why = verdict.stop_experiment.expect("the experiment stops");
        assert!(
            why.contains("every run of `baseline` so far failed (1 of 1)"),
            "{why}"
        );
        assert!(
            why.ends_with("exit code 1; its stderr ends: no such file"),
            "{why}"
        );
    }

    #[test]
    fn an_arm_with_one_completed_run_goes_on_whatever_else_failed() {
        let exp = experiment();
        let layout = Layout::new("/nonexistent");
        let done = [
            ok(1, "baseline"),
            failed(1, "v", "exit code 3"),
            failed(2, "v", "exit code 3"),
            ok(3, "v"),
            ok(1, "w"),
        ];
        assert_eq!(judge(&exp, &layout, 3, &done), FailFast::default());
    }

    #[test]
    fn an_arm_whose_runs_did_not_all_fail_goes_on() {
        let exp = experiment();
        let layout = Layout::new("/nonexistent");
        // Boundaries: one failed run beside one not run (not all of them failed), and no
        // runs at all.
        let done = [
            ok(1, "baseline"),
            failed(1, "v", "exit 1"),
            run(1, "v", RunStatus::NotRun),
        ];
        assert_eq!(judge(&exp, &layout, 1, &done), FailFast::default());
        assert_eq!(judge(&exp, &layout, 1, &[]), FailFast::default());
    }

    /// A completed baseline run that does not print the expected verdict stops the
    /// experiment after the block, naming its output line; the same output from a variant
    /// stops nothing (the look rejects it). Catches the baseline rule left out of `judge`
    /// (the experiment would run every block and reject the variants instead).
    #[test]
    fn a_baseline_run_that_fails_its_own_check_stops_the_experiment() {
        let yaml = format!(
            "name: t\napp: {{ command: [app] }}\nmetric: {{ pattern: '{PATTERN}' }}\n\
             correctness: {{ values: {{ pattern: 'check (?P<value>\\w+)' }}, expect: PASSED }}\n\
             replicates: 6\nvariants:\n  - {{ name: v, dimension: l2_threading_model, env: {{ X: '1' }} }}\n"
        );
        let exp = optgate_experiment::load_str(&yaml, Path::new("/tmp/t.yaml"))
            .unwrap()
            .experiment;
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let with = |block: u32, arm: &str, stdout: &str| {
            let mut r = ok(block, arm);
            let run_dir = layout.run_dir(&r.id);
            std::fs::create_dir_all(&run_dir).unwrap();
            std::fs::write(run_dir.join(STDOUT_FILE), stdout).unwrap();
            r.evidence = crate::correctness::evidence(&exp, &run_dir);
            r
        };
        let fine = [
            with(1, "baseline", "check PASSED\n"),
            with(1, "v", "check FAILED\n"),
        ];
        assert_eq!(judge(&exp, &layout, 1, &fine), FailFast::default());
        let broken = [
            with(1, "baseline", "start\ncheck FAILED\n"),
            with(1, "v", "check PASSED\n"),
        ];
        let why = judge(&exp, &layout, 1, &broken)
            .stop_experiment
            .expect("the experiment stops");
        assert!(
            why.starts_with("stopped after block 1: baseline run b001-baseline does not print the expected verdict: "),
            "{why}"
        );
        assert!(
            why.contains("b001-baseline/stdout:2: `FAILED` where `PASSED` is expected"),
            "{why}"
        );
        assert!(why.contains("(/tmp/t.yaml:4)"), "{why}");
    }

    /// Why the metric rule stopped `exp`, judging one unmatched baseline run whose run
    /// directory in `dir` holds `files` (name, text).
    fn quoted(exp: &Experiment, dir: &Path, files: &[(&str, &str)]) -> String {
        let layout = Layout::new(dir);
        let run = layout.run_dir("b001-baseline");
        std::fs::create_dir_all(&run).unwrap();
        for (name, text) in files {
            std::fs::write(run.join(name), text).unwrap();
        }
        judge(exp, &layout, 1, &[no_match(1, "baseline")])
            .stop_experiment
            .expect("the experiment stops")
    }

    /// The output quoted is the file the metric reads: `metric.file` for `source: file`,
    /// stdout otherwise, even when a `file:` is declared beside `source: stdout` (which
    /// the metric ignores). Quoting the other one, or always stdout, fails here.
    #[test]
    fn the_excerpt_quotes_the_file_the_metric_reads() {
        let files = [(STDOUT_FILE, "on stdout\n"), ("out.txt", "in the file\n")];
        let from_file = experiment_with("source: file, file: out.txt, ");
        let dir = tempfile::tempdir().unwrap();
        let why = quoted(&from_file, dir.path(), &files);
        assert!(why.ends_with("its output begins: in the file"), "{why}");
        let from_stdout = experiment_with("source: stdout, file: out.txt, ");
        let dir = tempfile::tempdir().unwrap();
        let why = quoted(&from_stdout, dir.path(), &files);
        assert!(why.ends_with("its output begins: on stdout"), "{why}");
    }

    /// The excerpt's limits: the first [`STDOUT_EXCERPT_LINES`] non-blank lines of the
    /// first `4 × STDOUT_EXCERPT_BYTES` bytes (blank lines before them skipped), cut at
    /// [`STDOUT_EXCERPT_BYTES`] characters; an output of blank lines, or one that cannot
    /// be read, is said to be so. Catches a smaller read window (the line after 400 blank
    /// lines is lost), a limit off by one, and blank lines quoted.
    #[test]
    fn the_excerpt_skips_blank_lines_and_stops_at_its_limits() {
        let exp = experiment();
        let at = |stdout: Option<&str>| {
            let dir = tempfile::tempdir().unwrap();
            let files: Vec<(&str, &str)> = stdout.map(|t| (STDOUT_FILE, t)).into_iter().collect();
            let why = quoted(&exp, dir.path(), &files);
            why[why.find("its output begins: ").expect(&why) + 19..].to_string()
        };
        let late = format!("{}epoch 1: 0.5s\n", "\n".repeat(400));
        assert_eq!(at(Some(&late)), "epoch 1: 0.5s");
        let seven: String = (1..=7).map(|i| format!("l{i}\n")).collect();
        assert_eq!(at(Some(&seven)), "l1 | l2 | l3 | l4 | l5");
        let wide = "x".repeat(STDOUT_EXCERPT_BYTES + 1);
        assert_eq!(
            at(Some(&wide)),
            format!("{}…", "x".repeat(STDOUT_EXCERPT_BYTES))
        );
        let exact = "y".repeat(STDOUT_EXCERPT_BYTES);
        assert_eq!(at(Some(&exact)), exact);
        assert_eq!(at(Some("\n  \n\t\n")), "(nothing: the output is empty)");
        let missing = at(None);
        assert!(
            missing.starts_with('(')
                && missing.contains("/stdout cannot be read: ")
                && missing.ends_with("(os error 2))"),
            "{missing}"
        );
    }
}

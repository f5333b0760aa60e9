//! Correctness evidence and what it says: each run's declared files (hashed), its checked
//! values (as text) and its verdict (`correctness.expect`); each variant against the
//! baseline of its block; and the one rule for a baseline that fails its own checks — an
//! error of the experiment ([`baseline_error`], which fail fast and every look apply),
//! never a verdict on a variant.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

use optgate_experiment::{BASELINE, ExpectPlace, Expected, Experiment};
use optgate_metrics::{Captured, extract_captures, same_value};

use crate::source::read_text;

/// One complete run's evidence, as the comparisons read it (`collect::run_evidence`
/// makes these from the collected runs).
#[derive(Debug, Clone, Copy)]
pub struct RunEvidence<'a> {
    pub id: &'a str,
    pub arm: &'a str,
    pub block: u32,
    pub evidence: &'a Evidence,
}

/// The run's `source` as text and its name for messages (of a huge output, the lines
/// `keep` accepts); the error as a reason.
fn read_source(
    run_dir: &Path,
    source: optgate_experiment::MetricSource,
    file: Option<&str>,
    keep: &dyn Fn(&str) -> bool,
) -> Result<(String, String), String> {
    read_text(run_dir, source, file, keep)
        .map_err(|(path, e)| format!("cannot read {}: {e}", path.display()))
}

/// Characters of an output line quoted in a correctness reason (a verdict line is short; a
/// run printing one huge line must not make the reason huge).
pub const QUOTED_LINE_CHARS: usize = 200;

/// What a run's outputs were, for the correctness comparison with the baseline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence {
    /// Declared file → its SHA-256, or why it has none.
    pub files: BTreeMap<String, FileHash>,
    /// What `correctness.values.pattern` captured, or why nothing could be read.
    pub values: Option<Result<Values, String>>,
    /// The `correctness.expect` check: None without one, else the run's output quoted
    /// where it does not say the expected verdict.
    pub verdict: Option<Result<(), String>>,
}

/// A declared output file of one run: its SHA-256, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub enum FileHash {
    Sha256(String),
    /// The run did not write it.
    Missing,
    /// It is there but is not read: a link, a pipe, a device, too large, unreadable.
    Unreadable(String),
}

impl FileHash {
    /// What a difference says of a file without a hash in `whose` run.
    fn why_none(&self, file: &str, whose: &str) -> String {
        match self {
            FileHash::Unreadable(why) => {
                format!("`{file}` in the {whose}'s run is not read: {why}")
            }
            _ => format!("`{file}` is missing from the {whose}'s run"),
        }
    }
}

/// The values one run's output gave, with the file they were read from.
#[derive(Debug, Clone, PartialEq)]
pub struct Values {
    pub source: String,
    pub captured: Vec<Captured>,
}

/// The correctness verdict of one arm over all its blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmCorrectness {
    /// Blocks in which the arm's outputs were compared with the baseline's.
    pub blocks_compared: u32,
    /// The first difference found, naming the block and the file or value.
    pub mismatch: Option<String>,
}

/// Whether the experiment declares any correctness check.
pub fn declared(exp: &Experiment) -> bool {
    exp.correctness
        .as_ref()
        .is_some_and(|c| c.declares_a_check())
}

/// The run's correctness evidence; None when the experiment declares no checks.
pub fn evidence(exp: &Experiment, run_dir: &Path) -> Option<Evidence> {
    let c = exp.correctness.as_ref()?;
    let mut ev = Evidence::default();
    for f in &c.files {
        let hash = file_sha256(run_dir, f);
        ev.files.insert(f.clone(), hash);
    }
    if let Some(v) = &c.values {
        let re = exp.patterns.correctness_values.as_ref().expect("validated");
        ev.values = Some(captures(run_dir, re, v.source, v.file.as_deref()));
    }
    if let Some(verdict) = &exp.patterns.expect {
        let e = &verdict.expected;
        ev.verdict = Some(match &verdict.place {
            ExpectPlace::Values => match ev.values.as_ref().expect("validated: values declared") {
                Ok(v) => check_captures(e, v),
                Err(why) => Err(why.clone()),
            },
            ExpectPlace::Captures {
                pattern,
                source,
                file,
            } => captures(run_dir, pattern, *source, file.as_deref())
                .and_then(|v| check_captures(e, &v)),
            ExpectPlace::Lines { source, file } => {
                read_source(run_dir, *source, file.as_deref(), &|l| e.in_line(l))
                    .and_then(|(text, name)| check_lines(e, &text, &name))
            }
        });
    }
    Some(ev)
}

/// The SHA-256 of the run's declared file `rel`, streamed; None when the run did not write
/// it as a regular file of at most the output cap (a link, a pipe or a device is not read).
fn file_sha256(run_dir: &Path, rel: &str) -> FileHash {
    use optgate_wrapper::untrusted::{MAX_OUTPUT_BYTES, open_regular};
    let file = match open_regular(run_dir, Path::new(rel), MAX_OUTPUT_BYTES) {
        Ok((file, _)) => file,
        Err(e) if e.is_absent() => return FileHash::Missing,
        Err(e) => return FileHash::Unreadable(e.reason()),
    };
    let mut hasher = Sha256::new();
    if let Err(e) = std::io::copy(
        &mut std::io::Read::take(file, MAX_OUTPUT_BYTES),
        &mut hasher,
    ) {
        return FileHash::Unreadable(e.to_string());
    }
    FileHash::Sha256(
        hasher
            .finalize()
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect(),
    )
}

/// Every capture of `re` in the run's `source`; an error naming the file when it cannot be
/// read or the pattern matched nothing.
fn captures(
    run_dir: &Path,
    re: &regex::Regex,
    source: optgate_experiment::MetricSource,
    file: Option<&str>,
) -> Result<Values, String> {
    let (text, name) = read_source(run_dir, source, file, &|l| re.is_match(l))?;
    let captured = extract_captures(re, &text);
    if captured.is_empty() {
        return Err(format!(
            "{name}: the pattern `{}` never matched",
            re.as_str()
        ));
    }
    Ok(Values {
        source: name,
        captured,
    })
}

/// `line`, cut at [`QUOTED_LINE_CHARS`] characters.
fn quote_line(line: &str) -> String {
    match line.char_indices().nth(QUOTED_LINE_CHARS) {
        Some((i, _)) => format!("`{}…`", &line[..i]),
        None => format!("`{line}`"),
    }
}

/// Every captured verdict must be expected: the first that is not, quoted with its line.
fn check_captures(expected: &Expected, values: &Values) -> Result<(), String> {
    match values.captured.iter().find(|c| !expected.accepts(&c.text)) {
        None => Ok(()),
        Some(c) => Err(format!(
            "{}:{}: {} where {} is expected (the line: {})",
            values.source,
            c.line,
            quote_line(&c.text),
            expected.describe(),
            quote_line(&c.line_text)
        )),
    }
}

/// Some line of the output must say the verdict; when none does, its last line is quoted.
fn check_lines(expected: &Expected, text: &str, name: &str) -> Result<(), String> {
    if text.lines().any(|l| expected.in_line(l)) {
        return Ok(());
    }
    let last = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .last();
    Err(match last {
        Some((i, l)) => format!(
            "{name}: no line says {}; its last line ({name}:{}) is {}",
            expected.describe(),
            i + 1,
            quote_line(l)
        ),
        None => format!(
            "{name}: no line says {}; the output is empty",
            expected.describe()
        ),
    })
}

/// What is wrong with a baseline run's own evidence, if anything: its verdict is not the
/// expected one, its checked values cannot be read, or a declared file is missing.
fn baseline_problem(ev: &Evidence) -> Option<String> {
    if let Some(Err(why)) = &ev.verdict {
        return Some(format!("does not print the expected verdict: {why}"));
    }
    if let Some(Err(why)) = &ev.values {
        return Some(format!("has no checked value to compare with: {why}"));
    }
    ev.files.iter().find_map(|(f, hash)| match hash {
        FileHash::Sha256(_) => None,
        FileHash::Missing => Some(format!(
            "did not write `{f}`, a file `correctness.files` compares"
        )),
        FileHash::Unreadable(why) => Some(format!(
            "wrote `{f}`, a file `correctness.files` compares, but it is not read: {why}"
        )),
    })
}

/// The error of the experiment when a completed baseline run fails its own correctness
/// checks (the first such run, by block): the run, its output file and line, and the
/// experiment file's `correctness` key. None when every baseline run passes. Fail fast
/// and every look apply it, so `optgate run` and the daemon end the experiment `failed`
/// with it; no variant is judged against such a baseline.
pub fn baseline_error(exp: &Experiment, runs: &[RunEvidence]) -> Option<String> {
    let mut base: Vec<&RunEvidence> = runs.iter().filter(|r| r.arm == BASELINE).collect();
    base.sort_by_key(|r| r.block);
    base.iter().find_map(|r| {
        let problem = baseline_problem(r.evidence)?;
        Some(format!(
            "baseline run {} {problem} — the checks of `correctness` ({}) must hold for the \
             baseline itself: an error of the experiment, not a verdict on any variant",
            r.id,
            exp.correctness_key_place()
        ))
    })
}

/// Each variant's correctness over its complete runs: its own verdict in every run, and
/// its outputs against the baseline's of the same block (a block whose baseline fails its
/// own checks is not compared: that is [`baseline_error`]'s).
pub fn compare_with_baseline(
    exp: &Experiment,
    runs: &[RunEvidence],
) -> BTreeMap<String, ArmCorrectness> {
    let spec = exp.correctness.as_ref().expect("caller checked");
    let (rel_tol, abs_tol) = spec
        .values
        .as_ref()
        .map(|v| (v.rel_tol, v.abs_tol))
        .unwrap_or((None, None));
    let baselines: BTreeMap<u32, &Evidence> = runs
        .iter()
        .filter(|r| r.arm == BASELINE && baseline_problem(r.evidence).is_none())
        .map(|r| (r.block, r.evidence))
        .collect();
    let mut out: BTreeMap<String, ArmCorrectness> = BTreeMap::new();
    for arm in exp.arms.iter().filter(|a| a.name != BASELINE) {
        let mut verdict = ArmCorrectness {
            blocks_compared: 0,
            mismatch: None,
        };
        let mut arm_runs: Vec<&RunEvidence> = runs.iter().filter(|r| r.arm == arm.name).collect();
        arm_runs.sort_by_key(|r| r.block);
        for run in arm_runs {
            let ve = run.evidence;
            if verdict.mismatch.is_none()
                && let Some(Err(why)) = &ve.verdict
            {
                verdict.mismatch = Some(format!(
                    "block {}: run {} does not print the expected verdict: {why}",
                    run.block, run.id
                ));
            }
            let Some(be) = baselines.get(&run.block) else {
                continue;
            };
            verdict.blocks_compared += 1;
            if verdict.mismatch.is_none() {
                verdict.mismatch = first_difference(be, ve, rel_tol, abs_tol)
                    .map(|d| format!("block {}: {d}", run.block));
            }
        }
        out.insert(arm.name.clone(), verdict);
    }
    out
}

fn first_difference(
    base: &Evidence,
    var: &Evidence,
    rel_tol: Option<f64>,
    abs_tol: Option<f64>,
) -> Option<String> {
    for (file, bh) in &base.files {
        let vh = var.files.get(file).cloned().unwrap_or(FileHash::Missing);
        match (bh, &vh) {
            (FileHash::Missing, FileHash::Missing) => {
                return Some(format!("`{file}` was written by neither run"));
            }
            (
                FileHash::Missing | FileHash::Unreadable(_),
                FileHash::Missing | FileHash::Unreadable(_),
            ) => {
                return Some(format!(
                    "{}; {}",
                    bh.why_none(file, "baseline"),
                    vh.why_none(file, "variant")
                ));
            }
            (FileHash::Sha256(_), _) if !matches!(vh, FileHash::Sha256(_)) => {
                return Some(vh.why_none(file, "variant"));
            }
            (_, FileHash::Sha256(_)) if !matches!(bh, FileHash::Sha256(_)) => {
                return Some(bh.why_none(file, "baseline"));
            }
            (FileHash::Sha256(a), FileHash::Sha256(b)) if a != b => {
                return Some(format!(
                    "`{file}` differs from the baseline's (sha256 {}… vs {}…)",
                    &a[..12],
                    &b[..12]
                ));
            }
            _ => {}
        }
    }
    match (&base.values, &var.values) {
        (Some(Ok(bv)), Some(Ok(vv))) => first_value_difference(bv, vv, rel_tol, abs_tol),
        (_, Some(Err(e))) => Some(format!("variant's checked value: {e}")),
        _ => None,
    }
}

/// The first checked value of the variant that is not the baseline's: numbers within
/// tolerance when both read as numbers, else the same text.
fn first_value_difference(
    base: &Values,
    var: &Values,
    rel_tol: Option<f64>,
    abs_tol: Option<f64>,
) -> Option<String> {
    let (bv, vv) = (&base.captured, &var.captured);
    if bv.len() != vv.len() {
        return Some(format!(
            "the baseline printed {} checked values, the variant {}",
            bv.len(),
            vv.len()
        ));
    }
    let (i, (b, v)) = bv
        .iter()
        .zip(vv)
        .enumerate()
        .find(|(_, (b, v))| !same_value(&b.text, &v.text, rel_tol, abs_tol))?;
    let at = format!("{}:{}", var.source, v.line);
    Some(
        match (
            optgate_metrics::as_number(&b.text),
            optgate_metrics::as_number(&v.text),
        ) {
            (Some(bn), Some(vn)) => format!(
                "checked value #{} is {} where the baseline has {} (relative difference {:.3e}; {at})",
                i + 1,
                v.text,
                b.text,
                ((vn - bn) / bn.abs().max(f64::MIN_POSITIVE)).abs()
            ),
            _ => format!(
                "checked value #{} is {} where the baseline has {} ({at})",
                i + 1,
                quote_line(&v.text),
                quote_line(&b.text)
            ),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_wrapper::run::STDOUT_FILE;

    const EXP: &str = "/exp/t.yaml";

    /// An experiment with one variant `v` whose `correctness:` is `correctness` (a flow
    /// mapping), on line 4 of the file.
    fn experiment(correctness: &str) -> Experiment {
        let yaml = format!(
            "name: t\napp: {{ command: [app] }}\n\
             metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\n\
             correctness: {correctness}\nreplicates: 6\n\
             variants:\n  - {{ name: v, dimension: l2_threading_model, env: {{ X: '1' }} }}\n"
        );
        optgate_experiment::load_str(&yaml, Path::new(EXP))
            .unwrap()
            .experiment
    }

    /// The evidence of the run of `arm` in `block` whose stdout was `stdout`, read from
    /// its run directory `dir/bNNN-ARM`.
    fn run_evidence(exp: &Experiment, dir: &Path, block: u32, arm: &str, stdout: &str) -> Evidence {
        let run_dir = dir.join(format!("b{block:03}-{arm}"));
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::write(run_dir.join(STDOUT_FILE), stdout).unwrap();
        evidence(exp, &run_dir).expect("checks declared")
    }

    /// The variant's mismatch and the experiment's error over `outputs` (block, arm,
    /// stdout).
    fn judged(exp: &Experiment, outputs: &[(u32, &str, &str)]) -> (Option<String>, Option<String>) {
        let dir = tempfile::tempdir().unwrap();
        let found: Vec<(String, Evidence)> = outputs
            .iter()
            .map(|(b, a, o)| {
                (
                    format!("b{b:03}-{a}"),
                    run_evidence(exp, dir.path(), *b, a, o),
                )
            })
            .collect();
        let runs: Vec<RunEvidence> = outputs
            .iter()
            .zip(&found)
            .map(|((block, arm, _), (id, evidence))| RunEvidence {
                id,
                arm,
                block: *block,
                evidence,
            })
            .collect();
        let c = compare_with_baseline(exp, &runs);
        let err =
            baseline_error(exp, &runs).map(|e| e.replace(&*dir.path().to_string_lossy(), "D"));
        let mismatch = c["v"]
            .mismatch
            .clone()
            .map(|m| m.replace(&*dir.path().to_string_lossy(), "D"));
        (mismatch, err)
    }

    const CHECK: &str = "{ values: { pattern: 'check (?P<value>\\S+)' }, expect: PASSED }";

    /// A variant printing `FAILED` is rejected with its run, file, line and the line's
    /// text; the baseline passing is no error. Catches the variant's own verdict not
    /// checked (the values alone differ, but an `expect` with its own pattern would not).
    #[test]
    fn a_variant_that_prints_failed_does_not_print_the_verdict() {
        let exp = experiment(CHECK);
        let (m, err) = judged(
            &exp,
            &[
                (1, "baseline", "check PASSED\n"),
                (1, "v", "x\ncheck FAILED\n"),
            ],
        );
        assert_eq!(err, None);
        assert_eq!(
            m.as_deref(),
            Some(
                "block 1: run b001-v does not print the expected verdict: D/b001-v/stdout:2: \
                 `FAILED` where `PASSED` is expected (the line: `check FAILED`)"
            )
        );
        // Both pass: nothing to say.
        let (m, err) = judged(
            &exp,
            &[
                (1, "baseline", "check PASSED\n"),
                (1, "v", "check PASSED\n"),
            ],
        );
        assert_eq!((m, err), (None, None));
        // Its own pattern: the values are not involved.
        let own =
            experiment("{ expect: { words: [PASSED, OK], pattern: 'verdict: (?P<value>\\w+)' } }");
        let (m, _) = judged(
            &own,
            &[(1, "baseline", "verdict: OK\n"), (1, "v", "verdict: NO\n")],
        );
        assert!(
            m.unwrap()
                .contains("stdout:1: `NO` where `PASSED` or `OK` is expected")
        );
    }

    /// A 5 MB verdict, and a 5 MB checked value that differs, are quoted by their first
    /// [`QUOTED_LINE_CHARS`] characters: the reason stays a paragraph (it was 5 MB, and so
    /// was every report carrying it).
    #[test]
    fn a_huge_captured_value_is_quoted_by_its_prefix() {
        let huge = "F".repeat(5 << 20);
        let exp = experiment(CHECK);
        let out = format!("check {huge}\n");
        let (m, _) = judged(&exp, &[(1, "baseline", "check PASSED\n"), (1, "v", &out)]);
        let m = m.unwrap();
        assert!(m.len() < 4 * QUOTED_LINE_CHARS, "{} bytes", m.len());
        assert!(
            m.contains(&format!("`{}…`", "F".repeat(QUOTED_LINE_CHARS))),
            "{m}"
        );
        let values = experiment("{ values: { pattern: 'check (?P<value>\\S+)' } }");
        let (m, _) = judged(&values, &[(1, "baseline", "check A\n"), (1, "v", &out)]);
        let m = m.unwrap();
        assert!(m.len() < 4 * QUOTED_LINE_CHARS, "{} bytes", m.len());
        assert!(m.contains("where the baseline has `A`"), "{m}");
    }

    /// A baseline printing `FAILED` is the experiment's error — its run, output line and
    /// the file's `correctness` line named — and the variant (also `FAILED`, so equal to
    /// it) is not judged against it. Catches the baseline's own verdict unchecked (the
    /// two `FAILED` compare equal) and a reject blamed on the variant.
    #[test]
    fn a_baseline_that_prints_failed_is_an_error_of_the_experiment() {
        let exp = experiment(CHECK);
        let (m, err) = judged(
            &exp,
            &[
                (1, "baseline", "check PASSED\n"),
                (1, "v", "check PASSED\n"),
                (2, "baseline", "a\nb\ncheck FAILED\n"),
                (2, "v", "check PASSED\n"),
            ],
        );
        assert_eq!(
            m, None,
            "the variant is not rejected for the baseline's fault"
        );
        let err = err.expect("the experiment fails");
        assert!(
            err.starts_with(
                "baseline run b002-baseline does not print the expected verdict: \
                 D/b002-baseline/stdout:3: `FAILED` where `PASSED` is expected"
            ),
            "{err}"
        );
        assert!(err.contains(&format!("({EXP}:4)")), "{err}");
        // A baseline whose checked value cannot be read at all.
        let numbers = experiment("{ values: { pattern: 'sum (?P<value>\\S+)' } }");
        let (m, err) = judged(
            &numbers,
            &[(1, "baseline", "nothing\n"), (1, "v", "sum 1\n")],
        );
        assert_eq!(m, None);
        let err = err.unwrap();
        assert!(
            err.contains(
                "has no checked value to compare with: D/b001-baseline/stdout: the pattern"
            ),
            "{err}"
        );
    }

    /// Values are numbers when both read as numbers (`1.0` = `1.00`), else exact strings
    /// (`PASSED` ≠ `passed`); a word no longer makes the run unreadable. Catches string
    /// comparison of numbers, and numbers parsed case-blind or words refused.
    #[test]
    fn values_compare_as_numbers_or_as_exact_strings() {
        let exp = experiment("{ values: { pattern: 'r (?P<value>\\S+)' } }");
        let same = judged(
            &exp,
            &[(1, "baseline", "r 1.0\nr OK\n"), (1, "v", "r 1.00\nr OK\n")],
        );
        assert_eq!(same, (None, None));
        let (m, err) = judged(
            &exp,
            &[
                (1, "baseline", "r 1.0\nr PASSED\n"),
                (1, "v", "r 1.0\nr passed\n"),
            ],
        );
        assert_eq!(err, None);
        assert_eq!(
            m.as_deref(),
            Some(
                "block 1: checked value #2 is `passed` where the baseline has `PASSED` (D/b001-v/stdout:2)"
            )
        );
        let (m, _) = judged(&exp, &[(1, "baseline", "r 0.25\n"), (1, "v", "r 0.26\n")]);
        assert!(m.unwrap().contains(
            "checked value #1 is 0.26 where the baseline has 0.25 (relative difference 4.000e-2"
        ));
    }

    /// Without a pattern, some line of stdout must say the word; when none does, the last
    /// line is quoted. Catches a substring match (`NOTPASSED`) and the wrong line quoted.
    #[test]
    fn without_a_pattern_some_line_must_say_it() {
        let exp = experiment("{ expect: PASSED }");
        let (m, err) = judged(
            &exp,
            &[
                (1, "baseline", "epoch 1\nResidual PASSED (1e-9)\n"),
                (1, "v", "epoch 1\nNOTPASSED\n\nend: FAILED\n\n"),
            ],
        );
        assert_eq!(err, None);
        assert_eq!(
            m.as_deref(),
            Some(
                "block 1: run b001-v does not print the expected verdict: D/b001-v/stdout: no line \
                 says `PASSED`; its last line (D/b001-v/stdout:4) is `end: FAILED`"
            )
        );
        let (_, err) = judged(&exp, &[(1, "baseline", ""), (1, "v", "PASSED\n")]);
        assert!(
            err.unwrap()
                .contains("no line says `PASSED`; the output is empty")
        );
        let long = format!("{}\n", "y".repeat(QUOTED_LINE_CHARS + 5));
        let (_, err) = judged(&exp, &[(1, "baseline", &long), (1, "v", "PASSED\n")]);
        assert!(
            err.unwrap()
                .contains(&format!("is `{}…`", "y".repeat(QUOTED_LINE_CHARS)))
        );
    }
}

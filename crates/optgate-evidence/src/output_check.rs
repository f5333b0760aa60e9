//! What each variant's output check compared, for its report: `variants[].output_check`
//! (the kinds of check, the runs compared with their block's baseline), the sentence its
//! decision's reason ends with, and the `accept [output not checked]` mark of an accepted
//! variant whose dimension is safe only with unchanged output and which nothing checked.
//! Pure: from the experiment and the collected correctness verdicts.

use optgate_experiment::{CorrectnessSpec, Experiment, MetricSource, checklist};
use optgate_stats::{Analysis, Decision, OutputCheck, OutputCheckKind, VariantAnalysis};

use crate::{Collected, correctness::ArmCorrectness};

/// Fills in every variant's `output_check` and `output_not_checked`, and ends its reason
/// with what the output check compared (or that nothing checked an output that had to
/// stay the same). The decisions are not changed.
pub fn annotate(exp: &Experiment, collected: &Collected, analysis: &mut Analysis) {
    for v in &mut analysis.variants {
        let complete = collected.complete_runs(&v.name).count() as u32;
        let verdict = collected.correctness.as_ref().and_then(|c| c.get(&v.name));
        v.output_check = match (exp.correctness.as_ref(), verdict) {
            (Some(spec), Some(c)) => Some(output_check(exp, spec, c, complete)),
            _ => None,
        };
        v.output_not_checked = output_not_checked(exp, v);
        if let Some(check) = &v.output_check {
            v.reason = format!("{}; {}", v.reason, check.summary);
        } else if v.output_not_checked {
            v.reason = format!("{}; {}", v.reason, NOT_CHECKED_WORDS);
        }
    }
}

/// What the reason of an `accept [output not checked]` says.
pub const NOT_CHECKED_WORDS: &str = "output not checked: this dimension is safe only when the \
     output is unchanged, and the experiment declares no `correctness` (add \
     `correctness.values`, `correctness.files` or `correctness.expect`)";

/// Accepted, of a dimension whose safety rests on unchanged output, and not checked.
fn output_not_checked(exp: &Experiment, v: &VariantAnalysis) -> bool {
    let dimension = exp
        .arms
        .iter()
        .find(|a| a.name == v.name)
        .and_then(|a| a.dimension.as_deref());
    v.decision == Decision::Accept
        && v.output_check.is_none()
        && dimension.is_some_and(checklist::output_must_match)
}

/// One variant's output check: the kinds `spec` declares, the runs compared with their
/// block's baseline (`c.blocks_compared`: a variant runs once per block) out of its
/// `complete` runs, and the sentence saying it.
pub fn output_check(
    exp: &Experiment,
    spec: &CorrectnessSpec,
    c: &ArmCorrectness,
    complete: u32,
) -> OutputCheck {
    let mut checked = Vec::new();
    if !spec.files.is_empty() {
        checked.push(OutputCheckKind::Files);
    }
    if spec.values.is_some() {
        checked.push(OutputCheckKind::Values);
    }
    if spec.expect.is_some() {
        checked.push(OutputCheckKind::Expect);
    }
    OutputCheck {
        checked,
        runs: c.blocks_compared,
        complete_runs: complete,
        summary: summary(exp, spec, c, complete),
    }
}

/// "output: the file `a.out` byte-identical to the baseline's and the values matched by
/// `…` equal within rel 1e-06 in 19/19 runs; the verdict `PASSED` printed in 19/19 runs".
fn summary(exp: &Experiment, spec: &CorrectnessSpec, c: &ArmCorrectness, complete: u32) -> String {
    let mut compared = Vec::new();
    if !spec.files.is_empty() {
        let files: Vec<String> = spec.files.iter().map(|f| format!("`{f}`")).collect();
        let noun = if files.len() == 1 { "file" } else { "files" };
        compared.push(format!(
            "the {noun} {} byte-identical to the baseline's",
            files.join(", ")
        ));
    }
    if let Some(v) = &spec.values {
        let place = match (v.source, v.file.as_deref()) {
            (MetricSource::File, Some(f)) => format!(" in `{f}`"),
            _ => String::new(),
        };
        compared.push(format!(
            "the values matched by `{}`{place} {}",
            v.pattern,
            tolerance_words(v.rel_tol, v.abs_tol)
        ));
    }
    let equal = c.mismatch.is_none();
    let mut parts = Vec::new();
    if !compared.is_empty() {
        let outcome = if equal {
            String::new()
        } else {
            ", until the first difference (the reason above)".to_string()
        };
        parts.push(format!(
            "{} in {}/{complete} runs{outcome}",
            compared.join(" and "),
            c.blocks_compared
        ));
    }
    if let Some(e) = &exp.patterns.expect {
        let printed = if equal { "printed" } else { "checked" };
        parts.push(format!(
            "the verdict {} {printed} in {complete}/{complete} runs",
            e.expected.describe()
        ));
    }
    format!("output: {}", parts.join("; "))
}

/// How checked numbers were compared: "equal within rel 1e-06", "… or abs 0.001",
/// "equal" (exactly, as numbers or as text).
fn tolerance_words(rel_tol: Option<f64>, abs_tol: Option<f64>) -> String {
    let tols: Vec<String> = [("rel", rel_tol), ("abs", abs_tol)]
        .into_iter()
        .filter_map(|(name, t)| t.map(|t| format!("{name} {t:e}")))
        .collect();
    if tols.is_empty() {
        "equal".to_string()
    } else {
        format!("equal within {}", tols.join(" or "))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use optgate_stats::{AnalysisConfig, analyze, fixtures::blocked_arm};

    use super::*;

    /// An experiment with variant `v` of `dimension`, and `correctness` (a YAML flow
    /// mapping, or empty for none).
    fn experiment(dimension: &str, correctness: &str) -> Experiment {
        let correctness = if correctness.is_empty() {
            String::new()
        } else {
            format!("correctness: {correctness}\n")
        };
        let yaml = format!(
            "name: t\napp: {{ command: [app] }}\n\
             metric: {{ pattern: 'epoch (?P<epoch>\\d+) took (?P<seconds>[0-9.]+) s' }}\n\
             {correctness}replicates: 6\n\
             variants:\n  - {{ name: v, dimension: {dimension}, env: {{ X: '1' }} }}\n"
        );
        optgate_experiment::load_str(&yaml, Path::new("/exp/t.yaml"))
            .unwrap()
            .experiment
    }

    /// The kinds declared, the runs compared and the sentence, for values with a relative
    /// tolerance and byte-identical files. Planted bugs caught: a kind left out, the
    /// compared count taken from the complete runs, the tolerance's name dropped.
    #[test]
    fn the_check_says_what_was_compared_in_how_many_runs() {
        let exp = experiment(
            "l1_kernel_library",
            "{ files: [out.dat], values: { pattern: 'E = (?P<value>\\S+)', rel_tol: 1e-6 } }",
        );
        let spec = exp.correctness.clone().unwrap();
        let c = ArmCorrectness {
            blocks_compared: 19,
            mismatch: None,
        };
        let check = output_check(&exp, &spec, &c, 19);
        assert_eq!(
            check.checked,
            vec![OutputCheckKind::Files, OutputCheckKind::Values]
        );
        assert_eq!((check.runs, check.complete_runs), (19, 19));
        assert_eq!(
            check.summary,
            "output: the file `out.dat` byte-identical to the baseline's and the values \
             matched by `E = (?P<value>\\S+)` equal within rel 1e-6 in 19/19 runs"
        );
        let partly = ArmCorrectness {
            blocks_compared: 4,
            mismatch: Some("block 4: out.dat differs".into()),
        };
        let check = output_check(&exp, &spec, &partly, 7);
        assert_eq!((check.runs, check.complete_runs), (4, 7));
        assert!(
            check
                .summary
                .ends_with("in 4/7 runs, until the first difference (the reason above)")
        );
    }

    /// An accepted kernel-library swap that nothing checked is marked and its reason says
    /// so; the same swap with a check, or a dimension whose output may change, is not.
    /// Planted bugs caught: the mark on a rejected variant, on an unlisted dimension, or on
    /// a checked one.
    #[test]
    fn an_unchecked_accept_of_an_output_sensitive_dimension_is_marked() {
        let cfg = AnalysisConfig::default();
        let analysed = || {
            let base = blocked_arm("baseline", 8, |_| 10.0);
            let v = blocked_arm("v", 8, |b| 8.0 + 0.01 * f64::from(b));
            analyze(&base, &[v], &cfg).unwrap()
        };
        let mut a = analysed();
        assert_eq!(a.variants[0].decision, Decision::Accept);
        annotate(
            &experiment("l1_kernel_library", ""),
            &Collected {
                runs: vec![],
                correctness: None,
            },
            &mut a,
        );
        assert!(a.variants[0].output_not_checked);
        assert!(a.variants[0].output_check.is_none());
        assert!(
            a.variants[0].reason.ends_with(NOT_CHECKED_WORDS),
            "{}",
            a.variants[0].reason
        );

        let mut a = analysed();
        annotate(
            &experiment("l2_threading_model", ""),
            &Collected {
                runs: vec![],
                correctness: None,
            },
            &mut a,
        );
        assert!(!a.variants[0].output_not_checked);

        let exp = experiment(
            "l1_kernel_library",
            "{ values: { pattern: 'E = (?P<value>\\S+)' } }",
        );
        let collected = Collected {
            correctness: Some(
                [(
                    "v".to_string(),
                    ArmCorrectness {
                        blocks_compared: 8,
                        mismatch: None,
                    },
                )]
                .into(),
            ),
            runs: vec![],
        };
        let mut a = analysed();
        annotate(&exp, &collected, &mut a);
        let v = &a.variants[0];
        assert!(!v.output_not_checked);
        let check = v.output_check.as_ref().unwrap();
        assert_eq!(
            (check.checked.as_slice(), check.runs),
            ([OutputCheckKind::Values].as_slice(), 8)
        );
        assert!(
            v.reason
                .contains("; output: the values matched by `E = (?P<value>\\S+)` equal in 8/"),
            "{}",
            v.reason
        );
    }
}

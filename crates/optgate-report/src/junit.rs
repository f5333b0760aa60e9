//! JUnit XML for CI systems: a `<testsuites>` root, one `<testsuite>` per experiment and
//! one `<testcase>` per variant — accept passes, reject is a `<failure>` with the reason,
//! inconclusive and not applicable are `<skipped>` with the reason, a variant whose app
//! failed in every run is an `<error>`. The shape the Jenkins/Ant JUnit schema
//! (`tests/fixtures/junit/junit-10.xsd`) accepts; every value goes through [`escape`].

use std::fmt::Write as _;

use optgate_stats::{Decision, VariantAnalysis, fmt_signed_pct};

use crate::Report;
use crate::markup::escape;
use crate::render::proposal_order;

/// How one suite's cases ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    tests: usize,
    failures: usize,
    errors: usize,
    skipped: usize,
}

impl Counts {
    fn of(report: &Report) -> Self {
        let mut c = Counts::default();
        for v in &report.analysis.variants {
            c.tests += 1;
            match v.decision {
                Decision::Accept => {}
                Decision::Reject => c.failures += 1,
                Decision::Failed => c.errors += 1,
                Decision::Inconclusive | Decision::NotApplicable => c.skipped += 1,
            }
        }
        c
    }
}

/// One report as a JUnit document with one suite.
pub fn render_junit(report: &Report) -> String {
    render_junit_suites(&[report])
}

/// Several reports (several experiments) as one JUnit document, a suite each.
pub fn render_junit_suites(reports: &[&Report]) -> String {
    let total = reports.iter().fold(Counts::default(), |a, r| {
        let c = Counts::of(r);
        Counts {
            tests: a.tests + c.tests,
            failures: a.failures + c.failures,
            errors: a.errors + c.errors,
            skipped: a.skipped + c.skipped,
        }
    });
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"optgate\" tests=\"{}\" failures=\"{}\" errors=\"{}\">",
        total.tests, total.failures, total.errors
    );
    for r in reports {
        suite(&mut out, r);
    }
    out.push_str("</testsuites>\n");
    out
}

/// The suite's name: the experiment's, or for a samples file the baseline it compared to.
fn suite_name(report: &Report) -> String {
    match &report.experiment {
        Some(e) => e.name.clone(),
        None => format!("samples against {}", report.analysis.baseline),
    }
}

fn suite(out: &mut String, report: &Report) {
    let a = &report.analysis;
    let c = Counts::of(report);
    let name = suite_name(report);
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        escape(&name),
        c.tests,
        c.failures,
        c.errors,
        c.skipped
    );
    out.push_str("    <properties>\n");
    for (k, v) in [
        ("baseline", a.baseline.clone()),
        ("design", a.design.to_string()),
        ("alpha", a.alpha.to_string()),
        ("min_effect_pct", a.min_effect_pct.to_string()),
        ("steady_epochs", a.steady_window.clone()),
        ("production_epochs", a.production_epochs.to_string()),
    ] {
        let _ = writeln!(
            out,
            "      <property name=\"{}\" value=\"{}\"/>",
            escape(k),
            escape(&v)
        );
    }
    out.push_str("    </properties>\n");
    for v in proposal_order(a) {
        case(out, &name, v);
    }
    out.push_str("  </testsuite>\n");
}

/// The figures behind a decision, in one line: speed-up with its interval, App Impact,
/// System Impact, Weighted Score, the runs compared.
fn summary(v: &VariantAnalysis) -> String {
    let s = &v.speedup;
    let speedup = match (s.estimate, s.ci_low, s.ci_high) {
        (Some(e), Some(l), Some(h)) => format!("{e:.3}× [{l:.3}, {h:.3}]"),
        (Some(e), _, _) => format!("{e:.3}× [unbounded]"),
        _ => "none".into(),
    };
    let pct = |x: Option<f64>| x.map_or("—".to_string(), fmt_signed_pct);
    format!(
        "{}: {}. Speed-up {speedup}; App Impact {}; System Impact {}; Weighted Score {}; \
         runs {}/{}.",
        v.decision,
        v.reason,
        pct(v.app_impact_pct),
        pct(v.system_impact_pct),
        pct(v.weighted_score),
        v.n_baseline,
        v.n_variant
    )
}

fn case(out: &mut String, suite: &str, v: &VariantAnalysis) {
    let _ = writeln!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\">",
        escape(&v.name),
        escape(&format!("optgate.{suite}"))
    );
    let element = match v.decision {
        Decision::Accept => None,
        Decision::Reject => Some("failure"),
        Decision::Failed => Some("error"),
        Decision::Inconclusive | Decision::NotApplicable => Some("skipped"),
    };
    if let Some(element) = element {
        let _ = writeln!(
            out,
            "      <{element} type=\"{}\" message=\"{}\"/>",
            v.decision,
            escape(&format!("{}: {}", v.decision, v.reason))
        );
    }
    let _ = writeln!(
        out,
        "      <system-out>{}</system-out>\n    </testcase>",
        escape(&summary(v))
    );
}

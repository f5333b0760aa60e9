//! JUnit XML for CI systems: a `<testsuites>` root, one `<testsuite>` per experiment and
//! one `<testcase>` per variant — accept passes, reject is a `<failure>` with the reason,
//! inconclusive and not applicable are `<skipped>` with the reason, a variant whose app
//! failed in every run is an `<error>`. The shape the Jenkins/Ant JUnit schema
//! (`tests/fixtures/junit/junit-10.xsd`) accepts; every value goes through [`escape`].

use std::fmt::Write as _;

use optgate_stats::{Decision, VariantAnalysis, fmt_signed_pct};

use crate::markup::escape;
use crate::model::Report;
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
    fn of_decisions(decisions: impl Iterator<Item = Decision>) -> Self {
        let mut c = Counts::default();
        for d in decisions {
            c.tests += 1;
            match d {
                Decision::Accept => {}
                Decision::Reject => c.failures += 1,
                Decision::Failed => c.errors += 1,
                Decision::Inconclusive | Decision::NotApplicable => c.skipped += 1,
            }
        }
        c
    }

    fn plus(self, c: Counts) -> Counts {
        Counts {
            tests: self.tests + c.tests,
            failures: self.failures + c.failures,
            errors: self.errors + c.errors,
            skipped: self.skipped + c.skipped,
        }
    }
}

/// One test case of a suite: its name, how it ended, why, and the figures behind it.
pub(crate) struct Case {
    pub name: String,
    pub decision: Decision,
    pub reason: String,
    pub summary: String,
}

impl Case {
    /// A variant's case.
    pub(crate) fn of(v: &VariantAnalysis) -> Self {
        Case {
            name: v.name.clone(),
            decision: v.decision,
            reason: v.reason.clone(),
            summary: summary(v),
        }
    }
}

/// One suite: its name, its properties (name, value) and its cases.
pub(crate) struct Suite {
    pub name: String,
    pub properties: Vec<(String, String)>,
    pub cases: Vec<Case>,
}

/// Suites as one JUnit document (the `<testsuites>` root counts every case).
pub(crate) fn document(suites: &[Suite]) -> String {
    let total = suites.iter().fold(Counts::default(), |a, s| {
        a.plus(Counts::of_decisions(s.cases.iter().map(|c| c.decision)))
    });
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"optgate\" tests=\"{}\" failures=\"{}\" errors=\"{}\">",
        total.tests, total.failures, total.errors
    );
    for s in suites {
        suite(&mut out, s);
    }
    out.push_str("</testsuites>\n");
    out
}

/// One report as a JUnit document with one suite.
pub fn render_junit(report: &Report) -> String {
    render_junit_suites(&[report])
}

/// Several reports (several experiments) as one JUnit document, a suite each.
pub fn render_junit_suites(reports: &[&Report]) -> String {
    let suites: Vec<Suite> = reports.iter().map(|r| suite_of(r)).collect();
    document(&suites)
}

/// The suite's name: the experiment's, or for a samples file the baseline it compared to.
fn suite_name(report: &Report) -> String {
    match &report.experiment {
        Some(e) => e.name.clone(),
        None => format!("samples against {}", report.analysis.baseline),
    }
}

/// A report's suite: the design as properties, a case per variant in proposal order.
fn suite_of(report: &Report) -> Suite {
    let a = &report.analysis;
    let properties = [
        ("baseline", a.baseline.clone()),
        ("design", a.design.to_string()),
        ("alpha", a.alpha.to_string()),
        ("min_effect_pct", a.min_effect_pct.to_string()),
        ("steady_epochs", a.steady_window.clone()),
        ("production_epochs", a.production_epochs.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    Suite {
        name: suite_name(report),
        properties,
        cases: proposal_order(a).into_iter().map(Case::of).collect(),
    }
}

fn suite(out: &mut String, s: &Suite) {
    let c = Counts::of_decisions(s.cases.iter().map(|c| c.decision));
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\">",
        escape(&s.name),
        c.tests,
        c.failures,
        c.errors,
        c.skipped
    );
    out.push_str("    <properties>\n");
    for (k, v) in &s.properties {
        let _ = writeln!(
            out,
            "      <property name=\"{}\" value=\"{}\"/>",
            escape(k),
            escape(v)
        );
    }
    out.push_str("    </properties>\n");
    for case in &s.cases {
        write_case(out, &s.name, case);
    }
    out.push_str("  </testsuite>\n");
}

/// The figures behind a decision, in one line: speed-up with its interval, App Impact,
/// System Impact, Weighted Score, the runs compared.
pub(crate) fn summary(v: &VariantAnalysis) -> String {
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

fn write_case(out: &mut String, suite: &str, case: &Case) {
    let _ = writeln!(
        out,
        "    <testcase name=\"{}\" classname=\"{}\">",
        escape(&case.name),
        escape(&format!("optgate.{suite}"))
    );
    let element = match case.decision {
        Decision::Accept => None,
        Decision::Reject => Some("failure"),
        Decision::Failed => Some("error"),
        Decision::Inconclusive | Decision::NotApplicable => Some("skipped"),
    };
    if let Some(element) = element {
        let _ = writeln!(
            out,
            "      <{element} type=\"{}\" message=\"{}\"/>",
            case.decision,
            escape(&format!("{}: {}", case.decision, case.reason))
        );
    }
    let _ = writeln!(
        out,
        "      <system-out>{}</system-out>\n    </testcase>",
        escape(&case.summary)
    );
}

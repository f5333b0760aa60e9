//! The formats people share: the HTML page (self-contained, accessible, every value
//! escaped) and the JUnit XML, validated against the Jenkins/Ant JUnit schema committed in
//! `tests/fixtures/junit/` by `xmllint --schema` (Debian's `libxml2-utils`, which
//! `tests/run-all.sh` installs). The browser test of the page is `tests/cluster_apps/shared_reports.rs`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use optgate_report::{
    AnalyzeOptions, ExperimentMeta, Report, VariantMeta, parse_samples, render_html, render_junit,
    render_junit_suites,
};
use optgate_stats::Decision;

/// What a hostile experiment file could put in a description.
const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)> & \"q\" 'a'";

/// Baseline and four variants, with an experiment whose texts are hostile.
fn report() -> Report {
    let text = common::samples_csv(
        &[
            ("base", 20.0, 10.0),
            ("omp6", 19.0, 9.0),
            ("same", 20.0, 10.0),
            ("compile", 260.0, 10.3),
            ("extra", 20.0, 10.0),
        ],
        8,
        5,
        0.004,
    );
    let opts = AnalyzeOptions::new("base");
    let s = parse_samples(&text, "samples.csv", &opts.baseline, opts.design).unwrap();
    let analysis = optgate_stats::analyze(&s.baseline, &s.variants, &opts.config()).unwrap();
    let mut r = Report::new(analysis, &s.baseline, &s.variants);
    r.experiment = Some(ExperimentMeta {
        name: "hostile".into(),
        description: Some(HOSTILE.into()),
        metric: Some(format!("metric {HOSTILE}")),
        variants: vec![VariantMeta {
            name: "omp6".into(),
            dimension: Some("l2_threading_model".into()),
            description: Some(format!("</td></tr></table>{HOSTILE}")),
        }],
    });
    r.provenance = Some(serde_json::json!({"host": HOSTILE, "jobs": [{"id": "<1>"}]}));
    r
}

#[test]
fn the_page_is_self_contained_and_hostile_text_is_inert() {
    let html = render_html(&report()).unwrap();
    let lower = html.to_lowercase();
    for markup in [
        "<script", "<img", "<link", "<iframe", "<object", "<embed", "<style ",
    ] {
        assert!(!lower.contains(markup), "{markup} in the page");
    }
    // No tag has an attribute that loads something; the styles load nothing either.
    for tag in all_tags(&lower) {
        for attribute in [
            " src=", " href=", " srcset=", " data=", " poster=", "xlink:", "url(",
        ] {
            assert!(!tag.contains(attribute), "{attribute} in {tag}");
        }
    }
    let style = &lower[lower.find("<style>").unwrap()..lower.find("</style>").unwrap()];
    assert!(!style.contains("url(") && !style.contains("@import") && !style.contains("@font-face"));
    // The only address in the page is the SVG namespace's name (not something loaded).
    assert_eq!(
        html.matches("://").count(),
        html.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    // Every hostile text is there, as text.
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt; \
                   &amp; &quot;q&quot; &#39;a&#39;";
    assert!(html.matches(escaped).count() >= 4, "{html}");
    assert!(html.contains("&lt;/td&gt;&lt;/tr&gt;&lt;/table&gt;"));
}

/// Every tag of `html`, from its `<` to its `>` (text holds no `<`: it is escaped).
fn all_tags(html: &str) -> Vec<&str> {
    html.match_indices('<')
        .filter_map(|(i, _)| Some(&html[i..=i + html[i..].find('>')?]))
        .collect()
}

/// The opening tags named `tag` in `html` (`<tag ...>` or `<tag>`).
fn tags<'a>(html: &'a str, tag: &str) -> Vec<&'a str> {
    let open = format!("<{tag}");
    html.match_indices(&open)
        .filter_map(|(i, _)| {
            let rest = &html[i..];
            let next = rest[open.len()..].chars().next()?;
            if next != ' ' && next != '>' {
                return None;
            }
            Some(&rest[..=rest.find('>')?])
        })
        .collect()
}

#[test]
fn the_page_has_the_accessibility_basics() {
    let html = render_html(&report()).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(html.contains("<title>optgate report: hostile</title>"));
    // One h1, then no level skipped.
    let levels: Vec<u8> = html
        .match_indices("<h")
        .filter_map(|(i, _)| html[i + 2..].chars().next()?.to_digit(10))
        .map(|d| d as u8)
        .collect();
    assert_eq!(levels[0], 1);
    assert_eq!(levels.iter().filter(|&&l| l == 1).count(), 1);
    assert!(levels.windows(2).all(|w| w[1] <= w[0] + 1), "{levels:?}");
    // Every table has a caption first and every header cell a scope.
    let tables = tags(&html, "table").len();
    assert!(tables >= 3, "{tables} tables");
    assert_eq!(html.matches("<table>\n<caption>").count(), tables);
    let th = tags(&html, "th");
    assert!(
        th.iter()
            .all(|t| t.contains(" scope=\"col\"") || t.contains(" scope=\"row\""))
    );
    assert!(th.iter().any(|t| t.contains("scope=\"row\"")));
    // Every plot is an image named by a title inside it.
    let svgs = tags(&html, "svg");
    assert_eq!(svgs.len(), 6, "speed-ups and one per arm");
    for (i, svg) in svgs.iter().enumerate() {
        let label = format!("id-plot-{}", i + 1);
        assert!(
            svg.contains(&format!("role=\"img\" aria-labelledby=\"{label}\"")),
            "{svg}"
        );
        assert!(html.contains(&format!("<title id=\"{label}\">")));
    }
    assert!(html.contains("<title id=\"id-plot-1\">Steady-state speed-up"));
    // The sections.
    for h in [
        "Proposal table",
        "Decisions",
        "Plots",
        "Steady-state statistics",
        "Matched per-epoch table",
        "Checklist",
        "Provenance",
        "Method",
    ] {
        assert!(html.contains(&format!(">{h}</h2>")), "no section {h}");
    }
}

/// `xmllint`, or a failure telling how to get it.
fn xmllint() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("xmllint"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "xmllint is not installed: run tests/run-all.sh, which installs Debian's \
                 libxml2-utils (CI does), and try again"
            )
        })
}

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/junit/junit-10.xsd")
}

/// `xmllint --schema` of `xml`: whether it is valid, and what xmllint said.
fn validate(xml: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("junit.xml");
    std::fs::write(&file, xml).unwrap();
    let o = Command::new(xmllint())
        .arg("--noout")
        .arg("--schema")
        .arg(schema())
        .arg(&file)
        .output()
        .unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn junit_has_a_case_per_variant_and_is_valid_against_the_schema() {
    let mut r = report();
    let decisions = [
        Decision::Accept,
        Decision::Reject,
        Decision::Inconclusive,
        Decision::NotApplicable,
        Decision::Failed,
    ];
    // Five variants would need another; four plus the fifth decision on a second suite.
    for (v, d) in r.analysis.variants.iter_mut().zip(decisions) {
        v.decision = d;
        v.reason = format!("because {HOSTILE}\u{1}");
    }
    let mut second = report();
    second.experiment.as_mut().unwrap().name = "second <suite>".into();
    second.analysis.variants.truncate(1);
    second.analysis.variants[0].decision = Decision::Failed;
    let xml = render_junit_suites(&[&r, &second]);
    let (ok, why) = validate(&xml);
    assert!(ok, "{why}\n{xml}");

    assert!(xml.contains("<testsuites name=\"optgate\" tests=\"5\" failures=\"1\" errors=\"1\">"));
    assert!(xml.contains(
        "<testsuite name=\"hostile\" tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"2\">"
    ));
    assert!(xml.contains("<testsuite name=\"second &lt;suite&gt;\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">"));
    assert_eq!(xml.matches("<testcase ").count(), 5);
    let case = |name: &str| {
        let start = xml.find(&format!("<testcase name=\"{name}\"")).unwrap();
        &xml[start..start + xml[start..].find("</testcase>").unwrap()]
    };
    let by_decision = |d: Decision| {
        let v = r
            .analysis
            .variants
            .iter()
            .find(|v| v.decision == d)
            .unwrap();
        case(&v.name)
    };
    assert!(!by_decision(Decision::Accept).contains("<failure"));
    assert!(!by_decision(Decision::Accept).contains("<skipped"));
    assert!(
        by_decision(Decision::Reject)
            .contains("<failure type=\"reject\" message=\"reject: because &lt;script&gt;")
    );
    assert!(
        by_decision(Decision::Inconclusive)
            .contains("<skipped type=\"inconclusive\" message=\"inconclusive: because")
    );
    assert!(by_decision(Decision::NotApplicable).contains("<skipped type=\"not_applicable\""));
    assert!(xml.contains("<error type=\"failed\" message=\"failed: "));
    // A control character in a reason would make the file unreadable: replaced.
    assert!(!xml.contains('\u{1}'));
}

#[test]
fn the_validator_refuses_what_the_schema_does_not_allow() {
    // The check above is only worth something if xmllint really applies the schema.
    let xml = render_junit(&report());
    assert!(validate(&xml).0);
    let (ok, why) = validate(&xml.replacen("<testcase name=", "<testcase nom=", 1));
    assert!(!ok, "a test case without a name passed");
    assert!(why.contains("name"), "{why}");
    let (ok, _) = validate(&xml.replacen("<testsuites ", "<testsuites skipped=\"1\" ", 1));
    assert!(!ok, "an attribute the schema lacks passed");
}

/// The report of a real `optgate run` of the campaign of `tests/campaigns/common.rs`
/// (run directories shown as `RUNS`), and the Markdown that run printed.
fn campaign() -> optgate_report::campaign::CampaignReport {
    let text = include_str!("../fixtures/campaign-report.json");
    serde_json::from_str::<optgate_report::campaign::CampaignJson>(text)
        .unwrap()
        .campaign
}

/// The campaign with hostile texts wherever a campaign file or an app puts text.
fn hostile_campaign() -> optgate_report::campaign::CampaignReport {
    let mut c = campaign();
    c.description = Some(format!("{HOSTILE}\r\n# heading | cell"));
    for s in &mut c.stages {
        s.description = Some(HOSTILE.into());
        s.winner_reason = format!("{HOSTILE} {}", s.winner_reason);
        s.variants[0].reason = format!("=cmd|' /C calc'!A0 {HOSTILE}");
    }
    c.checklist[0].reason = Some(HOSTILE.into());
    c.checklist[0].variants.clear();
    c.combined.as_mut().unwrap().configuration = HOSTILE.into();
    c
}

#[test]
fn campaign_markdown_is_what_the_campaign_printed() {
    let md = optgate_report::campaign_formats::render_markdown(&campaign());
    assert_eq!(md, include_str!("../fixtures/campaign-report.md"));
}

#[test]
fn campaign_markdown_shows_hostile_text_as_text() {
    let md = optgate_report::campaign_formats::render_markdown(&hostile_campaign());
    assert!(!md.contains('<') && !md.contains('\r'), "{md}");
    assert!(md.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{md}");
    // The description's line break and `|` cannot start a heading or end a cell.
    assert!(!md.lines().any(|l| l.starts_with("# heading")), "{md}");
    assert!(md.contains("\\| cell"), "{md}");
}

#[test]
fn the_campaign_page_is_self_contained_and_hostile_text_is_inert() {
    let html = optgate_report::campaign_formats::render_html(&hostile_campaign());
    let lower = html.to_lowercase();
    for markup in ["<script", "<img", "<link", "<iframe", "<object", "<embed"] {
        assert!(!lower.contains(markup), "{markup} in the page");
    }
    for tag in all_tags(&lower) {
        for attribute in [" src=", " href=", " srcset=", " data=", " poster=", "url("] {
            assert!(!tag.contains(attribute), "{attribute} in {tag}");
        }
    }
    assert!(!html.contains("://"), "an address in the page");
    let escaped = "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;";
    // Description, three chain items, three reasons… the ones the page shows.
    assert!(html.matches(escaped).count() >= 6, "{html}");
    assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
    assert!(html.contains("<title>optgate campaign report: pass</title>"));
    for h in ["Proposals", "Chain of baselines", "Combined"] {
        assert!(html.contains(&format!("<h2>{h}</h2>")), "no section {h}");
    }
    assert_eq!(tags(&html, "tr").len(), 1 + 4 + 1 + 10, "{html}");
    assert!(html.contains("<span class=\"decision accept\">accept</span>"));
}

#[test]
fn campaign_junit_has_a_suite_per_stage_and_is_valid_against_the_schema() {
    let xml = optgate_report::campaign_formats::render_junit(&hostile_campaign());
    let (ok, why) = validate(&xml);
    assert!(ok, "{why}\n{xml}");
    assert!(xml.contains("<testsuites name=\"optgate\" tests=\"5\" failures=\"1\" errors=\"0\">"));
    assert_eq!(xml.matches("<testsuite ").count(), 4, "{xml}");
    assert!(xml.contains("<testsuite name=\"pass/2 memory\" tests=\"2\" failures=\"1\""));
    assert!(xml.contains("<testcase name=\"combined\" classname=\"optgate.pass/combined\">"));
    assert!(!xml.contains("<script"));
    // The check is worth something: the same document with a raw `<` fails it.
    assert!(!validate(&xml.replacen("&lt;script", "<script", 1)).0);
}

#[test]
fn campaign_csv_and_table_hold_every_proposal_and_no_formula() {
    let c = hostile_campaign();
    let csv = optgate_report::campaign_formats::render_csv(&c);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 4 + 1, "{csv}");
    assert!(
        lines[1].starts_with("1,io,01-io,prefetch,true,accept,"),
        "{csv}"
    );
    assert!(
        lines[5].starts_with("4,combined,04-combined,combined,,accept,"),
        "{csv}"
    );
    // The reason starting `=` is text in a spreadsheet, and quoted (it holds a comma? no:
    // a quote), so the row keeps its 13 cells.
    assert!(csv.contains("\"'=cmd|' /C calc'!A0"), "{csv}");
    let table = optgate_report::campaign_formats::render_table_width(&c, 100);
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
    for name in ["prefetch", "unsafe", "numa", "vec", "Combined"] {
        assert!(table.contains(name), "{name} missing:\n{table}");
    }
    assert!(!table.contains('\r'), "{table}");
}

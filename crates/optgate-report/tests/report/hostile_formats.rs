//! Every report format stays inert with hostile text in every field: the committed
//! samples (an experiment's report, a campaign's) with each string the model accepts
//! replaced by text that is a formula, markup, an escape sequence and a line break at once,
//! rendered in every format and checked by `inert` (the same checks the `report_formats`
//! fuzz target makes).

use crate::inert;

use optgate_report::Report;
use optgate_report::campaign::{CampaignJson, CampaignReport};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Text that is a formula, active markup, terminal escapes and line breaks at once.
const HOSTILE: &str = "=cmd|' /C calc'!A0 <script>alert(1)</script><img src=x onerror=alert(2)> \
    \u{1b}[2J\u{1b}]8;;http://127.0.0.1:9/\u{7}link\u{1b}]8;;\u{7} \r\n# heading \u{9b}31m | &lt; \"q\" <!--";

/// `v` with every string replaced by [`HOSTILE`] where the model still reads it (an enum's
/// word or a number in a string stays as it was), one string at a time; how many were.
fn plant<T: DeserializeOwned>(v: &mut Value) -> usize {
    let mut planted = 0;
    // The method's entries are optgate's own words (the statistics crate writes them; no
    // input reaches them), shown as written: they are left as they are (and the checks
    // skip the "Method" section).
    let paths = string_paths(v)
        .into_iter()
        .filter(|p| !matches!(p.first(), Some(PathStep::Key(k)) if k == "method"));
    for p in paths {
        let before = std::mem::replace(at(v, &p), Value::String(HOSTILE.into()));
        if serde_json::from_value::<T>(v.clone()).is_err() {
            *at(v, &p) = before;
        } else {
            planted += 1;
        }
    }
    planted
}

#[derive(Clone)]
enum PathStep {
    Key(String),
    Index(usize),
}

fn string_paths(v: &Value) -> Vec<Vec<PathStep>> {
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

fn walk(v: &Value, here: &mut Vec<PathStep>, out: &mut Vec<Vec<PathStep>>) {
    match v {
        Value::String(_) => out.push(here.clone()),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, x)| {
            here.push(PathStep::Index(i));
            walk(x, here, out);
            here.pop();
        }),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            here.push(PathStep::Key(k.clone()));
            walk(x, here, out);
            here.pop();
        }),
        _ => {}
    }
}

fn at<'a>(v: &'a mut Value, path: &[PathStep]) -> &'a mut Value {
    path.iter().fold(v, |v, step| match step {
        PathStep::Key(k) => &mut v[k.as_str()],
        PathStep::Index(i) => &mut v[*i],
    })
}

fn hostile<T: DeserializeOwned>(text: &str) -> (T, usize) {
    let mut v: Value = serde_json::from_str(text).unwrap();
    let n = plant::<T>(&mut v);
    (serde_json::from_value(v).unwrap(), n)
}

fn check(results: &[Result<(), String>]) {
    let failed: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn an_experiment_report_with_hostile_text_everywhere_renders_inert() {
    let text = include_str!("../../../../examples/pecan/sample-report.json");
    let (r, planted): (Report, usize) = hostile(text);
    assert!(planted > 20, "only {planted} strings planted");
    let html = optgate_report::render_html(&r).unwrap();
    check(&[
        inert::terminal_inert("table", &optgate_report::render_table(&r)),
        inert::markdown_inert(&optgate_report::render_markdown(&r)),
        inert::csv_inert(&optgate_report::render_csv(&r)),
        inert::html_inert(&html),
        inert::junit_well_formed(&optgate_report::render_junit(&r)),
    ]);
}

#[test]
fn a_campaign_report_with_hostile_text_everywhere_renders_inert() {
    let text = include_str!("../fixtures/campaign-report.json");
    let (c, planted): (CampaignJson, usize) = hostile(text);
    assert!(planted > 20, "only {planted} strings planted");
    let r: &CampaignReport = &c.campaign;
    use optgate_report::campaign_formats as f;
    check(&[
        inert::terminal_inert("table", &f::render_table_width(r, 100)),
        inert::markdown_inert(&f::render_markdown(r)),
        inert::csv_inert(&f::render_csv(r)),
        inert::html_inert(&f::render_html(r)),
        inert::junit_well_formed(&f::render_junit(r)),
    ]);
}

/// The checks catch what they are for (each fed a text that breaks it).
#[test]
fn the_checks_catch_what_they_are_for() {
    assert!(inert::terminal_inert("t", "a\u{1b}[2J").is_err());
    assert!(inert::markdown_inert("a <img src=x>").is_err());
    assert!(inert::markdown_inert("a\rb").is_err());
    assert!(inert::markdown_inert("a &lt;img&gt; 1 < 2").is_ok());
    assert!(inert::csv_inert("a,\"=1+1\"\n").is_err());
    assert!(inert::csv_inert("a,-4.5,'=1+1\n").is_ok());
    assert!(inert::html_inert("<p>x</p><SCRIPT>").is_err());
    assert!(inert::junit_well_formed("<a>\u{1b}</a>").is_err());
    assert!(inert::junit_well_formed("<a>x</a>").is_ok());
}

//! Every report format on any report the model reads: the input's first byte chooses an
//! experiment's report (even) or a campaign's (odd), the rest is its JSON (seeded from the
//! committed samples, so mutations land in names, descriptions, reasons and values). Each
//! format is rendered and must pass the checks of `crates/optgate-report/tests/inert`
//! (the hostile-formats test's): the table free of control characters, Markdown without
//! raw HTML or `\r`, no CSV cell starting a formula, no active markup in the HTML page,
//! the JUnit well-formed XML. A failing check panics, which the fuzzer reports.
#![no_main]

#[path = "../../crates/optgate-report/tests/inert/mod.rs"]
mod inert;

use libfuzzer_sys::fuzz_target;
use optgate_report::Report;
use optgate_report::campaign::CampaignJson;
use optgate_report::campaign_formats as campaign;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, json)) = data.split_first() else {
        return;
    };
    let checks = match kind % 2 {
        0 => match serde_json::from_slice::<Report>(json) {
            Ok(r) => experiment_checks(&r),
            Err(_) => return,
        },
        _ => match serde_json::from_slice::<CampaignJson>(json) {
            Ok(c) => campaign_checks(&c),
            Err(_) => return,
        },
    };
    for check in checks {
        if let Err(e) = check {
            panic!("{e}");
        }
    }
});

fn experiment_checks(r: &Report) -> Vec<Result<(), String>> {
    let mut checks = vec![
        inert::terminal_inert("table", &optgate_report::render_table(r)),
        inert::markdown_inert(&optgate_report::render_markdown(r)),
        inert::csv_inert(&optgate_report::render_csv(r)),
        inert::junit_well_formed(&optgate_report::render_junit(r)),
    ];
    let _ = optgate_report::render_json(r);
    // A report the plots cannot draw is refused with a PlotError, not rendered.
    if let Ok(html) = optgate_report::render_html(r) {
        checks.push(inert::html_inert(&html));
    }
    checks
}

fn campaign_checks(c: &CampaignJson) -> Vec<Result<(), String>> {
    let r = &c.campaign;
    let _ = optgate_report::campaign::render_json(r);
    vec![
        inert::terminal_inert("table", &campaign::render_table_width(r, 100)),
        inert::markdown_inert(&campaign::render_markdown(r)),
        inert::csv_inert(&campaign::render_csv(r)),
        inert::html_inert(&campaign::render_html(r)),
        inert::junit_well_formed(&campaign::render_junit(r)),
    ]
}

//! The HTML report: one self-contained page (styles inline, plots as inline SVG, nothing
//! loaded from anywhere) with what the text report shows — proposal table, decisions with
//! their reasons, plots, statistics, the matched per-epoch table, checklist, provenance,
//! method — built for assistive technology: `lang`, a title, one `h1` then `h2`/`h3`,
//! captions and `scope` on every table, a text alternative for every plot, and colours
//! whose contrast [`crate::page::PALETTE`] states and its test checks. Every value goes through
//! [`escape`]. Pure: [`render_html_with`] takes the drawn plots; [`render_html`] draws them.

use std::fmt::Write as _;

use optgate_stats::Decision;
use serde_json::Value;

use crate::checklist::APPLICATION_ORDER;
use crate::history_html::{HistorySeries, history_section};
use crate::markup::{escape, id, inline_svg};
use crate::model::Report;
use crate::page::page_head;
use crate::plots::{Plot, PlotError, draw_plots};
use crate::render::{
    CHECKLIST_HEADER, NOISE_LEGEND, STATS_HEADER, STATS_LEGEND, any_marked, breakdown_rows,
    checklist_cells, collect_warnings, epoch_table, method_entries, noise_floor_line,
    proposal_order, proposal_rows, stats_rows, strings, system_resource_line, title_line,
    utilisation_lines,
};

/// Keys of the report's JSON object that a section of the page shows or that the title
/// line sums up; any other key (a field added to the report later) is shown generically
/// under "Other report fields".
pub const SHOWN_KEYS: [&str; 22] = [
    "baseline",
    "design",
    "alpha",
    "min_effect_pct",
    "production_epochs",
    "epochs_measured",
    "steady_window",
    "better",
    "method",
    "sequential",
    "warnings",
    "variants",
    "experiment",
    "checklist",
    "provenance",
    "arms",
    "noise_floor",
    "breakdown",
    "interference",
    "system_resource",
    "isolation",
    "utilisation",
];

/// The CSS class of a decision's badge (one of [`crate::page::PALETTE`]'s).
pub(crate) fn decision_class(d: Decision) -> &'static str {
    match d {
        Decision::Accept => "accept",
        Decision::Reject => "reject",
        Decision::Inconclusive => "inconclusive",
        Decision::NotApplicable => "not_applicable",
        Decision::Failed => "failed",
    }
}

/// The report as one HTML page, its plots drawn and inlined: the speed-ups first, then
/// each arm's epochs.
pub fn render_html(report: &Report) -> Result<String, PlotError> {
    let mut plots = draw_plots(report)?;
    plots.rotate_right(1);
    Ok(render_html_with(report, &plots))
}

/// The report as one HTML page with `plots` inlined (pure).
pub fn render_html_with(report: &Report, plots: &[Plot]) -> String {
    render_html_with_history(report, plots, &[])
}

/// The same page with a history section after the plots (nothing when `history` is
/// empty): the experiment's executions over time, per series with its change points.
pub fn render_html_with_history(
    report: &Report,
    plots: &[Plot],
    history: &[HistorySeries],
) -> String {
    let name = report.experiment.as_ref().map(|e| e.name.as_str());
    let title = match name {
        Some(n) => format!("optgate report: {n}"),
        None => "optgate report".to_string(),
    };
    let mut out = String::new();
    out.push_str(&page_head(&title));
    intro(&mut out, report, &title);
    proposals(&mut out, report);
    decisions(&mut out, report);
    notes(&mut out, report);
    figures(&mut out, plots);
    out.push_str(&history_section(history));
    statistics(&mut out, report);
    checklist(&mut out, report);
    breakdown_and_provenance(&mut out, report);
    other_fields(&mut out, report);
    method(&mut out, report);
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

pub(crate) fn para(out: &mut String, text: &str) {
    let _ = writeln!(out, "<p>{}</p>", escape(text));
}

pub(crate) fn heading(out: &mut String, level: u8, text: &str) {
    let _ = writeln!(out, "<h{level}>{}</h{level}>", escape(text));
}

/// The title, the description, the design and the metric.
fn intro(out: &mut String, report: &Report, title: &str) {
    heading(out, 1, title);
    if let Some(d) = report
        .experiment
        .as_ref()
        .and_then(|e| e.description.as_deref())
    {
        para(out, d);
    }
    para(out, &title_line(&report.analysis));
    if let Some(m) = report.experiment.as_ref().and_then(|e| e.metric.as_deref()) {
        para(out, &format!("Metric: {m}"));
    }
}

/// A table: `caption`, a header row of column headers, then rows whose cell in column
/// `row_header` is the row's header. Cells are HTML already (see [`text_rows`]).
pub(crate) fn table(
    out: &mut String,
    caption: &str,
    header: &[String],
    rows: &[Vec<String>],
    row_header: usize,
) {
    let _ = writeln!(out, "<table>\n<caption>{}</caption>", escape(caption));
    out.push_str("<thead><tr>");
    for h in header {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        out.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            if i == row_header {
                let _ = write!(out, "<th scope=\"row\">{c}</th>");
            } else {
                let _ = write!(out, "<td>{c}</td>");
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// Plain-text rows escaped into table cells.
fn text_rows<R: AsRef<[String]>>(rows: &[R]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.as_ref().iter().map(|c| escape(c)).collect())
        .collect()
}

/// A decision badge: the decision's text (with any utilisation mark) in its colours.
pub(crate) fn badge(decision: Decision, text: &str) -> String {
    format!(
        "<span class=\"decision {}\">{}</span>",
        decision_class(decision),
        escape(text)
    )
}

/// The proposal table, its legend and what System Impact compared.
fn proposals(out: &mut String, report: &Report) {
    heading(out, 2, "Proposal table");
    let order = proposal_order(&report.analysis);
    let plain = proposal_rows(report);
    let rows: Vec<Vec<String>> = order
        .iter()
        .zip(&plain)
        .map(|(v, r)| {
            let mut row: Vec<String> = r.iter().map(|c| escape(c)).collect();
            row[6] = badge(v.decision, &r[6]);
            row
        })
        .collect();
    let header = strings([
        "#",
        "Strategy",
        "Description of Optimization",
        "App Impact",
        "System Impact",
        "Weighted Score",
        "Decision",
    ]);
    table(
        out,
        "Variants sorted by Weighted Score = 0.5·App Impact + 0.5·System Impact",
        &header,
        &rows,
        1, // the strategy names the row
    );
    if any_marked(&plain) {
        para(out, NOISE_LEGEND);
    }
    para(out, &system_resource_line(report));
}

/// Each variant's decision with its reason, then what each arm's cores did.
fn decisions(out: &mut String, report: &Report) {
    heading(out, 2, "Decisions");
    out.push_str("<ol>\n");
    for v in proposal_order(&report.analysis) {
        let _ = writeln!(
            out,
            "<li><strong>{}</strong>: {} — {}</li>",
            escape(&v.name),
            badge(v.decision, v.decision.as_str()),
            escape(&v.reason)
        );
    }
    out.push_str("</ol>\n");
    let lines = utilisation_lines(report);
    if !lines.is_empty() {
        heading(
            out,
            3,
            "Utilisation (per launched task or local run, median over runs)",
        );
        list(out, &lines);
    }
}

fn list(out: &mut String, items: &[String]) {
    out.push_str("<ul>\n");
    for i in items {
        let _ = writeln!(out, "<li>{}</li>", escape(i));
    }
    out.push_str("</ul>\n");
}

/// The noise floor, how replicates were isolated, runs measured under interference.
fn notes(out: &mut String, report: &Report) {
    if let Some(line) = noise_floor_line(report) {
        para(out, &line);
    }
    if let Some(i) = &report.isolation {
        para(out, &i.describe());
    }
    if !report.interference.is_empty() {
        heading(out, 2, "Runs measured under interference");
        if let Some(l) = &report.load {
            para(out, &l.describe());
        }
        let items: Vec<String> = report
            .interference
            .iter()
            .map(|f| format!("{} ({}): {}", f.run_id, f.arm, f.reason))
            .collect();
        list(out, &items);
    }
}

/// The plots, each an inline SVG image named by its text alternative.
fn figures(out: &mut String, plots: &[Plot]) {
    if plots.is_empty() {
        return;
    }
    heading(out, 2, "Plots");
    for (i, p) in plots.iter().enumerate() {
        let label = id("plot", i + 1);
        let _ = writeln!(
            out,
            "<figure>\n{}\n<figcaption>Figure {}. {}</figcaption>\n</figure>",
            inline_svg(&p.svg, &label, &p.title),
            i + 1,
            escape(&p.title)
        );
    }
}

/// The steady-state statistics, the warnings and the matched per-epoch table.
fn statistics(out: &mut String, report: &Report) {
    heading(out, 2, "Steady-state statistics");
    let plain = stats_rows(&report.analysis);
    table(
        out,
        "Speed-up > 1 means the variant is faster; p-values raw (Holm-adjusted)",
        &strings(STATS_HEADER),
        &text_rows(&plain),
        1,
    );
    if any_marked(&plain) {
        para(out, STATS_LEGEND);
    }
    let warnings = collect_warnings(report);
    if !warnings.is_empty() {
        heading(out, 3, "Warnings");
        list(out, &warnings);
    }
    heading(out, 2, "Matched per-epoch table");
    let (header, rows) = epoch_table(report);
    table(
        out,
        "Epoch N of every arm side by side: median [first–third quartile]",
        &header,
        &text_rows(&rows),
        1,
    );
}

/// The 10-dimension checklist (or why there is none).
fn checklist(out: &mut String, report: &Report) {
    heading(out, 2, "Checklist");
    let Some(rows) = &report.checklist else {
        para(out, "Checklist: not available from a samples file.");
        return;
    };
    let plain = checklist_cells(rows, |r| format!("{} ({})", r.title, r.dimension));
    table(
        out,
        &format!("10-dimension checklist (recommended order: {APPLICATION_ORDER})"),
        &strings(CHECKLIST_HEADER),
        &text_rows(&plain),
        2,
    );
}

/// The traced time per category, then provenance as it was recorded.
fn breakdown_and_provenance(out: &mut String, report: &Report) {
    if let Some(b) = &report.breakdown {
        heading(out, 2, "Traced time per category beside wall time");
        let (header, rows) = breakdown_rows(b);
        table(
            out,
            "Median per run, seconds",
            &header,
            &text_rows(&rows),
            1,
        );
    }
    if let Some(p) = &report.provenance {
        heading(out, 2, "Provenance");
        // Hosts, jobs and environments run long: folded (native HTML, no script).
        let _ = writeln!(
            out,
            "<details>\n<summary>What was recorded about this execution</summary>\n{}</details>",
            json_html(p)
        );
    }
}

/// Fields of the report no section above shows (added to the report after this page was
/// written), each as its JSON value.
fn other_fields(out: &mut String, report: &Report) {
    let Ok(value) = serde_json::to_value(report) else {
        return;
    };
    let other = unshown(value);
    if other.is_empty() {
        return;
    }
    heading(out, 2, "Other report fields");
    out.push_str(&json_html(&Value::Object(other)));
}

/// The entries of a report's JSON object whose keys are not in [`SHOWN_KEYS`].
fn unshown(report: Value) -> serde_json::Map<String, Value> {
    match report {
        Value::Object(map) => map
            .into_iter()
            .filter(|(k, _)| !SHOWN_KEYS.contains(&k.as_str()))
            .collect(),
        _ => serde_json::Map::new(),
    }
}

/// The method, one term per part.
fn method(out: &mut String, report: &Report) {
    heading(out, 2, "Method");
    out.push_str("<dl>\n");
    for (k, v) in method_entries(&report.analysis) {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(v));
    }
    out.push_str("</dl>\n");
}

/// A JSON value as HTML: an object as a description list, an array as a numbered list,
/// a string as its text, anything else as its JSON text.
pub fn json_html(v: &Value) -> String {
    match v {
        Value::Object(map) if !map.is_empty() => {
            let mut s = String::from("<dl>\n");
            for (k, x) in map {
                let _ = writeln!(s, "<dt>{}</dt><dd>{}</dd>", escape(k), json_html(x));
            }
            s.push_str("</dl>\n");
            s
        }
        Value::Array(items) if !items.is_empty() => {
            let mut s = String::from("<ol>\n");
            for x in items {
                let _ = writeln!(s, "<li>{}</li>", json_html(x));
            }
            s.push_str("</ol>\n");
            s
        }
        Value::String(text) => escape(text),
        other => escape(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::PALETTE;

    /// WCAG 2 relative luminance of `#rrggbb`.
    fn luminance(hex: &str) -> f64 {
        let channel = |i: usize| {
            let c = u8::from_str_radix(&hex[i..i + 2], 16).unwrap() as f64 / 255.0;
            if c <= 0.03928 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
    }

    fn contrast(a: &str, b: &str) -> f64 {
        let (x, y) = (luminance(a), luminance(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    }

    #[test]
    fn every_colour_pair_has_aa_contrast() {
        // Reference values of the WCAG formula.
        assert!((contrast("#000000", "#ffffff") - 21.0).abs() < 1e-9);
        assert!((contrast("#767676", "#ffffff") - 4.54).abs() < 0.01);
        for (class, fg, bg) in PALETTE {
            let c = contrast(fg, bg);
            assert!(c >= 4.5, "{class}: {fg} on {bg} has contrast {c:.2}");
        }
        // The table header's text on its background.
        assert!(contrast("#1b1b1b", "#f0f0f0") >= 4.5);
    }

    #[test]
    fn an_svg_becomes_a_labelled_image() {
        let svg = "<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect/>\n</svg>\n";
        let s = inline_svg(svg, "id-plot-1", "a <b> plot");
        assert_eq!(
            s,
            "<svg width=\"10\" height=\"10\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" \
             aria-labelledby=\"id-plot-1\"><title id=\"id-plot-1\">a &lt;b&gt; plot</title>\n<rect/>\n</svg>"
        );
        assert_eq!(inline_svg("not an svg", "x", "y"), "");
    }

    #[test]
    fn fields_no_section_shows_are_kept_for_the_generic_one() {
        let v = serde_json::json!({"baseline": "b", "variants": [], "guardrails": {"x": 1}});
        let other = unshown(v);
        assert_eq!(other.keys().collect::<Vec<_>>(), ["guardrails"]);
        assert!(unshown(serde_json::json!([1])).is_empty());
    }

    #[test]
    fn json_renders_as_nested_lists_escaped() {
        let v =
            serde_json::json!({"host": "<n1>", "jobs": [1, {"id": "a&b"}], "none": [], "x": null});
        let s = json_html(&v);
        assert_eq!(
            s,
            "<dl>\n<dt>host</dt><dd>&lt;n1&gt;</dd>\n<dt>jobs</dt><dd><ol>\n<li>1</li>\n\
             <li><dl>\n<dt>id</dt><dd>a&amp;b</dd>\n</dl>\n</li>\n</ol>\n</dd>\n\
             <dt>none</dt><dd>[]</dd>\n<dt>x</dt><dd>null</dd>\n</dl>\n"
        );
    }
}

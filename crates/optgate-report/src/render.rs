//! Renderers of a [`Report`]: plain text for a terminal, Markdown, JSON and CSV.
//! Table and Markdown show, in order: the proposal table (sorted by Weighted Score), the
//! per-variant statistics, the matched per-epoch table, the checklist, provenance.
//! The plain text fits a given width ([`render_table_width`]): long cells wrap inside
//! their column, long lines onto indented continuation lines, and a table that cannot fit
//! as columns is shown as one block per row. JSON, Markdown and CSV keep everything whole.
//! Figures whose interval includes "no change" carry a trailing [`NOISE_MARK`].

use std::fmt::Write as _;

use optgate_stats::{Analysis, VariantAnalysis, fmt_p, fmt_signed_pct};

use crate::checklist::{APPLICATION_ORDER, Verdict};
use crate::model::{Report, SystemResource};

/// The report as pretty JSON (the `Analysis` fields at top level, then metadata).
pub fn render_json(report: &Report) -> String {
    // Serialising plain data with Option<f64> (never NaN) cannot fail.
    let mut s = serde_json::to_string_pretty(report)
        .unwrap_or_else(|e| format!("{{\"error\": \"report could not be serialised: {e}\"}}"));
    s.push('\n');
    s
}

/// Variants in proposal-table order: Weighted Score descending, variants without a score
/// (not applicable, no data) last, ties by name.
pub fn proposal_order(analysis: &Analysis) -> Vec<&VariantAnalysis> {
    let mut v: Vec<&VariantAnalysis> = analysis.variants.iter().collect();
    v.sort_by(|a, b| match (a.weighted_score, b.weighted_score) {
        (Some(x), Some(y)) => y.total_cmp(&x).then_with(|| a.name.cmp(&b.name)),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.name.cmp(&b.name),
    });
    v
}

/// Marks a figure whose interval includes "no change": it could be noise.
pub const NOISE_MARK: char = '~';
/// The legend line of [`NOISE_MARK`] under a table that uses it.
pub const NOISE_LEGEND: &str = "~ interval includes 0: could be noise";

/// Whether an interval includes `zero`; an unbounded (missing) end counts as including it.
fn spans(low: Option<f64>, high: Option<f64>, zero: f64) -> bool {
    match (low, high) {
        (Some(l), Some(h)) => l <= zero && zero <= h,
        _ => true,
    }
}

/// `cell` with [`NOISE_MARK`] appended when `noisy`.
fn marked(cell: String, noisy: bool) -> String {
    if noisy {
        format!("{cell}{NOISE_MARK}")
    } else {
        cell
    }
}

/// App Impact with its mark: the interval `app_impact_ci_low..high` includes 0.
fn app_cell(v: &VariantAnalysis) -> String {
    match v.app_impact_pct {
        Some(a) => marked(
            fmt_signed_pct(a),
            spans(v.app_impact_ci_low, v.app_impact_ci_high, 0.0),
        ),
        None => "—".into(),
    }
}

/// Weighted Score with its mark: 0.5·App + 0.5·System over the ends of both intervals
/// (lower ends together, upper ends together; a System Impact not measured counts 0)
/// includes 0.
fn score_cell(v: &VariantAnalysis) -> String {
    match v.weighted_score {
        Some(s) => {
            let sys = |end: Option<f64>| match v.system_impact_pct {
                Some(_) => end.map(|e| 0.5 * e),
                None => Some(0.0),
            };
            let end = |a: Option<f64>, s: Option<f64>| a.zip(s).map(|(a, s)| 0.5 * a + s);
            marked(
                fmt_signed_pct(s).trim_end_matches('%').to_string(),
                spans(
                    end(v.app_impact_ci_low, sys(v.system_impact_ci_low)),
                    end(v.app_impact_ci_high, sys(v.system_impact_ci_high)),
                    0.0,
                ),
            )
        }
        None => "—".into(),
    }
}

fn p_pair(raw: Option<f64>, adj: Option<f64>) -> String {
    match (raw, adj) {
        (Some(r), Some(a)) => format!("{} ({})", fmt_p(r), fmt_p(a)),
        (Some(r), None) => fmt_p(r),
        _ => "—".into(),
    }
}

/// System Impact with its interval's mark (the interval includes 0).
fn system_cell(v: &VariantAnalysis) -> String {
    match v.system_impact_pct {
        Some(s) => marked(
            fmt_signed_pct(s),
            spans(v.system_impact_ci_low, v.system_impact_ci_high, 0.0),
        ),
        None => "0 (not measured)".into(),
    }
}

/// The line under the proposal table that says what System Impact compared, with each
/// variant's interval.
pub(crate) fn system_resource_line(report: &Report) -> String {
    let Some(resource) = report.system_resource else {
        return "System Impact: not measured for every run (counted as 0 in the score)."
            .to_string();
    };
    let intervals: Vec<String> = proposal_order(&report.analysis)
        .into_iter()
        .filter_map(|v| {
            let (l, h) = (v.system_impact_ci_low?, v.system_impact_ci_high?);
            Some(format!(
                "{} [{}, {}]",
                v.name,
                fmt_signed_pct(l),
                fmt_signed_pct(h)
            ))
        })
        .collect();
    let level = 100.0 * (1.0 - 2.0 * report.analysis.alpha);
    let sign = match resource {
        SystemResource::Metric => "better",
        SystemResource::CoreSeconds | SystemResource::Energy => "fewer resources",
    };
    let mut line = format!(
        "System Impact compares {}; positive = {sign}.",
        resource.describe()
    );
    if !intervals.is_empty() {
        line.push_str(&format!(
            " {level:.0}% intervals: {}.",
            intervals.join("; ")
        ));
    }
    line
}

fn speedup_cell(v: &VariantAnalysis) -> String {
    let s = &v.speedup;
    let text = match (s.estimate, s.ci_low, s.ci_high) {
        (Some(e), Some(l), Some(h)) => format!("{e:.3}× [{l:.3}, {h:.3}]"),
        (Some(e), _, _) => format!("{e:.3}× [unbounded]"),
        _ => return "—".into(),
    };
    marked(text, spans(s.ci_low, s.ci_high, 1.0))
}

fn first_epoch_cell(v: &VariantAnalysis) -> String {
    let f = &v.first_epoch;
    let noisy = spans(f.change_ci_low_pct, f.change_ci_high_pct, 0.0);
    match (f.change_pct, f.baseline_s, f.variant_s) {
        (Some(c), Some(b), Some(x)) => {
            marked(format!("{} ({:+.3})", fmt_signed_pct(c), x - b), noisy)
        }
        (Some(c), _, _) => marked(fmt_signed_pct(c), noisy),
        _ => "—".into(),
    }
}

/// Whether any cell of `rows` carries [`NOISE_MARK`].
pub(crate) fn any_marked<R: AsRef<[String]>>(rows: &[R]) -> bool {
    rows.iter()
        .any(|r| r.as_ref().iter().any(|c| c.ends_with(NOISE_MARK)))
}

fn breakeven_cell(v: &VariantAnalysis) -> String {
    match v.breakeven_epoch {
        Some(n) => n.to_string(),
        None if v.first_epoch.change_pct.is_some() && v.speedup.estimate.is_some() => {
            "never".into()
        }
        None => "—".into(),
    }
}

fn strategy_and_description(report: &Report, v: &VariantAnalysis) -> (String, String) {
    match report.variant_meta(&v.name) {
        Some(meta) => {
            let dim = meta.dimension.as_deref().map(|d| {
                crate::checklist::dimension_title(d)
                    .unwrap_or(d)
                    .to_string()
            });
            let desc = match (&meta.description, dim) {
                (Some(d), Some(dim)) => format!("{d} [{dim}]"),
                (Some(d), None) => d.clone(),
                (None, Some(dim)) => dim,
                (None, None) => "—".into(),
            };
            (v.name.clone(), desc)
        }
        None => (v.name.clone(), "—".into()),
    }
}

/// The decision, marked with what the arm's utilisation found ("keep [idle cores]") and
/// with an acceptance no output check backs ("accept [output not checked]").
fn decision_cell(report: &Report, v: &VariantAnalysis) -> String {
    let mut marks: Vec<String> = Vec::new();
    if let Some(f) = report.utilisation_finding(&v.name) {
        marks.push(f.label().to_string());
    }
    if v.output_not_checked {
        marks.push(OUTPUT_NOT_CHECKED_MARK.to_string());
    }
    if v.loaded_blocks > 0 {
        let plural = if v.loaded_blocks == 1 { "" } else { "s" };
        marks.push(format!("{} loaded block{plural}", v.loaded_blocks));
    }
    let marks: String = marks.iter().map(|m| format!(" [{m}]")).collect();
    format!("{}{marks}", v.decision)
}

/// The proposal table's mark of an accepted variant whose dimension is safe only with
/// unchanged output and whose experiment declares no output check.
pub const OUTPUT_NOT_CHECKED_MARK: &str = "output not checked";

/// The utilisation lines under the decisions: one per arm with task records.
pub(crate) fn utilisation_lines(report: &Report) -> Vec<String> {
    report
        .utilisation
        .iter()
        .flatten()
        .map(|u| u.describe())
        .collect()
}

/// Rows of the proposal table (without header): #, Strategy, Description, App Impact,
/// System Impact, Weighted Score, Decision.
pub(crate) fn proposal_rows(report: &Report) -> Vec<[String; 7]> {
    proposal_order(&report.analysis)
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let (strategy, desc) = strategy_and_description(report, v);
            [
                (i + 1).to_string(),
                strategy,
                desc,
                app_cell(v),
                system_cell(v),
                score_cell(v),
                decision_cell(report, v),
            ]
        })
        .collect()
}

/// The legend of [`NOISE_MARK`] under the statistics table.
pub(crate) const STATS_LEGEND: &str =
    "~ interval includes no change (speed-up 1, epoch-1 change 0): could be noise";

pub(crate) const STATS_HEADER: [&str; 10] = [
    "Variant",
    "Speed-up [CI]",
    "p improvement (adj)",
    "p no worthwhile (adj)",
    "n base/var",
    "min p (adj)",
    "MDE",
    "Epoch 1 change (s)",
    "Break-even",
    "Test",
];

pub(crate) fn stats_rows(a: &Analysis) -> Vec<[String; 10]> {
    a.variants
        .iter()
        .map(|v| {
            [
                v.name.clone(),
                speedup_cell(v),
                p_pair(v.p_improvement, v.p_improvement_adjusted),
                p_pair(v.p_no_worthwhile, v.p_no_worthwhile_adjusted),
                format!("{}/{}", v.n_baseline, v.n_variant),
                p_pair(v.min_achievable_p, v.min_achievable_p_adjusted),
                v.mde_pct.map_or("—".into(), |m| format!("{m:.1}%")),
                first_epoch_cell(v),
                breakeven_cell(v),
                v.p_method.clone().unwrap_or_else(|| "—".into()),
            ]
        })
        .collect()
}

/// Header and rows of the matched per-epoch table: epoch N of every arm side by side,
/// each cell "median [Q1–Q3]"; beside the position, the label the runs printed when it
/// is not the position itself ([`Report::epoch_labels`]).
pub(crate) fn epoch_table(report: &Report) -> (Vec<String>, Vec<Vec<String>>) {
    let arms = &report.arms;
    let labels = &report.epoch_labels;
    let mut header = vec!["Epoch".to_string()];
    if !labels.is_empty() {
        header.push("Printed as".to_string());
    }
    header.extend(arms.iter().map(|a| format!("{} median [IQR]", a.name)));
    let epochs: std::collections::BTreeSet<u32> = arms
        .iter()
        .flat_map(|a| a.epochs.iter().map(|e| e.epoch))
        .collect();
    let rows = epochs
        .into_iter()
        .map(|e| {
            let mut row = vec![e.to_string()];
            if !labels.is_empty() {
                let label = e.checked_sub(1).and_then(|i| labels.get(i as usize));
                row.push(label.map_or("—".into(), |l| l.clone()));
            }
            for arm in arms {
                row.push(match arm.epochs.iter().find(|s| s.epoch == e) {
                    Some(s) => format!("{:.4} [{:.4}–{:.4}]", s.median, s.q1, s.q3),
                    None => "—".into(),
                });
            }
            row
        })
        .collect();
    (header, rows)
}

pub(crate) fn title_line(a: &Analysis) -> String {
    let epochs = if a.per_run {
        "one value per run".to_string()
    } else {
        format!(
            "steady epochs {}, production epochs {}",
            a.steady_window, a.production_epochs
        )
    };
    let mut s = format!(
        "baseline '{}', {} design, α = {} (one-sided; intervals at {:.0}%), min effect {}%, \
         {epochs}",
        a.baseline,
        a.design,
        fmt_p(a.alpha),
        100.0 * (1.0 - 2.0 * a.alpha),
        a.min_effect_pct,
    );
    if let Some(seq) = &a.sequential {
        let _ = write!(
            s,
            "; sequential look {} of {} (nominal α {} of overall {}: {})",
            seq.look,
            seq.planned_looks,
            fmt_p(seq.nominal_alpha),
            fmt_p(seq.overall_alpha),
            seq.rule
        );
    }
    s
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

/// `text` cut into lines of at most `width` characters, at spaces where it can, through a
/// word longer than the width where it must. Text that fits is returned as it is.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    if chars(text) <= width {
        return vec![text.to_string()];
    }
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        let len = chars(&line);
        if len > 0 && len + 1 + word.len() <= width {
            line.push(' ');
            line.extend(&word);
            continue;
        }
        if len > 0 {
            lines.push(std::mem::take(&mut line));
        }
        while word.len() > width {
            lines.push(word.drain(..width).collect());
        }
        line.extend(&word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// Writes `text` after `first`, continuing on lines that start with `cont`, all within
/// `width` characters (where the prefixes leave room).
pub(crate) fn para(out: &mut String, first: &str, cont: &str, text: &str, width: usize) {
    let room = width.saturating_sub(chars(cont)).max(20);
    let first_room = width.saturating_sub(chars(first)).max(20);
    // A first word (a hash, a path) that would be cut after `first` but fits on a
    // continuation line starts there instead.
    let word = text.split_whitespace().next().map_or(0, chars);
    if word > first_room && word <= room && !first.trim().is_empty() {
        let _ = writeln!(out, "{}", first.trim_end());
        for l in wrap(text, room) {
            let _ = writeln!(out, "{cont}{l}");
        }
        return;
    }
    let head = wrap(text, first_room);
    let rest = head[1..].join(" ");
    let _ = writeln!(out, "{first}{}", head[0]);
    if !rest.is_empty() {
        for l in wrap(&rest, room) {
            let _ = writeln!(out, "{cont}{l}");
        }
    }
}

/// Lowers the widths `w` towards `floor`, the widest column first (the rightmost of
/// equals), until their sum is at most `budget`.
fn shrink(w: &mut [usize], floor: &[usize], budget: usize) {
    while w.iter().sum::<usize>() > budget {
        let Some((i, _)) = w
            .iter()
            .zip(floor)
            .enumerate()
            .filter(|(_, (w, f))| w > f)
            .max_by_key(|(i, (w, _))| (**w, *i))
        else {
            return;
        };
        w[i] -= 1;
    }
}

/// Most columns whose values may wrap before a table is shown as blocks instead.
const MAX_WRAPPED_COLUMNS: usize = 3;

/// Plain-text columns, left-aligned, two spaces apart, within `width` characters: first
/// headers wrap down to their values' width, then the widest cells wrap at spaces; a
/// table that still does not fit, or would wrap the values of more than
/// [`MAX_WRAPPED_COLUMNS`] columns, is shown as one block per row ([`stacked`]).
pub(crate) fn text_table(header: &[String], rows: &[Vec<String>], width: usize) -> String {
    let cols = header.len();
    let mut w: Vec<usize> = header.iter().map(|h| chars(h)).collect();
    let mut values = vec![0; cols];
    let mut words: Vec<usize> = header
        .iter()
        .map(|h| h.split_whitespace().map(chars).max().unwrap_or(0))
        .collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(cols) {
            w[i] = w[i].max(chars(c));
            values[i] = values[i].max(chars(c));
            words[i] = words[i].max(c.split_whitespace().map(chars).max().unwrap_or(0));
        }
    }
    let budget = width.saturating_sub(2 * cols.saturating_sub(1));
    if w.iter().sum::<usize>() > budget {
        let headers_to_values: Vec<usize> = (0..cols)
            .map(|i| values[i].max(words[i]).min(w[i]))
            .collect();
        shrink(&mut w, &headers_to_values, budget);
        shrink(&mut w, &words, budget);
        // Rows whose figures all break over lines read worse than one block per row.
        let wrapped_columns = (0..cols)
            .filter(|&i| {
                rows.iter()
                    .any(|r| r.get(i).is_some_and(|c| chars(c) > w[i]))
            })
            .count();
        if w.iter().sum::<usize>() > budget || wrapped_columns > MAX_WRAPPED_COLUMNS {
            return stacked(header, rows, width);
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let wrapped: Vec<Vec<String>> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| wrap(c, w[i]))
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(1);
        for j in 0..height {
            let mut l = String::new();
            for (i, c) in wrapped.iter().enumerate() {
                let c = c.get(j).map_or("", String::as_str);
                l.push_str(c);
                if i + 1 < wrapped.len() {
                    let pad = w[i].saturating_sub(chars(c)) + 2;
                    l.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(l.trim_end());
            out.push('\n');
        }
    };
    line(header, &mut out);
    let rule: Vec<String> = w.iter().map(|w| "-".repeat(*w)).collect();
    line(&rule, &mut out);
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// A table too wide for its columns, one block per row: the row's name (its first cell,
/// or `N. name` under a `#` column), then `  Header: value` lines.
fn stacked(header: &[String], rows: &[Vec<String>], width: usize) -> String {
    let mut out = String::new();
    let skip = if header.first().is_some_and(|h| h == "#") {
        2
    } else {
        1
    };
    for r in rows {
        let title = if skip == 2 {
            format!("{}. {}", r[0], r.get(1).map_or("", String::as_str))
        } else {
            r[0].clone()
        };
        para(&mut out, "", "  ", &title, width);
        for (h, c) in header.iter().zip(r).skip(skip) {
            para(&mut out, &format!("  {h}: "), "      ", c, width);
        }
    }
    out
}

pub(crate) fn strings<const N: usize>(h: [&str; N]) -> Vec<String> {
    h.iter().map(|s| s.to_string()).collect()
}

/// Plain text for a terminal, as wide as it needs (see [`render_table_width`]).
pub fn render_table(report: &Report) -> String {
    render_table_width(report, usize::MAX)
}

/// Plain text for a terminal of `width` columns: no line is longer, except where a single
/// prefix and a 20-character share of text cannot fit (a width under about 30). Control
/// characters from input are shown escaped ([`crate::terminal::for_terminal`]).
pub fn render_table_width(report: &Report, width: usize) -> String {
    let mut out = String::new();
    table_title(&mut out, report, width);
    table_proposals(&mut out, report, width);
    table_notes(&mut out, report, width);
    table_statistics(&mut out, report, width);
    table_checklist(&mut out, report, width);
    table_breakdown_and_method(&mut out, report, width);
    crate::terminal::for_terminal(&out).into_owned()
}

/// The title lines: experiment, design and the metric.
fn table_title(out: &mut String, report: &Report, width: usize) {
    let a = &report.analysis;
    let name = report
        .experiment
        .as_ref()
        .map(|e| format!(" '{}'", e.name))
        .unwrap_or_default();
    para(out, "", "  ", &format!("optgate report{name}"), width);
    para(out, "", "  ", &title_line(a), width);
    if let Some(m) = report.experiment.as_ref().and_then(|e| e.metric.as_deref()) {
        para(out, "metric: ", "  ", m, width);
    }
    let _ = writeln!(out);
}

/// The proposal table and each variant's decision with its reason.
fn table_proposals(out: &mut String, report: &Report, width: usize) {
    let a = &report.analysis;
    para(
        out,
        "",
        "  ",
        "Proposal table (sorted by Weighted Score = 0.5·App + 0.5·System)",
        width,
    );
    let rows: Vec<Vec<String>> = proposal_rows(report).into_iter().map(Vec::from).collect();
    out.push_str(&text_table(
        &strings([
            "#",
            "Strategy",
            "Description of Optimization",
            "App Impact",
            "System Impact",
            "Weighted Score",
            "Decision",
        ]),
        &rows,
        width,
    ));
    if any_marked(&rows) {
        para(out, "", "  ", NOISE_LEGEND, width);
    }
    para(out, "", "  ", &system_resource_line(report), width);
    let _ = writeln!(out, "\nDecisions");
    for (i, v) in proposal_order(a).into_iter().enumerate() {
        let first = format!("  {}. ", i + 1);
        let cont = " ".repeat(chars(&first));
        let text = format!("{} — {}: {}", v.name, v.decision, v.reason);
        para(out, &first, &cont, &text, width);
    }
    let lines = utilisation_lines(report);
    if !lines.is_empty() {
        let _ = writeln!(
            out,
            "\nUtilisation (per launched task or local run, median over runs)"
        );
        for line in lines {
            para(out, "  ", "    ", &line, width);
        }
    }
}

/// The noise floor, how replicates were isolated, runs measured under interference.
fn table_notes(out: &mut String, report: &Report, width: usize) {
    if let Some(line) = noise_floor_line(report) {
        let _ = writeln!(out);
        para(out, "", "  ", &line, width);
    }
    if let Some(line) = operating_line(report) {
        let _ = writeln!(out);
        para(out, "", "  ", &line, width);
    }
    if let Some(i) = &report.isolation {
        let _ = writeln!(out);
        para(out, "", "  ", &i.describe(), width);
    }
    if !report.interference.is_empty() {
        let _ = writeln!(out, "\nRuns measured under interference");
        for line in interference_summary(report) {
            para(out, "  ", "    ", &line, width);
        }
    }
}

/// The interference said once, for the text and Markdown reports: the loaded runs in one
/// line, how many more had CPU steal or overlapping runs, and where the per-run list is.
pub(crate) fn interference_summary(report: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    let loaded = report.load.as_ref().map_or(0, |l| l.loaded_runs);
    if let Some(l) = &report.load {
        lines.push(l.describe());
    }
    let other = report.interference.len().saturating_sub(loaded);
    if other > 0 {
        let (noun, verb) = if other == 1 {
            ("run", "was")
        } else {
            ("runs", "were")
        };
        lines.push(format!(
            "{other} {noun} {verb} measured beside CPU steal or other runs on the same node."
        ));
    }
    lines.push(format!(
        "The {} flagged runs, one by one: JSON `interference`, and the HTML report.",
        report.interference.len()
    ));
    lines
}

/// The steady-state statistics, the warnings and the matched per-epoch table.
fn table_statistics(out: &mut String, report: &Report, width: usize) {
    let a = &report.analysis;
    let _ = writeln!(out);
    para(
        out,
        "",
        "  ",
        "Steady-state statistics (speed-up > 1 = variant faster; p raw (Holm-adjusted))",
        width,
    );
    let rows: Vec<Vec<String>> = stats_rows(a).into_iter().map(Vec::from).collect();
    out.push_str(&text_table(&strings(STATS_HEADER), &rows, width));
    if any_marked(&rows) {
        para(out, "", "  ", STATS_LEGEND, width);
    }

    let warnings = collect_warnings(report);
    if !warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings");
        for w in warnings {
            para(out, "  - ", "    ", &w, width);
        }
    }

    if let Some((header, rows)) = crate::figures::guardrail_table(a) {
        let _ = writeln!(out);
        para(out, "", "  ", &crate::figures::guardrail_title(a), width);
        out.push_str(&text_table(&header, &rows, width));
    }

    let _ = writeln!(out);
    if a.per_run {
        para(out, "", "  ", crate::figures::PER_RUN_NOTE, width);
        let _ = writeln!(out);
        para(out, "", "  ", crate::figures::PER_RUN_TITLE, width);
        let (header, rows) = crate::figures::per_run_table(&report.arms, a.unit.as_deref());
        out.push_str(&text_table(&header, &rows, width));
        return;
    }
    para(
        out,
        "",
        "  ",
        "Matched per-epoch table (epoch N of every arm side by side)",
        width,
    );
    let (header, rows) = epoch_table(report);
    out.push_str(&text_table(&header, &rows, width));
}

/// The 10-dimension checklist (or why there is none).
fn table_checklist(out: &mut String, report: &Report, width: usize) {
    let _ = writeln!(out);
    match &report.checklist {
        None => {
            let _ = writeln!(out, "checklist: not available from a samples file");
        }
        Some(rows) => {
            para(
                out,
                "",
                "  ",
                &format!("10-dimension checklist (recommended order: {APPLICATION_ORDER})"),
                width,
            );
            let table: Vec<Vec<String>> = checklist_cells(rows, |r| r.title.clone());
            out.push_str(&text_table(&strings(CHECKLIST_HEADER), &table, width));
        }
    }
}

/// The traced time per category, provenance and the method.
fn table_breakdown_and_method(out: &mut String, report: &Report, width: usize) {
    let a = &report.analysis;
    if let Some(b) = &report.breakdown {
        let _ = writeln!(out);
        para(
            out,
            "",
            "  ",
            "Traced time per category beside wall time (median per run, seconds)",
            width,
        );
        let (header, rows) = breakdown_rows(b);
        out.push_str(&text_table(&header, &rows, width));
    }

    if let Some(p) = &report.provenance {
        let _ = writeln!(out, "\nProvenance");
        for (k, v) in provenance_entries(p) {
            para(out, &format!("  {k}: "), "    ", &v, width);
        }
    }
    let _ = writeln!(out, "\nMethod");
    for (k, v) in method_entries(a) {
        para(out, &format!("  {k}: "), "    ", v, width);
    }
}

/// The checklist table's header, in every format.
pub(crate) const CHECKLIST_HEADER: [&str; 5] =
    ["#", "Group", "Dimension", "Verdict", "Variants / reason"];

/// The checklist table's cells, in every format: number, group, the dimension as
/// `dimension` writes it (each format its own way), verdict, detail.
pub(crate) fn checklist_cells(
    rows: &[crate::checklist::ChecklistRow],
    dimension: impl Fn(&crate::checklist::ChecklistRow) -> String,
) -> Vec<Vec<String>> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| {
            vec![
                (i + 1).to_string(),
                r.group.clone(),
                dimension(r),
                r.verdict.label().to_string(),
                checklist_detail(r),
            ]
        })
        .collect()
}

pub(crate) fn checklist_detail(r: &crate::checklist::ChecklistRow) -> String {
    let mut parts = Vec::new();
    if !r.variants.is_empty() {
        parts.push(r.variants.join(", "));
    }
    if let Some(reason) = &r.reason {
        parts.push(reason.clone());
    }
    if r.verdict == Verdict::Missing && parts.is_empty() {
        parts.push("no verdict".into());
    }
    parts.join(" — ")
}

/// The design's operating characteristics at the observed noise: power at 2× and 5× the
/// minimum effect, expected blocks with no effect and at those effects.
fn operating_line(report: &Report) -> Option<String> {
    let oc = report.operating_characteristics.as_ref()?;
    let at = |m: f64| oc.points.iter().find(|p| p.effect_multiple == m);
    let power: Vec<String> = [2.0, 5.0]
        .iter()
        .filter_map(|&m| at(m))
        .map(|p| {
            format!(
                "{:.0}% at {:+.1}% ({}×)",
                100.0 * p.p_accept,
                p.speedup_pct,
                p.effect_multiple
            )
        })
        .collect();
    let blocks: Vec<String> = [0.0, 2.0, 5.0]
        .iter()
        .filter_map(|&m| at(m))
        .map(|p| match p.effect_multiple {
            0.0 => format!("{:.1} with no effect", p.expected_blocks),
            m => format!("{:.1} at {m}×", p.expected_blocks),
        })
        .collect();
    let edge = if oc.clamped {
        " (outside the simulated noise range: the nearest simulated noise)"
    } else {
        ""
    };
    Some(format!(
        "Operating characteristics of this design ({} blocks first, at most {}, {} variant(s)) at the observed noise ({:.2}% per block, {:.1}× the minimum effect){edge}: power {}; expected blocks {}. From the simulation, not this experiment: {}",
        oc.replicates,
        oc.max_replicates,
        oc.variants,
        oc.noise_pct,
        oc.noise_ratio,
        power.join(", "),
        blocks.join(", "),
        oc.source
    ))
}

/// The A/A control's apparent effect next to the smallest effect worth having.
pub(crate) fn noise_floor_line(report: &Report) -> Option<String> {
    let n = report.noise_floor.as_ref()?;
    let est = n
        .speedup
        .estimate
        .map(|e| format!("{e:.3}×"))
        .unwrap_or_else(|| "n/a".into());
    let ci = match (n.speedup.ci_low, n.speedup.ci_high) {
        (Some(l), Some(h)) => format!(" (CI {l:.3}–{h:.3})"),
        _ => String::new(),
    };
    let eff = n
        .apparent_effect_pct
        .map(|e| format!("{e:+.2}%"))
        .unwrap_or_else(|| "n/a".into());
    Some(format!(
        "A/A noise floor: `{}`, identical to the baseline, measures {est}{ci}, an apparent effect of {eff}, against the {}% worth having",
        n.arm, n.min_effect_pct
    ))
}

/// Rows of the traced-time breakdown: arm, runs, wall, then one column per category.
pub(crate) fn breakdown_rows(b: &[crate::model::ArmBreakdown]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut cats: Vec<&String> = b.iter().flat_map(|a| a.categories.keys()).collect();
    cats.sort();
    cats.dedup();
    let mut header = strings(["Arm", "Runs", "Wall s"]);
    header.extend(cats.iter().map(|c| format!("{c} s")));
    let rows = b
        .iter()
        .map(|a| {
            let mut row = vec![
                a.arm.clone(),
                a.runs.to_string(),
                a.wall_s
                    .map(|w| format!("{w:.4}"))
                    .unwrap_or_else(|| "—".into()),
            ];
            row.extend(cats.iter().map(|c| {
                a.categories
                    .get(*c)
                    .map(|v| format!("{v:.4}"))
                    .unwrap_or_else(|| "—".into())
            }));
            row
        })
        .collect();
    (header, rows)
}

/// Top-level warnings, then each variant's, prefixed with the variant.
pub(crate) fn collect_warnings(report: &Report) -> Vec<String> {
    let a = &report.analysis;
    let mut w: Vec<String> = a.warnings.clone();
    for v in &a.variants {
        for x in &v.warnings {
            let line = if x.starts_with(&format!("{}:", v.name)) {
                x.clone()
            } else {
                format!("{}: {x}", v.name)
            };
            if !w.contains(&line) {
                w.push(line);
            }
        }
    }
    w
}

/// Provenance as `key: value` lines for a terminal: scalars as they are, lists and objects
/// summarised (the JSON and Markdown forms carry them in full).
pub(crate) fn provenance_entries(p: &serde_json::Value) -> Vec<(String, String)> {
    match p {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Array(a) => {
                        format!("{} entries (see --format json)", a.len())
                    }
                    serde_json::Value::Object(o) => {
                        let short = o.iter().all(|(_, x)| !x.is_array() && !x.is_object());
                        if short && o.len() <= 8 {
                            o.iter()
                                .map(|(k, x)| match x {
                                    serde_json::Value::String(s) => format!("{k}={s}"),
                                    other => format!("{k}={other}"),
                                })
                                .collect::<Vec<_>>()
                                .join(", ")
                        } else {
                            format!("{} fields (see --format json)", o.len())
                        }
                    }
                    other => other.to_string(),
                };
                (k.clone(), text)
            })
            .collect(),
        other => vec![("provenance".into(), other.to_string())],
    }
}

pub(crate) fn method_entries(a: &Analysis) -> Vec<(&'static str, &str)> {
    let m = &a.method;
    vec![
        ("unit", &m.unit),
        ("estimate", &m.estimate),
        ("interval", &m.interval),
        ("test", &m.test),
        ("exact", &m.exact),
        ("approximation", &m.approximation),
        ("multiplicity", &m.multiplicity),
        ("sample size", &m.sample_size),
        ("MDE", &m.mde),
        ("first epoch", &m.first_epoch),
        ("App Impact", &m.app_impact),
        ("break-even", &m.breakeven),
        ("trend", &m.trend),
        ("outliers", &m.outliers),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.as_str()))
    .collect()
}

/// Escapes a Markdown table cell or line of text ([`crate::markup::markdown_text`]).
fn md(s: &str) -> String {
    crate::markup::markdown_text(s)
}

fn md_table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| {} |",
        header.iter().map(|h| md(h)).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
    for r in rows {
        let _ = writeln!(
            out,
            "| {} |",
            r.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | ")
        );
    }
    out
}

/// Markdown (GitHub-flavoured tables).
pub fn render_markdown(report: &Report) -> String {
    let mut out = String::new();
    md_title(&mut out, report);
    md_proposals(&mut out, report);
    md_statistics(&mut out, report);
    md_checklist(&mut out, report);
    md_notes_and_method(&mut out, report);
    out
}

/// The title, description, design and metric.
fn md_title(out: &mut String, report: &Report) {
    let a = &report.analysis;
    let name = report
        .experiment
        .as_ref()
        .map(|e| format!(": {}", md(&e.name)))
        .unwrap_or_default();
    let _ = writeln!(out, "# optgate report{name}\n");
    if let Some(d) = report
        .experiment
        .as_ref()
        .and_then(|e| e.description.as_ref())
    {
        let _ = writeln!(out, "{}\n", md(d));
    }
    let _ = writeln!(out, "{}", md(&title_line(a)));
    if let Some(m) = report.experiment.as_ref().and_then(|e| e.metric.as_deref()) {
        let _ = writeln!(out, "metric: {}", md(m));
    }
    let _ = writeln!(out);
}

/// The proposal table with each decision's reason.
fn md_proposals(out: &mut String, report: &Report) {
    let a = &report.analysis;
    let _ = writeln!(out, "## Proposal table\n");
    let _ = writeln!(
        out,
        "Sorted by Weighted Score = 0.5·App Impact + 0.5·System Impact.\n"
    );
    let rows: Vec<Vec<String>> = proposal_order(a)
        .into_iter()
        .zip(proposal_rows(report))
        .map(|(v, r)| {
            let mut row = Vec::from(r);
            row.push(v.reason.clone());
            row
        })
        .collect();
    let noisy = any_marked(&rows);
    out.push_str(&md_table(
        &strings([
            "#",
            "Strategy",
            "Description of Optimization",
            "App Impact",
            "System Impact",
            "Weighted Score",
            "Decision",
            "Reason",
        ]),
        &rows,
    ));
    if noisy {
        let _ = writeln!(out, "\n{NOISE_LEGEND}");
    }
    let _ = writeln!(out, "\n{}", md(&system_resource_line(report)));
    let lines = utilisation_lines(report);
    if !lines.is_empty() {
        let _ = writeln!(
            out,
            "\nUtilisation (per launched task or local run, median over runs):\n"
        );
        for line in lines {
            let _ = writeln!(out, "- {}", md(&line));
        }
    }
}

/// The steady-state statistics, the warnings and the matched per-epoch table.
fn md_statistics(out: &mut String, report: &Report) {
    let a = &report.analysis;
    let _ = writeln!(out, "\n## Steady-state statistics\n");
    let _ = writeln!(
        out,
        "Speed-up > 1 means the variant is faster; p-values raw (Holm-adjusted).\n"
    );
    let rows: Vec<Vec<String>> = stats_rows(a).into_iter().map(Vec::from).collect();
    out.push_str(&md_table(&strings(STATS_HEADER), &rows));
    if any_marked(&rows) {
        let _ = writeln!(out, "\n{STATS_LEGEND}");
    }

    let warnings = collect_warnings(report);
    if !warnings.is_empty() {
        let _ = writeln!(out, "\n### Warnings\n");
        for w in warnings {
            let _ = writeln!(out, "- {}", md(&w));
        }
    }

    if let Some((header, rows)) = crate::figures::guardrail_table(a) {
        let _ = writeln!(out, "\n## Guardrails\n");
        let _ = writeln!(out, "{}\n", md(&crate::figures::guardrail_title(a)));
        out.push_str(&md_table(&header, &rows));
    }

    if a.per_run {
        let _ = writeln!(out, "\n## Per-run values\n");
        let _ = writeln!(out, "{}\n", crate::figures::PER_RUN_NOTE);
        let (header, rows) = crate::figures::per_run_table(&report.arms, a.unit.as_deref());
        out.push_str(&md_table(&header, &rows));
        return;
    }
    let _ = writeln!(out, "\n## Matched per-epoch table\n");
    let (header, rows) = epoch_table(report);
    out.push_str(&md_table(&header, &rows));
}

/// The 10-dimension checklist (or why there is none).
fn md_checklist(out: &mut String, report: &Report) {
    let _ = writeln!(out, "\n## Checklist\n");
    match &report.checklist {
        None => {
            let _ = writeln!(out, "checklist: not available from a samples file");
        }
        Some(rows) => {
            let _ = writeln!(out, "Recommended application order: {APPLICATION_ORDER}.\n");
            let table: Vec<Vec<String>> =
                checklist_cells(rows, |r| format!("{} (`{}`)", r.title, r.dimension));
            out.push_str(&md_table(&strings(CHECKLIST_HEADER), &table));
        }
    }
}

/// Noise floor, isolation, interference, traced time, provenance and the method.
fn md_notes_and_method(out: &mut String, report: &Report) {
    let a = &report.analysis;
    if let Some(line) = noise_floor_line(report) {
        let _ = writeln!(out, "\n{}", md(&line));
    }
    if let Some(line) = operating_line(report) {
        let _ = writeln!(out, "\n{}", md(&line));
    }
    if let Some(i) = &report.isolation {
        let _ = writeln!(out, "\n{}", md(&i.describe()));
    }
    if !report.interference.is_empty() {
        let _ = writeln!(out, "\n## Runs measured under interference\n");
        for line in interference_summary(report) {
            let _ = writeln!(out, "{}\n", md(&line));
        }
    }
    if let Some(b) = &report.breakdown {
        let _ = writeln!(
            out,
            "\n## Traced time per category beside wall time\n\nMedian per run, seconds.\n"
        );
        let (header, rows) = breakdown_rows(b);
        let cells = |r: &[String]| r.iter().map(|c| md(c)).collect::<Vec<_>>().join(" | ");
        let _ = writeln!(out, "| {} |", cells(&header));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for r in rows {
            let _ = writeln!(out, "| {} |", cells(&r));
        }
    }

    if let Some(p) = &report.provenance {
        let _ = writeln!(out, "\n## Provenance\n");
        let pretty = serde_json::to_string_pretty(p).unwrap_or_else(|_| p.to_string());
        let _ = writeln!(out, "```json\n{pretty}\n```");
    }
    let _ = writeln!(out, "\n## Method\n");
    // The method's words are optgate's own (no input), kept as written.
    for (k, v) in method_entries(a) {
        let _ = writeln!(out, "- **{k}**: {v}");
    }
}

/// One CSV cell of a report (a spreadsheet may read it): [`crate::markup::csv_cell`].
fn csv_field(s: &str) -> String {
    crate::markup::csv_cell(s)
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

/// One row per variant in proposal-table order; empty cells for missing values. Columns
/// added later go at the end, so earlier ones keep their positions.
pub fn render_csv(report: &Report) -> String {
    let header = [
        "rank",
        "variant",
        "decision",
        "app_impact_pct",
        "system_impact_pct",
        "weighted_score",
        "speedup",
        "speedup_ci_low",
        "speedup_ci_high",
        "p_improvement",
        "p_improvement_adjusted",
        "p_no_worthwhile",
        "p_no_worthwhile_adjusted",
        "n_baseline",
        "n_variant",
        "min_achievable_p",
        "mde_pct",
        "first_epoch_baseline_s",
        "first_epoch_variant_s",
        "first_epoch_change_pct",
        "breakeven_epoch",
        "steady_epochs",
        "reason",
        "app_impact_ci_low",
        "app_impact_ci_high",
        "system_impact_ci_low",
        "system_impact_ci_high",
    ];
    let mut out = header.join(",");
    out.push('\n');
    for (i, v) in proposal_order(&report.analysis).into_iter().enumerate() {
        let cells = [
            (i + 1).to_string(),
            csv_field(&v.name),
            v.decision.to_string(),
            opt(v.app_impact_pct),
            opt(v.system_impact_pct),
            opt(v.weighted_score),
            opt(v.speedup.estimate),
            opt(v.speedup.ci_low),
            opt(v.speedup.ci_high),
            opt(v.p_improvement),
            opt(v.p_improvement_adjusted),
            opt(v.p_no_worthwhile),
            opt(v.p_no_worthwhile_adjusted),
            v.n_baseline.to_string(),
            v.n_variant.to_string(),
            opt(v.min_achievable_p),
            opt(v.mde_pct),
            opt(v.first_epoch.baseline_s),
            opt(v.first_epoch.variant_s),
            opt(v.first_epoch.change_pct),
            v.breakeven_epoch.map_or(String::new(), |b| b.to_string()),
            csv_field(&optgate_stats::analysis::epochs_text(&v.steady_epochs).unwrap_or_default()),
            csv_field(&v.reason),
            opt(v.app_impact_ci_low),
            opt(v.app_impact_ci_high),
            opt(v.system_impact_ci_low),
            opt(v.system_impact_ci_high),
        ];
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_and_through_long_words() {
        assert_eq!(wrap("fits", 10), vec!["fits"]);
        assert_eq!(wrap("one two three", 7), vec!["one two", "three"]);
        assert_eq!(wrap("abcdefghij xy", 4), vec!["abcd", "efgh", "ij", "xy"]);
        assert_eq!(wrap("", 5), vec![""]);
    }

    #[test]
    fn a_table_fits_its_width_by_wrapping_the_widest_cells() {
        let header = strings(["#", "Name", "Description", "Score"]);
        let rows = vec![vec![
            "1".to_string(),
            "v1".to_string(),
            "a long description that cannot fit on one line of a narrow table".to_string(),
            "+1.0".to_string(),
        ]];
        let wide = text_table(&header, &rows, usize::MAX);
        assert_eq!(wide.lines().count(), 3, "{wide}");
        let t = text_table(&header, &rows, 40);
        assert!(t.lines().all(|l| l.chars().count() <= 40), "{t}");
        assert!(t.lines().count() > 3, "{t}");
        // Every word is still there, in order.
        let words: Vec<&str> = t
            .lines()
            .skip(2)
            .flat_map(|l| l.split_whitespace())
            .filter(|w| !["1", "v1", "+1.0"].contains(w))
            .collect();
        assert_eq!(words.join(" "), rows[0][2]);
        // Too narrow for columns: one block per row, still within the width.
        let s = text_table(&header, &rows, 12);
        assert!(s.starts_with("1. v1\n"), "{s}");
        assert!(s.contains("  Score: +1.0"), "{s}");
    }

    #[test]
    fn noise_marks_follow_the_intervals() {
        assert!(spans(Some(-1.0), Some(2.0), 0.0));
        assert!(spans(Some(0.0), Some(2.0), 0.0));
        assert!(!spans(Some(0.5), Some(2.0), 0.0));
        assert!(!spans(Some(1.01), Some(1.2), 1.0));
        assert!(spans(None, Some(2.0), 0.0));
        assert_eq!(marked("+1.0%".into(), true), "+1.0%~");
        assert_eq!(marked("+1.0%".into(), false), "+1.0%");
    }

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}

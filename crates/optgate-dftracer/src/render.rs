//! Plain-text rendering of a [`TraceSummary`] for `optgate trace summary`: files, then
//! categories, top names and epochs of the run total, then the diagnostics.

use std::fmt::Write as _;

use crate::aggregate::{Aggregate, Stat, TraceSummary};

/// How many names the table lists (by summed duration); the rest are counted in a line.
const TOP_NAMES: usize = 20;
/// How many diagnostics the table lists; the JSON output carries all that were kept.
const SHOWN_DIAGNOSTICS: usize = 20;
/// The widest a column is padded to: a longer path or name overflows its column rather
/// than widening the table (and a width past 65,535 is not even a valid format width).
const MAX_COLUMN: usize = 100;

fn label(s: &str) -> &str {
    if s.is_empty() { "(none)" } else { s }
}

fn sorted_by_dur<'a>(
    it: impl Iterator<Item = (&'a String, &'a Stat)>,
) -> Vec<(&'a String, &'a Stat)> {
    let mut v: Vec<_> = it.collect();
    // Largest first; ties by name so the output is stable.
    v.sort_by(|a, b| b.1.dur_s.total_cmp(&a.1.dur_s).then_with(|| a.0.cmp(b.0)));
    v
}

/// Renders the summary as aligned plain-text tables (no colours, no trailing spaces).
pub fn render_table(summary: &TraceSummary) -> String {
    let mut out = String::new();
    let total = &summary.total;
    push_files(&mut out, summary);
    let cats = sorted_by_dur(total.by_category.iter());
    push_stat_table(&mut out, total, "category", &cats, 0);
    let names = sorted_by_dur(total.by_name.iter());
    let shown = names.len().min(TOP_NAMES);
    push_stat_table(
        &mut out,
        total,
        "name",
        &names[..shown],
        names.len() - shown,
    );
    push_epochs(&mut out, total);
    push_diagnostics(&mut out, summary);
    out
}

/// The per-file table and the run total line.
fn push_files(out: &mut String, summary: &TraceSummary) {
    let total = &summary.total;
    let _ = writeln!(out, "Files: {}", summary.files.len());
    let w = summary
        .files
        .iter()
        .map(|f| f.path.display().to_string().len())
        .max()
        .unwrap_or(4)
        .clamp(4, MAX_COLUMN);
    let _ = writeln!(
        out,
        "  {:<w$}  {:>7}  {:>4}  {:>10}  {:>12}  {:>5}",
        "path", "format", "unit", "events", "seconds", "diags"
    );
    for f in &summary.files {
        let _ = writeln!(
            out,
            "  {:<w$}  {:>7}  {:>4}  {:>10}  {:>12.6}  {:>5}",
            f.path.display(),
            f.format.as_str(),
            f.time_unit.as_str(),
            f.aggregate.events,
            f.aggregate.dur_s,
            f.diagnostics
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Total: {} events, {:.6} s summed duration",
        total.events, total.dur_s
    );
}

/// One table of count, seconds and share of the run total per row, `more` rows left
/// out said in a last line.
fn push_stat_table(
    out: &mut String,
    total: &Aggregate,
    title: &str,
    rows: &[(&String, &Stat)],
    more: usize,
) {
    let w = rows
        .iter()
        .map(|(k, _)| label(k).len())
        .max()
        .unwrap_or(0)
        .clamp(title.len(), MAX_COLUMN);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:<w$}  {:>10}  {:>14}  {:>6}",
        title, "count", "seconds", "share"
    );
    for (k, s) in rows {
        let share = if total.dur_s > 0.0 {
            100.0 * s.dur_s / total.dur_s
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  {:<w$}  {:>10}  {:>14.6}  {:>5.1}%",
            label(k),
            s.count,
            s.dur_s,
            share
        );
    }
    if more > 0 {
        let _ = writeln!(out, "  ... {more} more");
    }
}

/// The per-epoch table: each epoch's total, then its categories by duration.
fn push_epochs(out: &mut String, total: &Aggregate) {
    if total.by_epoch.is_empty() {
        return;
    }
    let cw = total
        .by_epoch
        .values()
        .flat_map(|e| e.by_category.keys())
        .map(|k| label(k).len())
        .max()
        .unwrap_or(0)
        .clamp("category".len(), MAX_COLUMN);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "  {:>5}  {:<cw$}  {:>10}  {:>14}",
        "epoch", "category", "count", "seconds"
    );
    for (e, st) in &total.by_epoch {
        let _ = writeln!(
            out,
            "  {:>5}  {:<cw$}  {:>10}  {:>14.6}",
            e, "(all)", st.count, st.dur_s
        );
        for (c, s) in sorted_by_dur(st.by_category.iter()) {
            let _ = writeln!(
                out,
                "  {:>5}  {:<cw$}  {:>10}  {:>14.6}",
                "",
                label(c),
                s.count,
                s.dur_s
            );
        }
    }
}

/// The first [`SHOWN_DIAGNOSTICS`] diagnostics and how many more there were.
fn push_diagnostics(out: &mut String, summary: &TraceSummary) {
    if summary.diagnostics.is_empty() {
        return;
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Diagnostics: {}", summary.diagnostics.len());
    for d in summary.diagnostics.iter().take(SHOWN_DIAGNOSTICS) {
        let _ = writeln!(out, "  {d}");
    }
    if summary.diagnostics.len() > SHOWN_DIAGNOSTICS {
        let _ = writeln!(
            out,
            "  ... {} more",
            summary.diagnostics.len() - SHOWN_DIAGNOSTICS
        );
    }
}

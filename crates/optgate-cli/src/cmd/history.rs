//! `optgate history NAME [--format table|json|html]`: every execution of one experiment,
//! oldest first, and the changes found over them (`optgate_client::history`): a table,
//! then one line per series saying what changed from which execution on, or that it did
//! not; as HTML the same table and lines, and each series plotted with its change points.

use anyhow::Result;

use optgate_client::history::{BASELINE_SERIES, ChangePointJson, History, value_of};
use optgate_report::{ChangeMark, HistoryPoint, HistorySeries, HistoryTable};
use optgate_store::Execution;

use super::daemon_client::state_paths;
use crate::choices::HistoryFormat;
use crate::exit;

pub fn history(name: &str, format: HistoryFormat) -> Result<i32> {
    let paths = state_paths()?;
    let history = optgate_client::client::read_history(&paths, name)
        .map_err(|e| exit::with_code(exit::FAILED, e))?;
    let text = match format {
        HistoryFormat::Json => serde_json::to_string_pretty(&history)? + "\n",
        HistoryFormat::Table => render(name, &history),
        HistoryFormat::Html => render_html(name, &history),
    };
    out!("{text}");
    Ok(exit::OK)
}

/// The table and the changes (pure).
pub fn render(name: &str, h: &History) -> String {
    if h.executions.is_empty() {
        let mut out =
            format!("no executions of `{name}` yet; `optgate run` or `optgate submit` one\n");
        for note in &h.notes {
            out.push_str(&format!("note: {note}\n"));
        }
        return out;
    }
    let t = cells(h);
    let mut out = format!(
        "experiment `{name}`: {} execution(s), oldest first\n",
        h.executions.len()
    );
    out.push_str(&table(&t.header, &t.rows));
    out.push('\n');
    for series in &h.series {
        out.push_str(&change_line(series, &h.change_points));
    }
    for note in &h.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// The page (pure): the same table and change lines, then each series — the baseline's
/// steady-state value, each variant's speed-up with its interval — with its change points.
pub fn render_html(name: &str, h: &History) -> String {
    let changes: Vec<String> = h
        .series
        .iter()
        .map(|s| change_line(s, &h.change_points).trim_end().to_string())
        .chain(h.notes.iter().map(|n| format!("note: {n}")))
        .collect();
    let series: Vec<HistorySeries> = h.series.iter().map(|s| series_of(s, h)).collect();
    optgate_report::history_page(name, &cells(h), &changes, &series)
}

/// One series of the history as the page plots it: the executions with a value in it.
fn series_of(series: &str, h: &History) -> HistorySeries {
    let points = h
        .executions
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let value = value_of(e, series).filter(|v| v.is_finite())?;
            let ci = e
                .variants
                .iter()
                .find(|v| v.variant == series)
                .and_then(|v| Some((v.speedup_ci_low?, v.speedup_ci_high?)));
            Some(HistoryPoint {
                at: i + 1,
                value,
                ci,
            })
        })
        .collect();
    let change_points = h
        .change_points
        .iter()
        .filter(|c| c.series == series)
        .map(|c| ChangeMark {
            at: c.at,
            before: c.before,
            after: c.after,
            p: c.p,
        })
        .collect();
    let name = match series == BASELINE_SERIES {
        true => "Baseline steady-state value (seconds)".to_string(),
        false => format!("{series} speed-up over the baseline"),
    };
    HistorySeries {
        name,
        points,
        change_points,
    }
}

/// The table's header and one row per execution.
fn cells(h: &History) -> HistoryTable {
    let variants: Vec<&String> = h.series.iter().filter(|s| *s != BASELINE_SERIES).collect();
    let mut header: Vec<String> = ["#", "ID", "KIND", "STATE", "COMMIT", "BASELINE"]
        .map(String::from)
        .to_vec();
    header.extend(variants.iter().map(|v| v.to_string()));
    let rows = h
        .executions
        .iter()
        .enumerate()
        .map(|(i, e)| row(i + 1, e, &variants))
        .collect();
    HistoryTable { header, rows }
}

fn row(index: usize, e: &Execution, variants: &[&String]) -> Vec<String> {
    let commit = match (&e.build.git_commit, e.build.git_dirty) {
        (Some(c), dirty) => format!(
            "{}{}",
            &c[..c.len().min(10)],
            if dirty == Some(true) { "+dirty" } else { "" }
        ),
        (None, _) => "-".into(),
    };
    let mut cells = vec![
        index.to_string(),
        e.id.clone(),
        e.kind.to_string(),
        e.state.to_string(),
        commit,
        value_of(e, BASELINE_SERIES).map_or("-".into(), |v| format!("{v:.4} s")),
    ];
    cells.extend(variants.iter().map(|v| variant_cell(e, v)));
    cells
}

/// `1.30× [1.20, 1.40] accept`, or `-` when the execution has no such variant.
fn variant_cell(e: &Execution, variant: &str) -> String {
    let Some(v) = e.variants.iter().find(|v| v.variant == variant) else {
        return "-".into();
    };
    let interval = match (v.speedup_ci_low, v.speedup_ci_high) {
        (Some(l), Some(h)) => format!(" [{l:.2}, {h:.2}]"),
        _ => String::new(),
    };
    match v.speedup {
        Some(s) => format!("{s:.2}×{interval} {}", v.decision),
        None => v.decision.to_string(),
    }
}

fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    std::iter::once(line(header))
        .chain(rows.iter().map(|r| line(r)))
        .collect()
}

/// "baseline 15 % slower from execution 5 on, p = 0.004" or "omp6's speed-up unchanged".
fn change_line(series: &str, changes: &[ChangePointJson]) -> String {
    let mine: Vec<&ChangePointJson> = changes.iter().filter(|c| c.series == series).collect();
    let subject = if series == BASELINE_SERIES {
        "baseline".to_string()
    } else {
        format!("{series}'s speed-up")
    };
    if mine.is_empty() {
        return format!("{subject} unchanged\n");
    }
    let said: Vec<String> = mine
        .iter()
        .map(|c| {
            let pct = (c.after / c.before - 1.0) * 100.0;
            let how = match (series == BASELINE_SERIES, pct >= 0.0) {
                (true, true) => format!("{:.0} % slower", pct.abs()),
                (true, false) => format!("{:.0} % faster", pct.abs()),
                (false, _) => format!("{:.2}× → {:.2}×", c.before, c.after),
            };
            format!(
                "{how} from execution {} on, p = {}",
                c.at,
                optgate_stats::fmt_p(c.p)
            )
        })
        .collect();
    format!("{subject} {}\n", said.join("; then "))
}

//! The HTML report's history section: one experiment's executions over time, per series
//! (the baseline's steady-state value, each variant's speed-up) a line plot with its
//! change points marked and a table of the values. It takes the series as plain data
//! ([`HistorySeries`]); finding the change points is not its job. [`history_page`] is the
//! whole page `optgate history --format html` prints.

use std::fmt::Write as _;

use plotters::prelude::*;

use crate::markup::inline_svg;
use crate::markup::{escape, id};
use crate::page::page_head;

/// One series of a history, oldest execution first.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySeries {
    /// What the series is ("baseline steady-state seconds", "omp6 speed-up").
    pub name: String,
    pub points: Vec<HistoryPoint>,
    pub change_points: Vec<ChangeMark>,
}

/// One execution's value (with its interval where there is one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryPoint {
    /// The 1-based index of the execution in the whole history (a series may skip an
    /// execution that has no value in it, a failed one).
    pub at: usize,
    pub value: f64,
    pub ci: Option<(f64, f64)>,
}

/// A change point: `at` is the 1-based index of the first execution at the new level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangeMark {
    pub at: usize,
    pub before: f64,
    pub after: f64,
    pub p: f64,
}

/// The executions table of a history page as plain cells, formatted by the caller; the
/// first cell of each row names the execution (a row header).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistoryTable {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// `optgate history NAME --format html`: one self-contained page (the report's styles,
/// plots inline, nothing loaded) with the executions table, one line per series on what
/// changed (`changes`), and [`history_section`] for the series (pure).
pub fn history_page(
    name: &str,
    table: &HistoryTable,
    changes: &[String],
    series: &[HistorySeries],
) -> String {
    let title = format!("optgate history: {name}");
    let mut out = page_head(&title);
    let _ = writeln!(out, "<h1>{}</h1>", escape(&title));
    let _ = writeln!(
        out,
        "<p>{} execution(s) of <code>{}</code>, oldest first.</p>",
        table.rows.len(),
        escape(name)
    );
    out.push_str("<h2>Executions</h2>\n<table>\n<caption>Executions, oldest first</caption>\n");
    out.push_str("<thead><tr>");
    for h in &table.header {
        let _ = write!(out, "<th scope=\"col\">{}</th>", escape(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for (i, c) in row.iter().enumerate() {
            let _ = match i {
                0 => write!(out, "<th scope=\"row\">{}</th>", escape(c)),
                _ => write!(out, "<td>{}</td>", escape(c)),
            };
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n<h2>Changes</h2>\n<ul>\n");
    for c in changes {
        let _ = writeln!(out, "<li>{}</li>", escape(c));
    }
    out.push_str("</ul>\n");
    out.push_str(&history_section(series));
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

const LINE_COLOR: RGBColor = RGBColor(40, 100, 180);

/// The section: an `h2`, then per series an `h3`, its plot (an image labelled by what it
/// shows) and its table. Empty when there is no series.
pub fn history_section(series: &[HistorySeries]) -> String {
    if series.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>History</h2>\n");
    for (i, s) in series.iter().enumerate() {
        let _ = writeln!(out, "<h3>{}</h3>", escape(&s.name));
        let _ = writeln!(out, "<p>{}</p>", escape(&describe(s)));
        let mut svg = String::new();
        if draw(s, &mut svg).is_ok() {
            let label = id("history", i + 1);
            let _ = writeln!(
                out,
                "<figure>\n{}\n</figure>",
                inline_svg(&svg, &label, &describe(s))
            );
        }
        table(&mut out, s);
    }
    out
}

/// The series in one sentence: how many executions, and each change point.
fn describe(s: &HistorySeries) -> String {
    let mut text = format!("{} over {} executions: ", s.name, s.points.len());
    if s.change_points.is_empty() {
        text.push_str("no change point.");
        return text;
    }
    let marks: Vec<String> = s
        .change_points
        .iter()
        .map(|c| {
            let pct = if c.before != 0.0 {
                format!(" ({:+.1}%)", 100.0 * (c.after / c.before - 1.0))
            } else {
                String::new()
            };
            format!(
                "from execution {} on, {:.4} → {:.4}{pct}, p = {}",
                c.at,
                c.before,
                c.after,
                optgate_stats::fmt_p(c.p)
            )
        })
        .collect();
    text.push_str(&marks.join("; "));
    text.push('.');
    text
}

fn table(out: &mut String, s: &HistorySeries) {
    let _ = writeln!(
        out,
        "<table>\n<caption>{}, one row per execution, oldest first</caption>\n<thead><tr>\
         <th scope=\"col\">Execution</th><th scope=\"col\">Value</th>\
         <th scope=\"col\">Interval</th><th scope=\"col\">Change point</th></tr></thead>\n<tbody>",
        escape(&s.name)
    );
    for p in &s.points {
        let ci =
            p.ci.map_or("—".into(), |(l, h)| format!("[{l:.4}, {h:.4}]"));
        let mark = s
            .change_points
            .iter()
            .find(|c| c.at == p.at)
            .map_or(String::new(), |c| {
                format!("new level, p = {}", optgate_stats::fmt_p(c.p))
            });
        let _ = writeln!(
            out,
            "<tr><th scope=\"row\">{}</th><td>{:.4}</td><td>{}</td><td>{}</td></tr>",
            p.at,
            p.value,
            escape(&ci),
            escape(&mark)
        );
    }
    out.push_str("</tbody>\n</table>\n");
}

/// The series as a line over the execution index, intervals as bars, each change point a
/// red vertical line before its first execution.
fn draw(s: &HistorySeries, out: &mut String) -> Result<(), String> {
    let n = s.points.iter().map(|p| p.at).max().unwrap_or(1).max(1) as f64;
    let values = s
        .points
        .iter()
        .flat_map(|p| [Some(p.value), p.ci.map(|c| c.0), p.ci.map(|c| c.1)])
        .flatten();
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
        (l.min(v), h.max(v))
    });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 0.01).max(1e-9);
    let root = SVGBackend::with_string(out, (900, 320)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&s.name, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0.5..n + 0.5, lo - pad..hi + pad)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("execution")
        .x_labels((n as usize).clamp(1, 20))
        .x_label_formatter(&|x| format!("{}", x.round() as i64))
        .draw()
        .map_err(|e| e.to_string())?;
    let xy = s.points.iter().map(|p| (p.at as f64, p.value));
    chart
        .draw_series(LineSeries::new(xy.clone(), LINE_COLOR.stroke_width(2)))
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(xy.map(|c| Circle::new(c, 4, LINE_COLOR.filled())))
        .map_err(|e| e.to_string())?;
    let bars = s.points.iter().filter_map(|p| {
        let (l, h) = p.ci?;
        let x = p.at as f64;
        Some(PathElement::new(vec![(x, l), (x, h)], LINE_COLOR))
    });
    chart.draw_series(bars).map_err(|e| e.to_string())?;
    let marks = s.change_points.iter().map(|c| {
        let x = c.at as f64 - 0.5;
        PathElement::new(vec![(x, lo - pad), (x, hi + pad)], RED.stroke_width(2))
    });
    chart.draw_series(marks).map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series() -> HistorySeries {
        let mut points: Vec<HistoryPoint> = (0..8)
            .map(|i| HistoryPoint {
                at: i + 1,
                value: if i < 4 { 10.0 } else { 11.5 },
                ci: Some((9.9, 10.1)),
            })
            .collect();
        points[0].ci = None;
        HistorySeries {
            name: "baseline <steady> seconds".into(),
            points,
            change_points: vec![ChangeMark {
                at: 5,
                before: 10.0,
                after: 11.5,
                p: 0.002,
            }],
        }
    }

    #[test]
    fn the_section_marks_the_change_point_in_words_plot_and_table() {
        let html = history_section(&[series()]);
        assert!(html.starts_with("<h2>History</h2>\n<h3>baseline &lt;steady&gt; seconds</h3>"));
        assert!(
            html.contains(
                "over 8 executions: from execution 5 on, 10.0000 → 11.5000 (+15.0%), p = 0.002"
            ),
            "{html}"
        );
        assert!(html.contains("role=\"img\" aria-labelledby=\"id-history-1\""));
        assert_eq!(html.matches("<tr><th scope=\"row\">").count(), 8);
        assert!(html.contains("<tr><th scope=\"row\">5</th><td>11.5000</td><td>[9.9000, 10.1000]</td><td>new level, p = 0.002</td></tr>"));
        assert!(
            html.contains("<tr><th scope=\"row\">1</th><td>10.0000</td><td>—</td><td></td></tr>")
        );
        assert!(!html.contains("<steady>"));
        assert_eq!(history_section(&[]), "");
    }

    /// A gap: the series skips execution 3, and its rows, points and change mark keep the
    /// executions' own numbers. The page holds the table (row headers, escaped cells), the
    /// change lines and the section.
    #[test]
    fn a_history_page_keeps_execution_numbers_across_a_gap() {
        let mut s = series();
        s.points.remove(2);
        for p in s.points.iter_mut().skip(2) {
            p.at += 1;
        }
        s.points.push(HistoryPoint {
            at: 10,
            value: 11.5,
            ci: None,
        });
        s.change_points[0].at = 6;
        let table = HistoryTable {
            header: vec!["#".into(), "ID".into()],
            rows: vec![vec!["1".into(), "e<1>".into()]],
        };
        let html = history_page("demo", &table, &["baseline unchanged".into()], &[s]);
        assert!(html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"));
        assert!(html.contains("<title>optgate history: demo</title>"));
        assert!(html.contains("<tr><th scope=\"row\">1</th><td>e&lt;1&gt;</td></tr>"));
        assert!(html.contains("<li>baseline unchanged</li>"));
        assert!(!html.contains("<tr><th scope=\"row\">3</th>"), "{html}");
        assert!(html.contains("<tr><th scope=\"row\">6</th><td>11.5000</td><td>[9.9000, 10.1000]</td><td>new level, p = 0.002</td></tr>"));
        assert!(html.contains("<tr><th scope=\"row\">10</th>"));
        assert!(html.ends_with("</main>\n</body>\n</html>\n"));
    }

    #[test]
    fn a_stable_series_says_so() {
        let mut s = series();
        s.change_points.clear();
        assert!(history_section(&[s]).contains("over 8 executions: no change point."));
    }
}

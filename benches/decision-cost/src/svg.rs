//! Hand-written SVG: a grid of small line charts sharing one legend. The x axis is
//! categorical (the simulated effects, evenly spaced); each series is a polyline with
//! markers. No plotting crate: the report's plotters charts draw distributions, not this.

use std::fmt::Write as _;

/// Panel size and margins, in pixels.
const PANEL_W: f64 = 330.0;
const PANEL_H: f64 = 230.0;
const MARGIN_L: f64 = 52.0;
const MARGIN_R: f64 = 12.0;
const MARGIN_T: f64 = 28.0;
const MARGIN_B: f64 = 40.0;
const LEGEND_H: f64 = 68.0;
/// Legend entries per row.
const LEGEND_PER_ROW: usize = 3;
/// Series colours (colour-blind safe: Okabe–Ito, then Tol's wine) and dash patterns, by
/// series index.
const COLOURS: [&str; 9] = [
    "#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#000000", "#D55E00", "#0072B2", "#999999",
    "#882255",
];
/// Fixed designs dashed, the budget-20 sequential ones solid, the larger budgets dotted.
const DASHES: [&str; 9] = [
    "4 3", "4 3", "4 3", "1 0", "1 0", "1 0", "2 2", "2 2", "2 2",
];

/// One chart of the grid.
pub struct Panel {
    pub title: String,
    /// One value per x category, per series (in the legend's order); NaN = no point.
    pub series: Vec<Vec<f64>>,
    /// Upper end of the y axis (the lower end is 0).
    pub y_max: f64,
}

/// The whole figure.
pub struct Figure<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub x_label: &'a str,
    pub x_ticks: &'a [String],
    pub legend: &'a [String],
    pub columns: usize,
    pub panels: Vec<Panel>,
    /// A dashed horizontal reference line (e.g. α), drawn in every panel.
    pub reference: Option<(f64, &'a str)>,
}

pub fn render(fig: &Figure) -> String {
    let cols = fig.columns.max(1);
    let rows = fig.panels.len().div_ceil(cols);
    let w = cols as f64 * PANEL_W;
    let h = rows as f64 * PANEL_H + LEGEND_H + 24.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="16" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        esc(fig.title)
    );
    legend(&mut s, fig, w);
    for (i, p) in fig.panels.iter().enumerate() {
        let x0 = (i % cols) as f64 * PANEL_W;
        let y0 = LEGEND_H + 24.0 + (i / cols) as f64 * PANEL_H;
        panel(&mut s, fig, p, x0, y0);
    }
    s.push_str("</svg>\n");
    s
}

fn legend(s: &mut String, fig: &Figure, w: f64) {
    let step = w / LEGEND_PER_ROW as f64;
    for (i, name) in fig.legend.iter().enumerate() {
        let x = (i % LEGEND_PER_ROW) as f64 * step + 10.0;
        let y = 38.0 + 18.0 * (i / LEGEND_PER_ROW) as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{x}" y1="{y}" x2="{}" y2="{y}" stroke="{}" stroke-width="2" stroke-dasharray="{}"/><text x="{}" y="{}">{}</text>"#,
            x + 24.0,
            COLOURS[i % COLOURS.len()],
            DASHES[i % DASHES.len()],
            x + 28.0,
            y + 4.0,
            esc(name)
        );
    }
}

fn panel(s: &mut String, fig: &Figure, p: &Panel, x0: f64, y0: f64) {
    let (l, r) = (x0 + MARGIN_L, x0 + PANEL_W - MARGIN_R);
    let (t, b) = (y0 + MARGIN_T, y0 + PANEL_H - MARGIN_B);
    let n = fig.x_ticks.len().max(2);
    let xp = |i: usize| l + (r - l) * i as f64 / (n - 1) as f64;
    let yp = |v: f64| b - (b - t) * (v / p.y_max).clamp(0.0, 1.05);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>"#,
        (l + r) / 2.0,
        y0 + 18.0,
        esc(&p.title)
    );
    let _ = writeln!(
        s,
        r##"<rect x="{l}" y="{t}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
        r - l,
        b - t
    );
    for k in 0..=4 {
        let v = p.y_max * k as f64 / 4.0;
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{y}" x2="{r}" y2="{y}" stroke="#eee"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            l - 4.0,
            yp(v) + 4.0,
            tick(v),
            y = yp(v)
        );
    }
    for (i, label) in fig.x_ticks.iter().enumerate() {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            xp(i),
            b + 14.0,
            esc(label)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text><text transform="translate({},{}) rotate(-90)" text-anchor="middle">{}</text>"#,
        (l + r) / 2.0,
        b + 30.0,
        esc(fig.x_label),
        x0 + 12.0,
        (t + b) / 2.0,
        esc(fig.y_label)
    );
    if let Some((v, label)) = fig.reference {
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{y}" x2="{r}" y2="{y}" stroke="#c00" stroke-dasharray="2 3"/><text x="{}" y="{}" fill="#c00" text-anchor="end">{}</text>"##,
            r - 2.0,
            yp(v) - 3.0,
            esc(label),
            y = yp(v)
        );
    }
    for (k, ys) in p.series.iter().enumerate() {
        let pts: Vec<String> = ys
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(|(i, v)| format!("{:.1},{:.1}", xp(i), yp(*v)))
            .collect();
        let colour = COLOURS[k % COLOURS.len()];
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.8" stroke-dasharray="{}"/>"#,
            pts.join(" "),
            DASHES[k % DASHES.len()]
        );
        for pt in &pts {
            let (x, y) = pt.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, r#"<circle cx="{x}" cy="{y}" r="2.2" fill="{colour}"/>"#);
        }
    }
}

fn tick(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn esc(t: &str) -> String {
    t.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

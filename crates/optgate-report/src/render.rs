//! Renderers of a [`Report`]: plain text for a terminal, Markdown, JSON and CSV.
//! Table and Markdown show, in order: the proposal table (sorted by Weighted Score), the
//! per-variant statistics, the matched per-epoch table, the checklist, provenance.

use std::fmt::Write as _;

use optgate_stats::{Analysis, VariantAnalysis, fmt_p, fmt_signed_pct};

use crate::checklist::{APPLICATION_ORDER, Verdict};
use crate::{ArmSummary, Report};

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

fn pct(v: Option<f64>) -> String {
    v.map_or("—".into(), fmt_signed_pct)
}

fn p_pair(raw: Option<f64>, adj: Option<f64>) -> String {
    match (raw, adj) {
        (Some(r), Some(a)) => format!("{} ({})", fmt_p(r), fmt_p(a)),
        (Some(r), None) => fmt_p(r),
        _ => "—".into(),
    }
}

fn system_cell(v: &VariantAnalysis) -> String {
    match v.system_impact_pct {
        Some(s) => fmt_signed_pct(s),
        None => "0 (not measured)".into(),
    }
}

fn speedup_cell(v: &VariantAnalysis) -> String {
    match (v.speedup.estimate, v.speedup.ci_low, v.speedup.ci_high) {
        (Some(e), Some(l), Some(h)) => format!("{e:.3}× [{l:.3}, {h:.3}]"),
        (Some(e), _, _) => format!("{e:.3}× [unbounded]"),
        _ => "—".into(),
    }
}

fn first_epoch_cell(v: &VariantAnalysis) -> String {
    let f = &v.first_epoch;
    match (f.change_pct, f.baseline_s, f.variant_s) {
        (Some(c), Some(b), Some(x)) => format!("{} ({:+.3})", fmt_signed_pct(c), x - b),
        (Some(c), _, _) => fmt_signed_pct(c),
        _ => "—".into(),
    }
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

/// Rows of the proposal table (without header): #, Strategy, Description, App Impact,
/// System Impact, Weighted Score, Decision.
fn proposal_rows(report: &Report) -> Vec<[String; 7]> {
    proposal_order(&report.analysis)
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let (strategy, desc) = strategy_and_description(report, v);
            [
                (i + 1).to_string(),
                strategy,
                desc,
                pct(v.app_impact_pct),
                system_cell(v),
                v.weighted_score.map_or("—".into(), |s| {
                    fmt_signed_pct(s).trim_end_matches('%').to_string()
                }),
                v.decision.to_string(),
            ]
        })
        .collect()
}

const STATS_HEADER: [&str; 10] = [
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

fn stats_rows(a: &Analysis) -> Vec<[String; 10]> {
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
/// each cell "median [Q1–Q3]".
fn epoch_table(arms: &[ArmSummary]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["Epoch".to_string()];
    header.extend(arms.iter().map(|a| format!("{} median [IQR]", a.name)));
    let epochs: std::collections::BTreeSet<u32> = arms
        .iter()
        .flat_map(|a| a.epochs.iter().map(|e| e.epoch))
        .collect();
    let rows = epochs
        .into_iter()
        .map(|e| {
            let mut row = vec![e.to_string()];
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

fn title_line(a: &Analysis) -> String {
    let mut s = format!(
        "baseline '{}', {} design, α = {} (one-sided; intervals at {:.0}%), min effect {}%, \
         steady epochs {}, production epochs {}",
        a.baseline,
        a.design,
        fmt_p(a.alpha),
        100.0 * (1.0 - 2.0 * a.alpha),
        a.min_effect_pct,
        a.steady_window,
        a.production_epochs
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

/// Plain-text columns, left-aligned, two spaces apart.
fn text_table(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            l.push_str(c);
            if i + 1 < cells.len() {
                let pad = width[i] - c.chars().count() + 2;
                l.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(header, &mut out);
    let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
    line(&rule, &mut out);
    for r in rows {
        line(r, &mut out);
    }
    out
}

fn strings<const N: usize>(h: [&str; N]) -> Vec<String> {
    h.iter().map(|s| s.to_string()).collect()
}

/// Plain text for a terminal.
pub fn render_table(report: &Report) -> String {
    let a = &report.analysis;
    let mut out = String::new();
    let name = report
        .experiment
        .as_ref()
        .map(|e| format!(" '{}'", e.name))
        .unwrap_or_default();
    let _ = writeln!(out, "optgate report{name}");
    let _ = writeln!(out, "{}", title_line(a));
    if let Some(m) = report.experiment.as_ref().and_then(|e| e.metric.as_deref()) {
        let _ = writeln!(out, "metric: {m}");
    }
    let _ = writeln!(out);

    let _ = writeln!(
        out,
        "Proposal table (sorted by Weighted Score = 0.5·App + 0.5·System)"
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
    ));
    let _ = writeln!(out, "\nDecisions");
    for (i, v) in proposal_order(a).into_iter().enumerate() {
        let _ = writeln!(
            out,
            "  {}. {} — {}: {}",
            i + 1,
            v.name,
            v.decision,
            v.reason
        );
    }

    if let Some(line) = noise_floor_line(report) {
        let _ = writeln!(out, "\n{line}");
    }

    let _ = writeln!(
        out,
        "\nSteady-state statistics (speed-up > 1 = variant faster; p raw (Holm-adjusted))"
    );
    let rows: Vec<Vec<String>> = stats_rows(a).into_iter().map(Vec::from).collect();
    out.push_str(&text_table(&strings(STATS_HEADER), &rows));

    let warnings = collect_warnings(report);
    if !warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings");
        for w in warnings {
            let _ = writeln!(out, "  - {w}");
        }
    }

    let _ = writeln!(
        out,
        "\nMatched per-epoch table (epoch N of every arm side by side)"
    );
    let (header, rows) = epoch_table(&report.arms);
    out.push_str(&text_table(&header, &rows));

    let _ = writeln!(out);
    match &report.checklist {
        None => {
            let _ = writeln!(out, "checklist: not available from a samples file");
        }
        Some(rows) => {
            let _ = writeln!(
                out,
                "10-dimension checklist (recommended order: {APPLICATION_ORDER})"
            );
            let table: Vec<Vec<String>> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    vec![
                        (i + 1).to_string(),
                        r.group.clone(),
                        r.title.clone(),
                        r.verdict.label().to_string(),
                        checklist_detail(r),
                    ]
                })
                .collect();
            out.push_str(&text_table(
                &strings(["#", "Group", "Dimension", "Verdict", "Variants / reason"]),
                &table,
            ));
        }
    }

    if let Some(b) = &report.breakdown {
        let _ = writeln!(
            out,
            "\nTraced time per category beside wall time (median per run, seconds)"
        );
        let (header, rows) = breakdown_rows(b);
        out.push_str(&text_table(&header, &rows));
    }

    if let Some(p) = &report.provenance {
        let _ = writeln!(out, "\nProvenance");
        for (k, v) in provenance_entries(p) {
            let _ = writeln!(out, "  {k}: {v}");
        }
    }
    let _ = writeln!(out, "\nMethod");
    for (k, v) in method_entries(a) {
        let _ = writeln!(out, "  {k}: {v}");
    }
    out
}

fn checklist_detail(r: &crate::ChecklistRow) -> String {
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

/// The A/A control's apparent effect next to the smallest effect worth having.
fn noise_floor_line(report: &Report) -> Option<String> {
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
fn breakdown_rows(b: &[crate::ArmBreakdown]) -> (Vec<String>, Vec<Vec<String>>) {
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
fn collect_warnings(report: &Report) -> Vec<String> {
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
fn provenance_entries(p: &serde_json::Value) -> Vec<(String, String)> {
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

fn method_entries(a: &Analysis) -> Vec<(&'static str, &str)> {
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

/// Escapes a Markdown table cell.
fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
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
    let a = &report.analysis;
    let mut out = String::new();
    let name = report
        .experiment
        .as_ref()
        .map(|e| format!(": {}", e.name))
        .unwrap_or_default();
    let _ = writeln!(out, "# optgate report{name}\n");
    if let Some(d) = report
        .experiment
        .as_ref()
        .and_then(|e| e.description.as_ref())
    {
        let _ = writeln!(out, "{d}\n");
    }
    let _ = writeln!(out, "{}", title_line(a));
    if let Some(m) = report.experiment.as_ref().and_then(|e| e.metric.as_deref()) {
        let _ = writeln!(out, "metric: {m}");
    }
    let _ = writeln!(out);

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

    let _ = writeln!(out, "\n## Steady-state statistics\n");
    let _ = writeln!(
        out,
        "Speed-up > 1 means the variant is faster; p-values raw (Holm-adjusted).\n"
    );
    let rows: Vec<Vec<String>> = stats_rows(a).into_iter().map(Vec::from).collect();
    out.push_str(&md_table(&strings(STATS_HEADER), &rows));

    let warnings = collect_warnings(report);
    if !warnings.is_empty() {
        let _ = writeln!(out, "\n### Warnings\n");
        for w in warnings {
            let _ = writeln!(out, "- {}", w);
        }
    }

    let _ = writeln!(out, "\n## Matched per-epoch table\n");
    let (header, rows) = epoch_table(&report.arms);
    out.push_str(&md_table(&header, &rows));

    let _ = writeln!(out, "\n## Checklist\n");
    match &report.checklist {
        None => {
            let _ = writeln!(out, "checklist: not available from a samples file");
        }
        Some(rows) => {
            let _ = writeln!(out, "Recommended application order: {APPLICATION_ORDER}.\n");
            let table: Vec<Vec<String>> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    vec![
                        (i + 1).to_string(),
                        r.group.clone(),
                        format!("{} (`{}`)", r.title, r.dimension),
                        r.verdict.label().to_string(),
                        checklist_detail(r),
                    ]
                })
                .collect();
            out.push_str(&md_table(
                &strings(["#", "Group", "Dimension", "Verdict", "Variants / reason"]),
                &table,
            ));
        }
    }

    if let Some(line) = noise_floor_line(report) {
        let _ = writeln!(out, "\n{line}");
    }
    if let Some(b) = &report.breakdown {
        let _ = writeln!(
            out,
            "\n## Traced time per category beside wall time\n\nMedian per run, seconds.\n"
        );
        let (header, rows) = breakdown_rows(b);
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for r in rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
    }

    if let Some(p) = &report.provenance {
        let _ = writeln!(out, "\n## Provenance\n");
        let pretty = serde_json::to_string_pretty(p).unwrap_or_else(|_| p.to_string());
        let _ = writeln!(out, "```json\n{pretty}\n```");
    }
    let _ = writeln!(out, "\n## Method\n");
    for (k, v) in method_entries(a) {
        let _ = writeln!(out, "- **{k}**: {v}");
    }
    out
}

/// Quotes a CSV field when it needs it.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or(String::new(), |v| format!("{v}"))
}

/// One row per variant in proposal-table order; empty cells for missing values.
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
    fn csv_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}

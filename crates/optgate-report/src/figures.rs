//! The parts of a report that figures of merit and guardrail metrics add: the per-run
//! values in place of the matched per-epoch table, the note that says why the epoch
//! columns are empty, and the guardrail table.

use optgate_stats::{Analysis, fmt_signed_pct};

use crate::model::ArmSummary;

/// Said where the epoch parts would be, for a primary metric of one value per run.
pub const PER_RUN_NOTE: &str = "One value per run (a figure of merit): no epoch-1 change, \
     break-even, one-time cost or per-epoch warm-up checks; App Impact is the value's \
     relative change, positive = better.";

/// The title of the per-run values' table.
pub const PER_RUN_TITLE: &str = "Per-run values (median [IQR] over the complete runs)";

/// Header and the one row of the per-run values: each arm's median and quartiles of its
/// one value per run (held as epoch 1), in `unit`.
pub fn per_run_table(arms: &[ArmSummary], unit: Option<&str>) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec!["Metric".to_string()];
    header.extend(arms.iter().map(|a| format!("{} median [IQR]", a.name)));
    let mut row = vec![match unit {
        Some(u) => format!("value ({u})"),
        None => "value".to_string(),
    }];
    for arm in arms {
        row.push(match arm.epochs.iter().find(|s| s.epoch == 1) {
            Some(s) => format!("{:.4} [{:.4}–{:.4}]", s.median, s.q1, s.q3),
            None => "—".into(),
        });
    }
    (header, vec![row])
}

/// The title of the guardrail table.
pub fn guardrail_title(a: &Analysis) -> String {
    format!(
        "Guardrails (change positive = better, {:.0}% intervals; a guardrail whose whole \
         interval is beyond its limit rejects the variant)",
        100.0 * (1.0 - 2.0 * a.alpha)
    )
}

/// Header and rows of the guardrail table, one row per variant and guardrail; `None` when
/// no variant has guardrails.
pub fn guardrail_table(a: &Analysis) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let rows: Vec<Vec<String>> = a
        .variants
        .iter()
        .flat_map(|v| {
            v.guardrails.iter().map(|g| {
                let pct = |x: Option<f64>| x.map_or("unbounded".to_string(), fmt_signed_pct);
                let change = match g.impact_pct {
                    Some(p) => format!(
                        "{} [{}, {}]",
                        fmt_signed_pct(p),
                        pct(g.impact_ci_low),
                        pct(g.impact_ci_high)
                    ),
                    None => "not measured".to_string(),
                };
                let name = match &g.unit {
                    Some(u) => format!("{} ({u}, {} is better)", g.name, g.better),
                    None => format!("{} ({} is better)", g.name, g.better),
                };
                vec![
                    v.name.clone(),
                    name,
                    change,
                    g.max_regression_pct
                        .map_or("reported only".to_string(), |m| format!("−{m}%")),
                    if g.regressed { "yes" } else { "no" }.to_string(),
                ]
            })
        })
        .collect();
    let header = ["Variant", "Guardrail", "Change [CI]", "Limit", "Regressed"];
    (!rows.is_empty()).then(|| (header.iter().map(|h| h.to_string()).collect(), rows))
}

//! An experiment's history read back: its executions, oldest first, with the change points
//! found in them (on the baseline's steady-state value and on each variant's speed-up,
//! `optgate_stats::change_points`). Pure over the rows the store reads; writing them is
//! the daemon's (`optgate_daemon::history`).

use serde::Serialize;

use optgate_stats::change_points::{ChangePointConfig, MAX_CHANGE_POINT_SERIES, change_points};
use optgate_store::Execution;

/// The series name of the baseline's steady-state value in [`ChangePointJson::series`].
pub const BASELINE_SERIES: &str = "baseline";

/// One change in a series of the history (`optgate history --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangePointJson {
    /// [`BASELINE_SERIES`] (its steady-state value) or a variant's name (its speed-up).
    pub series: String,
    /// The 1-based index, among the listed executions, of the first at the new level.
    pub at: usize,
    pub before: f64,
    pub after: f64,
    pub p: f64,
}

/// An experiment's history: its executions, oldest first, and the changes found in them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct History {
    pub executions: Vec<Execution>,
    pub change_points: Vec<ChangePointJson>,
    /// Every series searched (the baseline, then each variant), changed or not.
    pub series: Vec<String>,
    /// What the reader must know about what was searched: a series longer than the search
    /// covers ([`MAX_CHANGE_POINT_SERIES`]), a damaged row left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// The history of experiment `name` with its change points (pure over the rows).
pub fn history_of(executions: Vec<Execution>) -> History {
    let mut series = vec![BASELINE_SERIES.to_string()];
    for e in &executions {
        for v in &e.variants {
            if !series.contains(&v.variant) {
                series.push(v.variant.clone());
            }
        }
    }
    let mut change_points = Vec::new();
    let mut notes = Vec::new();
    for name in &series {
        let points = series_points(name, &executions);
        change_points.extend(series_changes(name, &points));
        notes.extend(searched_only_in_part(name, &points));
    }
    History {
        executions,
        change_points,
        series,
        notes,
    }
}

/// [`history_of`] the rows read, each damaged one left out and named in a note.
pub fn history_of_rows(rows: Vec<optgate_store::EachExecution>) -> History {
    let mut damaged = Vec::new();
    let executions = rows
        .into_iter()
        .filter_map(|row| {
            row.map_err(|d| {
                damaged.push(format!(
                    "execution {} left out: its row is damaged ({})",
                    d.id, d.error
                ))
            })
            .ok()
        })
        .collect();
    let mut h = history_of(executions);
    h.notes.extend(damaged);
    h
}

/// The positions (0-based execution index) and finite values of one series.
fn series_points(name: &str, executions: &[Execution]) -> Vec<(usize, f64)> {
    executions
        .iter()
        .enumerate()
        .filter_map(|(i, e)| value_of(e, name).map(|v| (i, v)))
        .filter(|(_, v)| v.is_finite())
        .collect()
}

/// "baseline: only its newest 500 of 10000 values were searched for changes (executions
/// 9501–10000)" when the series is longer than the search covers.
fn searched_only_in_part(name: &str, points: &[(usize, f64)]) -> Option<String> {
    let first = points.len().checked_sub(MAX_CHANGE_POINT_SERIES)?;
    (first > 0).then(|| {
        format!(
            "{name}: only its newest {MAX_CHANGE_POINT_SERIES} of {} values were searched for \
             changes (executions {}–{}); a change before execution {} is not looked for",
            points.len(),
            points[first].0 + 1,
            points[points.len() - 1].0 + 1,
            points[first].0 + 1
        )
    })
}

/// The changes of one series: its values where an execution has one, each change's
/// position mapped back to the execution's 1-based index.
fn series_changes(name: &str, points: &[(usize, f64)]) -> Vec<ChangePointJson> {
    let values: Vec<f64> = points.iter().map(|p| p.1).collect();
    change_points(&values, &ChangePointConfig::default())
        .into_iter()
        .map(|c| ChangePointJson {
            series: name.to_string(),
            at: points[c.index].0 + 1,
            before: c.before,
            after: c.after,
            p: c.p,
        })
        .collect()
}

/// An execution's value in a series: the baseline's steady-state value, or a variant's
/// speed-up estimate.
pub fn value_of(e: &Execution, series: &str) -> Option<f64> {
    if series == BASELINE_SERIES {
        return e.baseline_median_s;
    }
    e.variants
        .iter()
        .find(|v| v.variant == series)
        .and_then(|v| v.speedup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_store::fixtures;

    /// An execution row with the baseline at `base` and omp6's speed-up `speedup`.
    fn execution(i: usize, base: Option<f64>, speedup: f64) -> Execution {
        Execution {
            id: format!("e{i}"),
            started_at: format!("2026-01-0{i}"),
            baseline_median_s: base,
            variants: vec![fixtures::accepted_variant(speedup)],
            ..fixtures::execution()
        }
    }

    const NOISE: [f64; 8] = [0.0, 0.02, -0.01, 0.01, -0.02, 0.015, -0.005, 0.005];

    /// Eight executions (rows as the store holds them), the baseline 15 % slower from the
    /// fifth on: one change, in the baseline, at 5 (1-based); omp6's speed-up unchanged.
    #[test]
    fn a_baseline_shift_at_the_fifth_of_eight_is_found_at_five() {
        let rows = (0..8)
            .map(|i| {
                let level = if i >= 4 { 1.15 } else { 1.0 };
                execution(
                    i,
                    Some(level * (1.0 + NOISE[i])),
                    1.3 * (1.0 + NOISE[7 - i]),
                )
            })
            .collect();
        let h = history_of(rows);
        assert_eq!(h.series, ["baseline", "omp6"]);
        assert_eq!(h.change_points.len(), 1, "{:?}", h.change_points);
        let c = &h.change_points[0];
        assert_eq!((c.series.as_str(), c.at), ("baseline", 5));
        assert!((c.after / c.before - 1.15).abs() < 0.03, "{c:?}");
    }

    /// A series longer than the search covers says which executions were searched; one
    /// that fits (gaps not counted) says nothing.
    #[test]
    fn a_series_longer_than_the_search_says_what_was_searched() {
        let n = MAX_CHANGE_POINT_SERIES + 3;
        let rows: Vec<Execution> = (0..n).map(|i| execution(i, Some(1.0), 1.3)).collect();
        let note =
            searched_only_in_part("baseline", &series_points("baseline", &rows)).expect("a note");
        assert!(
            note.contains(&format!("newest 500 of {n} values"))
                && note.contains(&format!("(executions 4–{n})")),
            "{note}"
        );
        let with_gaps: Vec<Execution> = (0..n)
            .map(|i| execution(i, (i % 200 != 7).then_some(1.0), 1.3))
            .collect();
        assert_eq!(
            searched_only_in_part("baseline", &series_points("baseline", &with_gaps)),
            None
        );
    }

    /// A damaged row is left out of the history and named; the others are all there.
    #[test]
    fn a_damaged_row_is_left_out_and_named() {
        let damaged = optgate_store::DamagedExperimentRow {
            id: "e-bad".into(),
            name: "demo".into(),
            error: Box::new(optgate_store::StoreError::BadValue {
                path: "/x/optgate.db".into(),
                what: "executions.variants",
                value: "[{".into(),
            }),
        };
        let rows = vec![
            Ok(execution(0, Some(1.0), 1.3)),
            Err(damaged),
            Ok(execution(1, Some(1.0), 1.3)),
        ];
        let h = history_of_rows(rows);
        assert_eq!(h.executions.len(), 2);
        assert_eq!(h.notes.len(), 1, "{:?}", h.notes);
        assert!(
            h.notes[0].contains("execution e-bad left out") && h.notes[0].contains("variants"),
            "{:?}",
            h.notes
        );
    }

    /// Eight stable executions: no change in any series.
    #[test]
    fn eight_stable_executions_have_no_change_point() {
        let rows = (0..8)
            .map(|i| execution(i, Some(1.0 + NOISE[i]), 1.3 * (1.0 + NOISE[7 - i])))
            .collect();
        assert!(history_of(rows).change_points.is_empty());
    }

    /// An execution without a baseline value (a failed one) is left out of that series,
    /// and a change's `at` still names the execution by its place in the whole list.
    #[test]
    fn a_gap_in_a_series_keeps_at_pointing_at_the_execution() {
        let rows = (0..9)
            .map(|i| {
                let level = if i >= 5 { 1.15 } else { 1.0 };
                let base = (i != 2).then(|| level * (1.0 + NOISE[i % 8]));
                execution(i, base, 1.3)
            })
            .collect();
        let h = history_of(rows);
        let at: Vec<(String, usize)> = h
            .change_points
            .iter()
            .map(|c| (c.series.clone(), c.at))
            .collect();
        assert_eq!(at, [("baseline".to_string(), 6)]);
    }
}

//! Recurring re-checks, decided purely: when a recurrence is due ([`due_check`]: once,
//! however many due times passed, the next due time the next multiple of the interval
//! after now), whether an ended execution's decisions flipped against the previous one
//! ([`flips`]: accept ↔ not accept, both ways), the change points of the history first
//! seen at it that also call for a notify ([`change_alerts`]), and the summary the notify
//! command reads on its stdin. The engine applies them (`engine/recurring.rs`); the
//! command itself runs in `notify.rs`.

use std::collections::BTreeMap;

use optgate_client::history::history_of;
use optgate_policy::staged::VariantDecision;
use optgate_stats::Decision;
use optgate_store::Execution;
use serde::{Deserialize, Serialize};

/// What a recurrence's check at time `now` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Not before `at` (seconds since 1970).
    NotYet { at: i64 },
    /// Due, but its latest execution has not ended: submitted once that one has (a
    /// recurrence never overlaps itself).
    Waiting,
    /// Submit one execution now; the next is due at `next_due`.
    Submit { next_due: i64 },
}

/// The due check of a recurrence whose due times are `anchor + k × interval` (seconds),
/// next due at `next_due`, at time `now`, its latest execution still running or not.
///
/// The rule: due when `now ≥ next_due` and the latest execution has ended; then exactly
/// one execution is submitted, and the next due time is the first `anchor + k × interval`
/// after `now`. A daemon that was down over several due times (or an execution that ran
/// past them) therefore runs one catch-up execution, never one per missed interval, and
/// the schedule keeps its phase (a weekly re-check stays on its weekday and hour).
pub fn due_check(anchor: i64, interval: u64, next_due: i64, now: i64, running: bool) -> Due {
    if now < next_due {
        return Due::NotYet { at: next_due };
    }
    if running {
        return Due::Waiting;
    }
    Due::Submit {
        next_due: next_multiple_after(anchor, interval, now),
    }
}

/// The first `anchor + k × interval` (k ≥ 1) strictly after `now`.
pub fn next_multiple_after(anchor: i64, interval: u64, now: i64) -> i64 {
    let interval = interval.max(1) as i64;
    let k = if now < anchor {
        1
    } else {
        (now - anchor) / interval + 1
    };
    anchor.saturating_add(k.saturating_mul(interval))
}

/// A variant whose decision went from or to `accept` between two executions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flip {
    pub variant: String,
    pub before: Decision,
    pub after: Decision,
}

/// The variants decided `accept` in one execution and something else in the other (either
/// way: a claim gone stale, or a proposal that now pays), in the order of `after`. A
/// variant absent from either execution is not compared; reject ↔ inconclusive is no flip.
pub fn flips(before: &[VariantDecision], after: &[VariantDecision]) -> Vec<Flip> {
    let was: BTreeMap<&str, Decision> = before
        .iter()
        .map(|d| (d.variant.as_str(), d.decision))
        .collect();
    after
        .iter()
        .filter_map(|d| {
            let b = *was.get(d.variant.as_str())?;
            ((b == Decision::Accept) != (d.decision == Decision::Accept)).then(|| Flip {
                variant: d.variant.clone(),
                before: b,
                after: d.decision,
            })
        })
        .collect()
}

/// A change point found in the experiment's history, as `history --json` gives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alert {
    /// The baseline, or a variant.
    pub series: String,
    /// The 1-based index of the first execution at the new level.
    pub at: u32,
    pub before: f64,
    pub after: f64,
    pub p: f64,
}

/// How far (in executions) a change point may move, as executions join the history,
/// and still be the change already alerted: the best split of a step can shift by one as
/// the segments around it grow, and that is no second change.
pub const SAME_CHANGE_WITHIN: usize = 1;

/// The change points first seen at execution `latest`, each a reason to notify:
/// `executions` is the experiment's history (oldest first, as `optgate history` lists it,
/// `optgate_client::history::history_of`'s test), and the rule is that a change point of
/// the history up to and including `latest` alerts when the history up to the execution
/// before it had no change point in the same series within [`SAME_CHANGE_WITHIN`]
/// executions of it.
///
/// A change is therefore alerted once, by the execution that makes it detectable — not
/// necessarily the first at the new level: E-Divisive needs
/// `change_points::MIN_SEGMENT` executions on each side of a split and a permutation
/// p-value under α, so a 15 % step at the 5th of eight clean executions is first seen at
/// the 8th (4 | 4, exact p = 2/70), at 6 and 7 its p cannot get under 0.05. Pure (the
/// same rows give the same alerts, so a restart re-judging an execution alerts the same);
/// `latest` absent from `executions` (its row not written) gives none. A change whose
/// p hovers at α may be lost and seen again, and then alerts again.
pub fn change_alerts(executions: &[Execution], latest: &str) -> Vec<Alert> {
    let Some(end) = executions.iter().position(|e| e.id == latest) else {
        return Vec::new();
    };
    let now = history_of(executions[..=end].to_vec()).change_points;
    let before = history_of(executions[..end].to_vec()).change_points;
    now.into_iter()
        .filter(|c| {
            !before
                .iter()
                .any(|b| b.series == c.series && b.at.abs_diff(c.at) <= SAME_CHANGE_WITHIN)
        })
        .map(|c| Alert {
            series: c.series,
            at: u32::try_from(c.at).unwrap_or(u32::MAX),
            before: c.before,
            after: c.after,
            p: c.p,
        })
        .collect()
}

/// One execution as the summary names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutionSummary {
    pub id: String,
    pub state: optgate_store::ExperimentState,
    /// Each variant's decision at the execution's latest look.
    pub decisions: BTreeMap<String, Decision>,
}

impl ExecutionSummary {
    pub fn new(
        id: &str,
        state: optgate_store::ExperimentState,
        decisions: &[VariantDecision],
    ) -> ExecutionSummary {
        ExecutionSummary {
            id: id.to_string(),
            state,
            decisions: decisions
                .iter()
                .map(|d| (d.variant.clone(), d.decision))
                .collect(),
        }
    }
}

/// What the notify command reads on its stdin (one JSON object), and `status` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotifySummary {
    /// The recurrence, `R<n>`.
    pub recurrence: String,
    /// The experiment's name.
    pub experiment: String,
    /// One sentence: what changed.
    pub reason: String,
    pub previous: ExecutionSummary,
    pub latest: ExecutionSummary,
    pub flips: Vec<Flip>,
    pub change_points: Vec<Alert>,
}

/// The summary of an ended execution against the previous one, when something calls for
/// a notify (a flip or a change point); `None` otherwise.
pub fn summary(
    recurrence: &str,
    experiment: &str,
    previous: ExecutionSummary,
    latest: ExecutionSummary,
    flips: Vec<Flip>,
    change_points: Vec<Alert>,
) -> Option<NotifySummary> {
    if flips.is_empty() && change_points.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = flips
        .iter()
        .map(|f| format!("{}: {} → {}", f.variant, f.before, f.after))
        .collect();
    parts.extend(change_points.iter().map(|c| {
        format!(
            "{}: change point at execution {} (p = {})",
            c.series, c.at, c.p
        )
    }));
    Some(NotifySummary {
        recurrence: recurrence.to_string(),
        experiment: experiment.to_string(),
        reason: format!(
            "{} against execution {}: {}",
            latest.id,
            previous.id,
            parts.join("; ")
        ),
        previous,
        latest,
        flips,
        change_points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: u64 = 3600;

    /// On time: one execution, the next due one interval on. Before it: not yet.
    #[test]
    fn a_recurrence_is_due_at_each_multiple_of_its_interval() {
        let anchor = 1_000_000;
        let due = anchor + H as i64;
        assert_eq!(
            due_check(anchor, H, due, due - 1, false),
            Due::NotYet { at: due }
        );
        assert_eq!(
            due_check(anchor, H, due, due, false),
            Due::Submit {
                next_due: due + H as i64
            }
        );
    }

    /// Down over several due times: one catch-up execution, then the next multiple after
    /// now — never a due time already past (which would submit again at once, once per
    /// missed interval). Planted bug caught: `next_due + interval`.
    #[test]
    fn a_daemon_down_over_several_due_times_runs_once_then_keeps_the_phase() {
        let anchor = 1_000_000;
        let due = anchor + H as i64;
        let back = due + 3 * H as i64 + 17; // three due times missed, and 17 s
        let Due::Submit { next_due } = due_check(anchor, H, due, back, false) else {
            panic!("due")
        };
        assert_eq!(next_due, anchor + 5 * H as i64);
        assert!(next_due > back);
        assert_eq!(
            due_check(anchor, H, next_due, back + 1, false),
            Due::NotYet { at: next_due }
        );
    }

    /// Due while its latest execution runs: it waits for it, then runs once.
    #[test]
    fn a_recurrence_never_overlaps_its_own_execution() {
        let anchor = 0;
        assert_eq!(due_check(anchor, 10, 10, 25, true), Due::Waiting);
        assert_eq!(
            due_check(anchor, 10, 10, 25, false),
            Due::Submit { next_due: 30 }
        );
        // Exactly on a multiple: the next one, not now again.
        assert_eq!(next_multiple_after(0, 10, 30), 40);
        // A clock set back before the anchor: the first due time.
        assert_eq!(next_multiple_after(100, 10, 50), 110);
    }

    fn d(variant: &str, decision: Decision) -> VariantDecision {
        VariantDecision {
            variant: variant.into(),
            decision,
            reason: String::new(),
            stop: None,
            blocks: None,
            retired: false,
        }
    }

    /// accept → not accept and not accept → accept are flips; reject ↔ inconclusive and a
    /// variant in one execution only are not.
    #[test]
    fn flips_are_changes_to_and_from_accept() {
        use Decision::*;
        let before = [
            d("a", Accept),
            d("b", Reject),
            d("c", Reject),
            d("e", Accept),
            d("gone", Accept),
        ];
        let after = [
            d("a", Inconclusive),
            d("b", Accept),
            d("c", Inconclusive),
            d("e", Accept),
            d("new", Reject),
        ];
        let f = flips(&before, &after);
        let names: Vec<&str> = f.iter().map(|f| f.variant.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!((f[0].before, f[0].after), (Accept, Inconclusive));
        assert!(flips(&before, &before).is_empty());
    }

    #[test]
    fn a_summary_is_made_only_when_something_changed_and_says_what() {
        use optgate_store::ExperimentState::Decided;
        let p = ExecutionSummary::new("e1", Decided, &[d("omp", Decision::Accept)]);
        let l = ExecutionSummary::new("e2", Decided, &[d("omp", Decision::Reject)]);
        assert!(summary("R1", "x", p.clone(), l.clone(), vec![], vec![]).is_none());
        let f = flips(&[d("omp", Decision::Accept)], &[d("omp", Decision::Reject)]);
        let s = summary("R1", "x", p, l, f, change_alerts(&[], "e2")).unwrap();
        assert_eq!(s.reason, "e2 against execution e1: omp: accept → reject");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["previous"]["decisions"]["omp"], "accept");
        assert_eq!(json["latest"]["id"], "e2");
    }

    /// An execution row: the baseline at `base` seconds, omp6's speed-up 1.3 (with noise).
    fn row(i: usize, base: f64) -> Execution {
        use optgate_store::fixtures;
        Execution {
            id: format!("e{}", i + 1),
            started_at: format!("2026-01-{:02}T00:00:00Z", i + 1),
            baseline_median_s: Some(base),
            variants: vec![fixtures::accepted_variant(
                1.3 * (1.0 + NOISE[(NOISE.len() - 1 - i % 8) % 8]),
            )],
            ..fixtures::execution()
        }
    }

    const NOISE: [f64; 8] = [0.0, 0.02, -0.01, 0.01, -0.02, 0.015, -0.005, 0.005];

    /// Records executions one by one through the store, as the engine's pass does, and
    /// after each asks which change points are first seen at it: `(execution, alerts)`.
    fn alerts_as_executions_end(levels: &[f64]) -> Vec<(usize, Vec<Alert>)> {
        let dir = tempfile::tempdir().unwrap();
        let mut store = optgate_store::Store::open(&dir.path().join("state.db")).unwrap();
        let mut seen = Vec::new();
        for (i, level) in levels.iter().enumerate() {
            store
                .record_execution(&row(i, level * (1.0 + NOISE[i % 8])))
                .unwrap();
            let rows = store.executions_by_name("demo").unwrap();
            let latest = format!("e{}", i + 1);
            let alerts = change_alerts(&rows, &latest);
            // Judged again (a restart before the judgement was committed): the same.
            assert_eq!(change_alerts(&rows, &latest), alerts);
            if !alerts.is_empty() {
                seen.push((i + 1, alerts));
            }
        }
        seen
    }

    /// Eight executions, the baseline 15 % slower from the fifth on: one alert, in the
    /// baseline, at 5 — raised by the 8th execution, the first at which E-Divisive can see
    /// it (two executions at the new level are the minimum segment, but with 6 or 7 the
    /// permutation p cannot get under 0.05). Two more executions at the new level raise
    /// nothing more (the same change, though at the 10th its best split moves to 6). Planted
    /// bugs caught: `SAME_CHANGE_WITHIN` 0 (a second alert at 10), alerting every change point of
    /// the history (alerts at 9 and 10 too), or comparing with the whole history instead of
    /// the one before `latest` (no alert at all).
    #[test]
    fn a_baseline_shift_is_alerted_once_when_it_becomes_detectable() {
        let levels: Vec<f64> = (0..10).map(|i| if i >= 4 { 1.15 } else { 1.0 }).collect();
        let seen = alerts_as_executions_end(&levels);
        assert_eq!(seen.len(), 1, "{seen:?}");
        let (when, alerts) = &seen[0];
        assert_eq!(*when, 8, "{seen:?}");
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        assert_eq!((alerts[0].series.as_str(), alerts[0].at), ("baseline", 5));
        assert!(alerts[0].p < 0.05 && alerts[0].after > alerts[0].before);
    }

    /// Ten stable executions: no alert at any of them; an id the history lacks: none.
    #[test]
    fn a_stable_history_raises_no_alert() {
        assert!(alerts_as_executions_end(&[1.0; 10]).is_empty());
        assert!(change_alerts(&[row(0, 1.0)], "not-there").is_empty());
    }
}

//! Recurring re-checks, decided purely: when a recurrence is due ([`due_check`]: once,
//! however many due times passed, the next due time the next multiple of the interval
//! after now), whether an ended execution's decisions flipped against the previous one
//! ([`flips`]: accept ↔ not accept, both ways), the change points that also call for a
//! notify ([`change_alerts`], wired to the history at merge), and the summary the notify
//! command reads on its stdin. The engine applies them (`engine/recurring.rs`); the
//! command itself runs in `notify.rs`.

use std::collections::BTreeMap;

use optgate_policy::staged::VariantDecision;
use optgate_stats::Decision;
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

/// The change points of experiment `name`'s history that end at execution `latest` (a
/// change first seen now), each a reason to notify.
///
/// Returns none for now: this is where the history's change points (the `executions`
/// table and its change-point test in `optgate-stats`, built beside this) are wired in at
/// merge. No test of its own is invented here.
pub fn change_alerts(name: &str, latest: &str) -> Vec<Alert> {
    let _ = (name, latest);
    Vec::new()
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

/// `R<n>`: how a recurrence is named to users (`optgate cancel R3`).
pub fn recurrence_name(id: i64) -> String {
    format!("R{id}")
}

/// The number of a recurrence name `R<n>` (or `r<n>`); `None` for anything else
/// (experiment ids start with a digit).
pub fn parse_recurrence_name(s: &str) -> Option<i64> {
    let digits = s.strip_prefix(['R', 'r'])?;
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n > 0)
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
        let s = summary("R1", "x", p, l, f, change_alerts("x", "e2")).unwrap();
        assert_eq!(s.reason, "e2 against execution e1: omp: accept → reject");
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["previous"]["decisions"]["omp"], "accept");
        assert_eq!(json["latest"]["id"], "e2");
    }

    #[test]
    fn recurrence_names_round_trip_and_experiment_ids_are_not_names() {
        assert_eq!(recurrence_name(3), "R3");
        assert_eq!(parse_recurrence_name("R3"), Some(3));
        assert_eq!(parse_recurrence_name("r12"), Some(12));
        for no in [
            "R",
            "R0",
            "R-1",
            "R1x",
            "20261202-041500-ab12",
            "X1",
            "R99999999999999999999",
        ] {
            assert_eq!(parse_recurrence_name(no), None, "{no}");
        }
    }
}

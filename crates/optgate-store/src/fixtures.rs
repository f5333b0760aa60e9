//! The one fixture of an execution row and of a variant's outcome in it, for the tests of
//! this crate and of those above it (feature `fixtures`): each test changes only the fields
//! it is about (`Execution { id: …, ..fixtures::execution() }`). Never in the product.

use crate::{
    BuildIdentity, Execution, ExecutionKind, ExperimentState, SchedulerKind, VariantOutcome,
};

/// A decided local daemon execution of "demo": 6 of 6 runs, one look, the baseline at
/// 1.0 s, no variants, empty hashes, roots and end time.
pub fn execution() -> Execution {
    Execution {
        id: "e1".into(),
        name: "demo".into(),
        kind: ExecutionKind::Daemon,
        scheduler: SchedulerKind::Local,
        state: ExperimentState::Decided,
        state_reason: None,
        source_path: "/w/exp.yaml".into(),
        source_sha256: String::new(),
        root: String::new(),
        build: BuildIdentity::default(),
        nodes: Vec::new(),
        started_at: "2026-01-01T00:00:00Z".into(),
        ended_at: String::new(),
        runs_completed: 6,
        runs_total: 6,
        looks: 1,
        baseline: Some("baseline".into()),
        baseline_median_s: Some(1.0),
        variants: Vec::new(),
    }
}

/// Variant `omp6` accepted at `speedup`, with no reason, intervals or System Impact.
pub fn accepted_variant(speedup: f64) -> VariantOutcome {
    VariantOutcome {
        variant: "omp6".into(),
        decision: optgate_stats::Decision::Accept,
        reason: String::new(),
        speedup: Some(speedup),
        speedup_ci_low: None,
        speedup_ci_high: None,
        system_impact_pct: None,
        system_impact_ci_low: None,
        system_impact_ci_high: None,
    }
}

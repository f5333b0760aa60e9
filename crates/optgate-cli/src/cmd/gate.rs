//! `optgate gate ID [--variant NAME]`: the decision as an exit status, for pipelines.
//! 0 accepted, 1 rejected, 2 inconclusive, not applicable or still running, ≥ 3 error
//! (failed or cancelled experiment, unknown id, no daemon). Without `--variant`, every
//! variant counts: 1 if any was rejected, else 2 if any is not accepted, else 0.

use anyhow::Result;
use optgate_client::protocol::{Decision, ExperimentState};

use crate::exit;

pub fn gate(id: &str, variant: Option<&str>) -> Result<i32> {
    let reply = super::status::fetch(Some(id), None)?;
    let Some(e) = reply.experiments.into_iter().next() else {
        // A row the daemon cannot read is named as such, not as an unknown id.
        let why = match reply.damaged.iter().find(|d| d.id == id) {
            Some(d) => format!(
                "experiment `{id}` ({}) is damaged in the database: {}",
                d.name, d.problem
            ),
            None => format!("no experiment `{id}`; `optgate status` lists them"),
        };
        return Err(exit::with_code(exit::FAILED, anyhow::anyhow!(why)));
    };
    // A misspelt variant is an error now, not "still running" until the end: a pipeline
    // that waits while gate says 2 would wait forever.
    if let Some(name) = variant {
        check_variant_exists(id, name, &e)?;
    }
    match e.state {
        ExperimentState::Decided | ExperimentState::BudgetExhausted => {}
        ExperimentState::Cancelled => {
            return Err(exit::with_code(
                exit::FAILED,
                anyhow::anyhow!("experiment {id} was cancelled; it has no decision to gate on"),
            ));
        }
        ExperimentState::Failed => {
            return Err(exit::with_code(
                exit::FAILED,
                anyhow::anyhow!(
                    "experiment {id} failed: {}",
                    e.reason.as_deref().unwrap_or("see `optgate status {id}`")
                ),
            ));
        }
        state => {
            outln!(
                "{id}: still {state} ({} of {} runs done)",
                e.runs.done,
                e.runs.total
            );
            return Ok(exit::INVALID_INPUT);
        }
    }
    let decisions: Vec<_> = match variant {
        None => e.decisions.iter().collect(),
        Some(name) => {
            let found: Vec<_> = e.decisions.iter().filter(|d| d.variant == name).collect();
            found
        }
    };
    for d in &decisions {
        outln!("{}: {} — {}", d.variant, d.decision, d.reason);
    }
    // A variant whose app failed in every run: the work failed (3), before any rejection.
    Ok(
        if decisions.iter().any(|d| d.decision == Decision::Failed) {
            exit::FAILED
        } else if decisions.iter().any(|d| d.decision == Decision::Reject) {
            exit::REJECTED
        } else if decisions.iter().all(|d| d.decision == Decision::Accept) {
            exit::OK
        } else {
            exit::INVALID_INPUT
        },
    )
}

/// Fails with exit 3 (like an unknown id) when the experiment has no variant `name`. The
/// names come from the experiment's own copy of its file (known before the first look),
/// else from the decisions.
fn check_variant_exists(
    id: &str,
    name: &str,
    e: &optgate_client::protocol::ExperimentStatus,
) -> Result<()> {
    let copy =
        optgate_evidence::layout::Layout::new(std::path::PathBuf::from(&e.root)).experiment_copy();
    let mut names: Vec<String> = match optgate_experiment::load(&copy) {
        Ok(loaded) => loaded
            .experiment
            .arms
            .iter()
            .filter(|a| a.role == optgate_experiment::ArmRole::Variant)
            .map(|a| a.name.clone())
            .collect(),
        Err(_) => Vec::new(),
    };
    if names.is_empty() {
        names = e.decisions.iter().map(|d| d.variant.clone()).collect();
    }
    if names.is_empty() || names.iter().any(|n| n == name) {
        return Ok(());
    }
    Err(exit::with_code(
        exit::FAILED,
        anyhow::anyhow!(
            "experiment {id} has no variant `{name}`; its variants are: {}",
            names.join(", ")
        ),
    ))
}

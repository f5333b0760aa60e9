//! `optgate gate ID [--variant NAME]`: the decision as an exit status, for pipelines.
//! 0 accepted, 1 rejected, 2 inconclusive, not applicable or still running, ≥ 3 error
//! (failed or cancelled experiment, unknown id, no daemon). Without `--variant`, every
//! variant counts: 1 if any was rejected, else 2 if any is not accepted, else 0.

use anyhow::Result;

use crate::exit;

pub fn gate(id: &str, variant: Option<&str>) -> Result<i32> {
    let reply = super::status::fetch(Some(id))?;
    let Some(e) = reply.experiments.into_iter().next() else {
        return Err(exit::with_code(
            exit::FAILED,
            anyhow::anyhow!("no experiment `{id}`; `optgate status` lists them"),
        ));
    };
    match e.state.as_str() {
        "decided" | "budget_exhausted" => {}
        "cancelled" => {
            return Err(exit::with_code(
                exit::FAILED,
                anyhow::anyhow!("experiment {id} was cancelled; it has no decision to gate on"),
            ));
        }
        "failed" => {
            return Err(exit::with_code(
                exit::FAILED,
                anyhow::anyhow!(
                    "experiment {id} failed: {}",
                    e.reason.as_deref().unwrap_or("see `optgate status {id}`")
                ),
            ));
        }
        state => {
            println!(
                "{id}: still {state} ({} of {} runs done)",
                e.runs.done, e.runs.total
            );
            return Ok(exit::INVALID_INPUT);
        }
    }
    let decisions: Vec<_> = match variant {
        None => e.decisions.iter().collect(),
        Some(name) => {
            let found: Vec<_> = e.decisions.iter().filter(|d| d.variant == name).collect();
            if found.is_empty() {
                let names: Vec<&str> = e.decisions.iter().map(|d| d.variant.as_str()).collect();
                return Err(exit::with_code(
                    exit::INVALID_INPUT,
                    anyhow::anyhow!(
                        "experiment {id} has no variant `{name}`; its variants are: {}",
                        names.join(", ")
                    ),
                ));
            }
            found
        }
    };
    for d in &decisions {
        println!("{}: {} — {}", d.variant, d.decision, d.reason);
    }
    Ok(if decisions.iter().any(|d| d.decision == "reject") {
        exit::REJECTED
    } else if decisions.iter().all(|d| d.decision == "accept") {
        exit::OK
    } else {
        exit::INVALID_INPUT
    })
}

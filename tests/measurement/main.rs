//! Tests that measure the machine (a real OpenMP baseline, other work on the node):
//! each takes the machine alone (support::measuring).

#[path = "../support/mod.rs"]
mod support;

mod interference;
mod propose;
#[cfg(feature = "cluster")]
mod propose_flux;
#[cfg(feature = "cluster")]
mod utilisation_flux;

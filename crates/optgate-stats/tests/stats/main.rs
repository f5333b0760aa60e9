//! optgate-stats's integration tests, one module per area.

mod app_impact_interval;
mod change_point_rates;
mod change_point_reference;
mod decisions;
mod figures_of_merit;
mod futility;
mod mutant_kills;
mod scipy_reference;
mod simulation;
mod staged;

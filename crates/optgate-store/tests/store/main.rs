//! optgate-store's integration tests, one module per area.

mod counts;
mod executions;
mod queries;
mod recurrences;
mod store;
mod stored_counts;

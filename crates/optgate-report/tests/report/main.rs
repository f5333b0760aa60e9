//! optgate-report's integration tests, one module per area.

#[path = "../common/mod.rs"]
#[allow(dead_code)]
mod common;
#[path = "../inert/mod.rs"]
#[allow(dead_code)]
mod inert;

mod hostile_formats;
mod report_output;
mod samples_errors;
mod samples_grouping;
#[cfg(feature = "cluster")]
mod shared_formats;

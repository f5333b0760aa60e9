//! optgate-evidence's integration tests, one module per area.

mod samples_report;

//! optgate-wrapper's integration tests, one module per area.

mod step_governor;

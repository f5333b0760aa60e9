//! optgate-sched's integration tests, one module per area.

mod render_parse;

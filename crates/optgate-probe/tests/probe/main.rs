//! optgate-probe's integration tests, one module per area.

#[path = "../common/mod.rs"]
mod common;

mod fixtures;
mod governor;
mod live;
mod schema;

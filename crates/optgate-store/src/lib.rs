//! optgate-store: the daemon's state in SQLite — experiments, their blocks and runs, the
//! scheduler jobs submitted for them, the looks taken, and the history of executions — in WAL mode, versioned with
//! `PRAGMA user_version` and append-only migrations.
//!
//! Invariants: every write is one transaction (a crash or a full disk never leaves half a
//! change); a database from a newer optgate is refused untouched; this crate does no
//! async and spawns nothing — the daemon calls it from blocking tasks.

pub mod campaigns;
pub mod error;
mod executions;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
pub mod migrations;
pub mod model;
mod store;

pub use campaigns::{CampaignRow, CampaignState, NewCampaign};
pub use error::StoreError;
pub use executions::{BuildIdentity, EachExecution, Execution, ExecutionKind, VariantOutcome};
pub use migrations::LATEST as SCHEMA_VERSION;
pub use model::*;
pub use store::{BUSY_TIMEOUT, Store};

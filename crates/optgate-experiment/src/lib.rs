//! The experiment file: its model, its parsing with located diagnostics, the validation
//! that returns every problem at once, and the run plan (blocks in a seeded random order).
//!
//! This crate does no process spawning and no scheduler work; it reads the experiment file
//! (in [`load`]) and nothing else.

pub mod campaign;
pub mod checklist;
pub mod diagnostic;
pub mod expect;
pub mod limits;
pub mod load;
pub mod model;
pub mod plan;
pub mod read;
pub mod recheck;
pub mod resolved;
pub mod yaml;

pub use diagnostic::{Diagnostic, Severity};
pub use expect::{ExpectCheck, ExpectPlace, Expected};
pub use limits::{MAX_REPLICATES, MAX_RUNS, MAX_TIME_LIMIT, MAX_VARIANTS};
pub use load::{
    DurationError, LoadError, Loaded, is_env_name, is_safe_name, load, load_str, parse_duration,
    smallest_deciding_replicates, smallest_reachable_p,
};
pub use model::*;
pub use plan::{Plan, PlannedBlock, PlannedRun};
pub use recheck::{IntervalError, Recheck, format_interval, parse_interval};
pub use resolved::*;

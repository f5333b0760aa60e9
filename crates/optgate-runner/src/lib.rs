//! Drives an experiment: the run-directory layout, builds, runs through the local backend,
//! and the collection of samples, failures and correctness evidence from what runs left on
//! disk. `optgate run` and the daemon share this code.

pub mod analysis;
pub mod collect;
pub mod drive;
pub mod failfast;
pub mod jobs;
pub mod layout;
pub mod preflight;
pub mod report;

pub use collect::{Collected, RunResult, RunStatus, collect};
pub use drive::{DriveError, Event};
pub use layout::Layout;

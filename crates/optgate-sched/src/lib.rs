//! Scheduler backends and everything that turns a planned run into a finished one: shell
//! quoting, script rendering (pure), the per-run manifest, the process runner, and the
//! local executor.
//!
//! Invariant: nothing here touches the daemon's database; backends report what happened
//! through return values and the run manifests on disk.

pub mod backend;
pub mod batch;
pub mod claim;
pub mod command;
pub mod energy;
pub mod factory;
pub mod flux;
pub mod isolation;
pub mod local;
pub mod local_backend;
pub mod manifest;
pub mod poll;
pub mod process;
pub mod script;
pub mod shell;
pub mod signal;
pub mod slurm;

pub use backend::{FailureClass, JobId, JobRun, JobSpec, JobState, SchedError, Scheduler};
pub use manifest::{Outcome, RunManifest};

//! The login side of running: shell quoting, script rendering (pure), a run's files and
//! builds (`prepare`), and the scheduler backends. The run wrapper itself — what executes a
//! run on a compute node and writes its manifest — is `optgate-wrapper`.
//!
//! Invariant: nothing here touches the daemon's database; backends report what happened
//! through return values and the run manifests on disk.

pub mod backend;
pub mod batch;
pub mod batch_client;
pub mod command;
pub mod directive;
pub mod factory;
pub mod flux;
pub mod local_backend;
pub mod lookup;
pub mod poll;
pub mod prepare;
pub mod script;
pub mod shell;
pub mod slurm;

pub use backend::{FailureClass, JobId, JobRun, JobSpec, JobState, SchedError, Scheduler};

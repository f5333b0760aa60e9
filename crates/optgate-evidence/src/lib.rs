//! What the engine needs to work on an experiment's files: the run-directory layout and
//! its root, job specs per block, the collection of samples, failures and correctness
//! evidence from what runs left on disk, fail fast, pre-flight checks and the report.

pub mod analysis;
pub mod collect;
pub mod correctness;
pub mod epoch_labels;
pub mod failfast;
pub mod gather;
pub mod jobs;
pub mod layout;
pub mod loaded;
pub mod node_checks;
pub mod output_check;
pub mod preflight;
pub mod provenance;
pub mod report;
pub mod root;
mod source;

pub use collect::{Collected, RunResult, RunStatus};
pub use gather::collect;
pub use layout::Layout;

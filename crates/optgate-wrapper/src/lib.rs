//! The run wrapper, the compute-node side of optgate: executes one prepared run (`run.json`
//! and `run.sh`, written on the login node) in its own process group, with its isolation,
//! governor and energy readings, and writes its manifest. Knows nothing of the experiment
//! file: the login side (`optgate-sched`) renders the plain run spec it reads.

pub mod claim;
pub mod energy;
pub mod files;
pub mod isolation;
pub mod job_env;
pub mod manifest;
pub mod nodes;
pub mod process;
pub mod resources;
pub mod run;
pub mod signal;
pub mod step;
pub mod step_governor;
pub mod task_step;
pub mod tasks;
pub mod threads;
pub mod untrusted;

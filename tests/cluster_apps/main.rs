//! The cluster tier's real apps and tools: HPC Challenge, LAMMPS, Chromium and xmllint,
//! a full tmpfs, optgate step under both schedulers.

#[path = "../campaigns/common.rs"]
#[allow(dead_code)]
mod campaign_common;
#[path = "../support/mod.rs"]
mod support;

mod full_disk;
mod hpcc;
mod lammps;
mod shared_reports;
mod step_wrapper;

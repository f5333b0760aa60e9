//! The cluster tier on the real Slurm clusters of schedulers/slurm/setup.sh: the
//! backend, two nodes, the daemon.

#[path = "../support/mod.rs"]
mod support;

mod backend;
mod daemon;
mod multinode;

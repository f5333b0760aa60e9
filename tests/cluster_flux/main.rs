//! The cluster tier on the real Flux of schedulers/flux/setup-one-node.sh: the backend,
//! four brokers, governors.

#[path = "../support/mod.rs"]
mod support;

mod backend;
mod governor;
mod multinode;

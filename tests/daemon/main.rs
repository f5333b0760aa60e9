//! The daemon through the real binary: its commands, kill -9 at any moment, its limits,
//! staged designs, interrupts, recurrences.

#[path = "../support/mod.rs"]
mod support;

mod cli;
mod crash;
mod interrupt;
mod limits;
mod recurring;
mod staged;

// These tests mostly wait on the daemons they start:
// [`support::WAITING_TESTS_PER_CPU`] run at once.
support::waiting_tests_at_once!();

//! Bad and hostile input through the real binary: experiment files, values that reach a
//! shell, pre-flight, the fuzzers' regressions, run directories and outputs an app
//! leaves.

#[path = "../support/mod.rs"]
mod support;

mod bad_input;
mod fuzz_regressions;
mod hostile_experiment;
mod hostile_outputs;
mod hostile_values;
mod preflight;

// These tests mostly wait on the daemons and runs they start:
// [`support::WAITING_TESTS_PER_CPU`] run at once.
support::waiting_tests_at_once!();

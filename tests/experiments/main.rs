//! Local experiments end to end through the real binary: designs, epochs, progress,
//! reports, verdicts, figures of merit, history, resources, rendered scripts.

#[path = "../support/mod.rs"]
mod support;

mod decisions;
mod epochs_as_printed;
mod figures_of_merit;
mod history;
mod plan_scripts;
mod progress;
mod quickstart;
mod report_features;
mod resources;
mod verdict_words;

// These tests mostly wait on the runs they start (apps that sleep, recurrences):
// [`support::WAITING_TESTS_PER_CPU`] run at once.
support::waiting_tests_at_once!();

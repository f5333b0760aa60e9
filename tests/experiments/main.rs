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

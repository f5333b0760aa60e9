//! Errors of the statistics crate: bad configuration or data that cannot be analysed.
//! Each names the arm and the replicate (or block) so that the caller can point at it.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum StatsError {
    #[error("invalid analysis setting: {0}")]
    InvalidConfig(String),

    #[error(
        "arm '{arm}', replicate {replicate}, epoch {epoch}: value {value} is not a positive finite number"
    )]
    InvalidValue {
        arm: String,
        replicate: u32,
        epoch: u32,
        value: f64,
    },

    #[error("arm '{arm}', replicate {replicate}: epoch 0 does not exist (epochs are 1-based)")]
    EpochZero { arm: String, replicate: u32 },

    #[error("arm '{arm}', replicate {replicate}: the run has no epochs")]
    EmptyRun { arm: String, replicate: u32 },

    #[error(
        "arm name '{0}' is used twice (variant names must differ from each other and from the baseline)"
    )]
    DuplicateArm(String),

    #[error("arm '{arm}': {key} appears in more than one run, so paired runs cannot be matched")]
    DuplicatePairKey { arm: String, key: String },

    #[error("arm '{arm}': some runs have a block and some do not (replicate {replicate} has none)")]
    MixedBlocks { arm: String, replicate: u32 },

    #[error(
        "arm '{arm}': {count} system metric values for {runs} runs (expected one per replicate, or none)"
    )]
    SystemMetricCount {
        arm: String,
        count: usize,
        runs: usize,
    },

    #[error("arm '{arm}': system metric value {value} is not a positive finite number")]
    InvalidSystemMetric { arm: String, value: f64 },
}

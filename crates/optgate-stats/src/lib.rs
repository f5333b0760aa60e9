//! optgate-stats: the statistics of the gate, exactly as STATISTICS.md writes them down.
//! Pure functions over in-memory data: this crate does no I/O and prints nothing.
//!
//! Entry point: [`analyze`] (and [`analyze_sequential`] for the daemon's repeated looks).
//! The building blocks (rank tests, Hodges–Lehmann estimates, Holm, Mann–Kendall, the
//! alpha-spending rule, the staged stopping rule of [`stopping`]) are public so that they can be tested against SciPy directly.

pub mod analysis;
pub mod change_points;
pub mod error;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod fmt;
pub mod guardrail;
pub mod holm;
pub mod htest;
pub mod mann_whitney;
pub mod memo;
pub mod model;
pub mod normal;
pub mod operating;
mod rank;
pub mod sequential;
pub mod signed_rank;
pub mod stopping;
pub mod trend;

pub use analysis::{
    Analysis, Decision, EpochRow, FirstEpoch, MIN_REPLICATES, Method, OutputCheck, OutputCheckKind,
    SequentialLook, SpeedUp, VariantAnalysis, WithoutLoadedBlocks, analyze, analyze_at_look,
    analyze_in_family, analyze_sequential, fmt_p, fmt_signed_pct,
};
pub use change_points::{ChangePoint, ChangePointConfig, change_points, energy_statistic};
pub use error::StatsError;
pub use guardrail::{GuardrailResult, oriented_change_pct};
pub use htest::{Alternative, PMethod, RankTest, ShiftEstimate};
pub use mann_whitney::{hodges_lehmann_shift, mann_whitney_u};
pub use model::{AnalysisConfig, ArmData, Better, Design, EpochWindow, GuardrailSpec, RunSamples};
pub use operating::{OcPoint, OperatingCharacteristics};
pub use sequential::{SequentialPlan, Spending, obf_spending, sequential_alpha};
pub use signed_rank::{hodges_lehmann_paired, wilcoxon_signed_rank};
pub use stopping::{StagedLook, StagedPlan, Stop, Verdict, analyze_staged};

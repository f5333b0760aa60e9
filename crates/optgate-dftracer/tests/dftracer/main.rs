//! optgate-dftracer's integration tests, one module per area.

mod caps;
mod damaged;
mod fast_agrees;
mod fixtures;
mod parsers_agree;
#[cfg(feature = "cluster")]
mod python_trace;
mod serde_oracle;

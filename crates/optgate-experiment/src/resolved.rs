//! The experiment after validation: arms with their effective environment, launcher
//! resources and build, ready for planning and rendering. Built only by `load`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::model::{BuildSpec, CommandSpec, ExperimentFile};

/// The name of the baseline arm and of the optional A/A control arm.
pub const BASELINE: &str = "baseline";
pub const AA_CONTROL: &str = "aa-control";

#[derive(Debug, Clone, Serialize)]
pub struct Experiment {
    /// Absolute path of the experiment file.
    pub source: PathBuf,
    /// SHA-256 of the file's bytes, for provenance.
    pub source_sha256: String,
    /// The file's text, kept so a run directory can hold an exact copy.
    #[serde(skip)]
    pub source_text: String,
    pub file: ExperimentFile,
    /// Absolute working directory of the runs.
    pub workdir: PathBuf,
    /// Baseline first, then the A/A control if asked for, then variants in file order.
    pub arms: Vec<Arm>,
    /// Distinct builds; arms point into this list.
    pub builds: Vec<Build>,
    pub run_time_limit: Option<Duration>,
    pub allocation_time_limit: Option<Duration>,
    pub steady_epochs: Option<EpochRange>,
}

impl Experiment {
    pub fn name(&self) -> &str {
        &self.file.name
    }

    pub fn arm(&self, name: &str) -> Option<&Arm> {
        self.arms.iter().find(|a| a.name == name)
    }

    pub fn arm_names(&self) -> Vec<String> {
        self.arms.iter().map(|a| a.name.clone()).collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArmRole {
    Baseline,
    AaControl,
    Variant,
}

/// Resources of one arm's launch line (`srun -N -n -c`, `flux run -N -n -c -g`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub nodes: u32,
    pub tasks_per_node: u32,
    pub cpus_per_task: u32,
    pub gpus_per_task: u32,
    pub extra_args: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Arm {
    pub name: String,
    pub role: ArmRole,
    pub description: Option<String>,
    pub dimension: Option<String>,
    /// Effective variables set for the run: `app.env`, then the arm's own.
    pub env: BTreeMap<String, String>,
    pub unset: Vec<String>,
    pub resources: Resources,
    /// Effective extra arguments appended to the app command.
    pub args: Vec<String>,
    /// Index into `Experiment::builds`, when the experiment builds anything.
    pub build: Option<usize>,
    pub governor: Option<String>,
    pub requires: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Build {
    /// Stable id derived from the build's content (`build-<8 hex>`), used as directory name.
    pub id: String,
    pub spec: BuildSpec,
}

impl Build {
    pub fn command(&self) -> &CommandSpec {
        &self.spec.command
    }
}

/// An epoch window such as `2..`, `2..5` or `3` (1-based, inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EpochRange {
    pub start: u32,
    pub end: Option<u32>,
}

impl std::str::FromStr for EpochRange {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let num = |t: &str| -> Result<u32, String> {
            t.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{t}` is not an epoch number"))
        };
        let (start, end) = match s.split_once("..") {
            Some((a, b)) => {
                let start = if a.trim().is_empty() { 1 } else { num(a)? };
                let end = if b.trim().is_empty() {
                    None
                } else {
                    Some(num(b.trim_start_matches('='))?)
                };
                (start, end)
            }
            None => {
                let n = num(s)?;
                (n, Some(n))
            }
        };
        if start == 0 {
            return Err("epochs are numbered from 1".into());
        }
        if let Some(e) = end
            && e < start
        {
            return Err(format!("the window ends ({e}) before it starts ({start})"));
        }
        Ok(EpochRange { start, end })
    }
}

impl std::fmt::Display for EpochRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.end {
            Some(e) if e == self.start => write!(f, "{e}"),
            Some(e) => write!(f, "{}..{e}", self.start),
            None => write!(f, "{}..", self.start),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epoch_ranges_parse() {
        assert_eq!(
            "2..".parse::<EpochRange>().unwrap(),
            EpochRange {
                start: 2,
                end: None
            }
        );
        assert_eq!(
            "2..5".parse::<EpochRange>().unwrap(),
            EpochRange {
                start: 2,
                end: Some(5)
            }
        );
        assert_eq!("3".parse::<EpochRange>().unwrap().to_string(), "3");
        assert!("0..".parse::<EpochRange>().is_err());
        assert!("5..2".parse::<EpochRange>().is_err());
        assert!("x..".parse::<EpochRange>().is_err());
    }
}

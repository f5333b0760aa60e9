//! Where an experiment's files live on disk. One root per execution of an experiment:
//!
//! ```text
//! <root>/experiment.yaml      exact copy of the experiment file
//! <root>/plan.json            the blocks and their recorded arm order
//! <root>/builds/<build-id>/   build.sh, build.log, build.json, and the build's output
//! <root>/runs/<run-id>/       run.sh, run.json, stdout, stderr, manifest.json, the app's outputs
//! <root>/jobs/<job-name>/     a scheduler job's script, output, probe.json (daemon only)
//! <root>/samples.csv          variant,replicate,block,epoch,seconds,cpu_s,max_rss_kib,energy_j (written at the end)
//! <root>/report.json          the report (written at the end)
//! ```

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }

    pub fn experiment_copy(&self) -> PathBuf {
        self.root.join("experiment.yaml")
    }

    pub fn plan(&self) -> PathBuf {
        self.root.join("plan.json")
    }

    pub fn build_dir(&self, build_id: &str) -> PathBuf {
        self.root.join("builds").join(build_id)
    }

    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    pub fn run_dir(&self, run_id: &str) -> PathBuf {
        self.runs_dir().join(run_id)
    }

    /// Where a run's compile caches go: its own `caches/` (`caches: cold`), or the arm's
    /// `<root>/caches/<arm>` shared by its runs (`caches: warm`).
    pub fn cache_dir(&self, arm: &optgate_experiment::Arm, run_id: &str) -> PathBuf {
        match arm.caches {
            optgate_experiment::CacheMode::Cold => self.run_dir(run_id).join("caches"),
            optgate_experiment::CacheMode::Warm => self.root.join("caches").join(&arm.name),
        }
    }

    pub fn job_dir(&self, job_name: &str) -> PathBuf {
        self.root.join("jobs").join(job_name)
    }

    pub fn samples(&self) -> PathBuf {
        self.root.join("samples.csv")
    }

    pub fn report_json(&self) -> PathBuf {
        self.root.join("report.json")
    }

    /// A path relative to the root when possible, for messages.
    pub fn display<'a>(&self, p: &'a Path) -> std::path::Display<'a> {
        p.strip_prefix(&self.root).unwrap_or(p).display()
    }
}

//! The arguments of each command, one clap struct per command (the `Command` variant of
//! `cli.rs` wraps it); each command's module runs it (`impl XArgs { pub fn run(self) }`).

use std::path::PathBuf;

use crate::choices::{DaemonCommand, Format, HistoryFormat, TraceCommand};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The experiment file.
    pub experiment: PathBuf,
    /// Directory for builds, runs and the report (resumes if it holds this experiment).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Report format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Short for --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Write SVG plots of the report into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// No progress: neither the bar on a terminal nor, elsewhere (a log, a pipe), the
    /// line per finished run.
    #[arg(long)]
    pub quiet: bool,
    /// Run a Slurm or Flux experiment's runs on this machine anyway (without it, such an
    /// experiment is refused: on a login node its runs belong on the cluster — use
    /// `optgate submit`).
    #[arg(long)]
    pub here: bool,
}

#[derive(Debug, clap::Args)]
pub struct ProposeArgs {
    pub experiment: PathBuf,
    /// Where to write (default: beside EXPERIMENT, as NAME.proposed.yaml).
    #[arg(short, long)]
    pub out: Option<PathBuf>,
    /// Replace OUT when it exists.
    #[arg(long)]
    pub force: bool,
    /// No progress while the baseline runs.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    pub experiment: PathBuf,
    /// Treat warnings (e.g. missing checklist rows) as errors.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    pub experiment: PathBuf,
    /// Output directory (created; must be empty or absent).
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    pub samples: PathBuf,
    /// Name of the baseline arm in the variant column.
    #[arg(long)]
    pub baseline: String,
    /// paired (blocked runs) or independent.
    #[arg(long, default_value = "paired")]
    pub design: String,
    /// One-sided level of each test; intervals are at 1 − 2α.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Smallest steady-state speed-up worth having, in percent.
    #[arg(long, default_value_t = 1.0)]
    pub min_effect_pct: f64,
    /// Matched steady window, e.g. `2..`, `2..5`, `3` (default: every epoch but the first).
    #[arg(long)]
    pub steady_epochs: Option<String>,
    /// Epochs of the production job, to amortise one-time costs (default: epochs measured).
    #[arg(long)]
    pub production_epochs: Option<u32>,
    #[command(flatten)]
    pub output: ReportOutput,
}

#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct DaemonArgs {
    /// Run in this process until SIGTERM or `optgate daemon stop`; logs go to stderr
    /// (set OPTGATE_LOG=info to see progress).
    #[arg(long)]
    pub foreground: bool,
    #[command(subcommand)]
    pub action: Option<DaemonCommand>,
}

#[derive(Debug, clap::Args)]
pub struct SubmitArgs {
    pub experiment: PathBuf,
    /// Fail with exit code 4 instead of starting the daemon when none is running.
    #[arg(long)]
    pub no_start: bool,
    /// Re-check at this interval: a whole number and one unit, s, m, h or d (`7d`).
    /// Overrides the file's `recheck.every`.
    #[arg(long, value_name = "INTERVAL")]
    pub every: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    pub id: Option<String>,
    /// Show the newest N experiments (the rest are counted below the table).
    #[arg(long, value_name = "N", default_value_t = crate::cmd::status::STATUS_PAGE,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: u32,
    /// Show every experiment (no page).
    #[arg(long, conflicts_with = "limit")]
    pub all: bool,
    /// Refresh until the experiments shown have ended.
    #[arg(long)]
    pub watch: bool,
    /// The documented JSON form (one object per refresh with --watch).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    pub name: String,
    /// table; json: `{executions: [...], change_points: [{series, at, before, after,
    /// p}]}`; html: one self-contained page with the table and each series plotted
    /// with its change points.
    #[arg(long, value_enum, default_value = "table")]
    pub format: HistoryFormat,
    /// Short for --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    pub id: String,
    #[command(flatten)]
    pub output: ReportOutput,
}

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    pub id: String,
    #[arg(long)]
    pub variant: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    pub id: String,
}

#[derive(Debug, clap::Args)]
pub struct ExecRunArgs {
    /// The job attempt running it (1 for a block's first job, 2 for its first
    /// resubmission, …): a run a newer attempt claimed is not started, and a stale
    /// attempt's record never replaces a newer one's.
    #[arg(long, default_value_t = 1)]
    pub attempt: u32,
    pub run_dir: PathBuf,
    /// Launcher prefix, e.g. `srun -N1 -n1 -c6`.
    #[arg(last = true)]
    pub launcher: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct StepArgs {
    /// The job attempt whose run this is (as exec-run's `--attempt`).
    #[arg(long, default_value_t = 1)]
    pub attempt: u32,
    pub run_dir: PathBuf,
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    pub shell: clap_complete::Shell,
}

/// `--json` is short for `--format json`.
fn json_or(json: bool, format: Format) -> Format {
    match json {
        true => Format::Json,
        false => format,
    }
}

impl RunArgs {
    pub fn format(&self) -> Format {
        json_or(self.json, self.format)
    }
}

/// How a report is printed (`analyze`, `report`): its format and where its plots go.
#[derive(Debug, clap::Args)]
pub struct ReportOutput {
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Short for --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Write SVG plots into this directory.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

impl ReportOutput {
    pub fn format(&self) -> Format {
        json_or(self.json, self.format)
    }
}

impl HistoryArgs {
    pub fn format(&self) -> HistoryFormat {
        match self.json {
            true => HistoryFormat::Json,
            false => self.format,
        }
    }
}

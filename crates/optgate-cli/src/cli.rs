//! Command-line arguments: what each command takes, with the help text users read.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

const AFTER_HELP: &str = "\
Exit codes:
  0    finished (gate: accepted)
  1    gate: rejected
  2    invalid input: usage, experiment file, samples file (gate: inconclusive or running)
  3    the work failed: build or runs failed, I/O error, unknown experiment
  4    the daemon is not running or cannot be reached
  130  interrupted (Ctrl-C)

Logging: set OPTGATE_LOG (or RUST_LOG), e.g. OPTGATE_LOG=debug.";

/// optgate: find out whether an HPC optimization really works.
///
/// Declare an experiment (baseline + variants) in YAML; optgate runs replicated, blocked,
/// randomised runs, compares epoch N with epoch N, checks outputs did not change, and
/// decides: accept, reject or inconclusive, with the evidence.
#[derive(Debug, Parser)]
#[command(name = "optgate", version, after_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
    Json,
    Csv,
    /// One self-contained page (plots inline, nothing loaded from the network).
    Html,
    /// JUnit XML for CI: a test case per variant (accept passes, reject fails,
    /// inconclusive and not applicable are skipped).
    Junit,
}

/// The formats of `optgate history` (a history has no Markdown, CSV or JUnit form).
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum HistoryFormat {
    Table,
    Json,
    /// One self-contained page (plots inline, nothing loaded from the network).
    Html,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an experiment in the foreground on this machine and print its report.
    ///
    /// Builds every distinct build, then runs every arm's replicates in blocks, one run at
    /// a time, in the seeded order recorded in plan.json. Everything goes into a new
    /// directory under the experiment's workdir (optgate-runs/NAME/TIMESTAMP) unless --out
    /// names one; pointing --out at an interrupted execution resumes it.
    Run {
        /// The experiment file.
        experiment: PathBuf,
        /// Directory for builds, runs and the report (resumes if it holds this experiment).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Report format on stdout.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Short for --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Write SVG plots of the report into this directory.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// No progress: neither the bar on a terminal nor, elsewhere (a log, a pipe), the
        /// line per finished run.
        #[arg(long)]
        quiet: bool,
        /// Run a Slurm or Flux experiment's runs on this machine anyway (without it, such an
        /// experiment is refused: on a login node its runs belong on the cluster — use
        /// `optgate submit`).
        #[arg(long)]
        here: bool,
    },
    /// Measure the baseline and write the experiment to run: the proposals its measured
    /// facts call for, and a verdict for every other checklist dimension.
    ///
    /// Runs the baseline of EXPERIMENT (whose `variants` may be absent) a few times on its
    /// scheduler, through the engine (locally here, on Slurm or Flux through the daemon),
    /// then writes EXPERIMENT's text with `variants:` and `checklist:` added, each entry
    /// carrying the measured fact behind it (docs/PROPOSE.md lists the rules).
    Propose {
        experiment: PathBuf,
        /// Where to write (default: beside EXPERIMENT, as NAME.proposed.yaml).
        #[arg(short, long)]
        out: Option<PathBuf>,
        /// Replace OUT when it exists.
        #[arg(long)]
        force: bool,
        /// No progress while the baseline runs.
        #[arg(long)]
        quiet: bool,
    },
    /// Check an experiment file: schema errors with file:line:column, then pre-flight checks.
    Validate {
        experiment: PathBuf,
        /// Treat warnings (e.g. missing checklist rows) as errors.
        #[arg(long)]
        strict: bool,
    },
    /// Write the plan and every rendered script into a directory, without running anything.
    Plan {
        experiment: PathBuf,
        /// Output directory (created; must be empty or absent).
        #[arg(long)]
        out: PathBuf,
    },
    /// Analyse per-epoch samples measured elsewhere: matched epoch-N comparison, exact rank
    /// tests, Hodges–Lehmann speed-ups with intervals, Holm over the variants, decisions.
    ///
    /// SAMPLES.csv has a header and the columns variant,replicate,epoch,seconds (an
    /// optional block column pairs runs; without it the paired design pairs by replicate).
    Analyze {
        samples: PathBuf,
        /// Name of the baseline arm in the variant column.
        #[arg(long)]
        baseline: String,
        /// paired (blocked runs) or independent.
        #[arg(long, default_value = "paired")]
        design: String,
        /// One-sided level of each test; intervals are at 1 − 2α.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// Smallest steady-state speed-up worth having, in percent.
        #[arg(long, default_value_t = 1.0)]
        min_effect_pct: f64,
        /// Matched steady window, e.g. `2..`, `2..5`, `3` (default: every epoch but the first).
        #[arg(long)]
        steady_epochs: Option<String>,
        /// Epochs of the production job, to amortise one-time costs (default: epochs measured).
        #[arg(long)]
        production_epochs: Option<u32>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Short for --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Write SVG plots into this directory.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Work with DFTracer traces (.pfw / .pfw.gz, every format generation).
    Trace {
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// Print the facts of this node: CPU, cores, ISA flags, NUMA, cpufreq and governors,
    /// memory, GPUs, the scheduler allocation. `--json` is the stable, documented form
    /// (crates/optgate-probe/PROBE_JSON.md).
    Probe {
        #[arg(long)]
        json: bool,
    },
    /// Start the daemon in the background (`--foreground` for systemd or tmux), or stop it
    /// with `optgate daemon stop`. State lives in $OPTGATE_HOME, else
    /// $XDG_STATE_HOME/optgate, else ~/.local/state/optgate.
    Daemon {
        /// Run in this process until SIGTERM or `optgate daemon stop`; logs go to stderr
        /// (set OPTGATE_LOG=info to see progress).
        #[arg(long)]
        foreground: bool,
        #[command(subcommand)]
        action: Option<DaemonCommand>,
    },
    /// Hand an experiment to the daemon (started if none is running) and print its id.
    ///
    /// The file is validated here first, with the same messages and pre-flight checks as
    /// `optgate validate`. Only the experiment id is printed on stdout. With --every (or
    /// `recheck:` in the file) the daemon submits it again at that interval, each time a
    /// new experiment of the same name; `optgate cancel R<n>` stops that.
    Submit {
        experiment: PathBuf,
        /// Fail with exit code 4 instead of starting the daemon when none is running.
        #[arg(long)]
        no_start: bool,
        /// Re-check at this interval: a whole number and one unit, s, m, h or d (`7d`).
        /// Overrides the file's `recheck.every`.
        #[arg(long, value_name = "INTERVAL")]
        every: Option<String>,
    },
    /// Where the daemon's experiments stand, newest first: state, runs done/total, looks,
    /// decisions so far. With an ID: that experiment, with its jobs.
    Status {
        id: Option<String>,
        /// Show the newest N experiments (the rest are counted below the table).
        #[arg(long, value_name = "N", default_value_t = crate::cmd::status::STATUS_PAGE,
              value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// Show every experiment (no page).
        #[arg(long, conflicts_with = "limit")]
        all: bool,
        /// Refresh until the experiments shown have ended.
        #[arg(long)]
        watch: bool,
        /// The documented JSON form (one object per refresh with --watch).
        #[arg(long)]
        json: bool,
    },
    /// Every execution of experiment NAME (`optgate run` and the daemon), oldest first,
    /// with the changes found over them: the baseline's steady-state value and each
    /// variant's speed-up.
    History {
        name: String,
        /// table; json: `{executions: [...], change_points: [{series, at, before, after,
        /// p}]}`; html: one self-contained page with the table and each series plotted
        /// with its change points.
        #[arg(long, value_enum, default_value = "table")]
        format: HistoryFormat,
        /// Short for --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
    },
    /// The report of a daemon experiment (its latest look).
    Report {
        id: String,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
        /// Short for --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Write SVG plots into this directory.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// The decision as an exit status: 0 accepted, 1 rejected, 2 inconclusive or still
    /// running, 3 or more an error (failed or cancelled experiment, unknown id, no daemon).
    /// Without --variant: 1 if any variant was rejected, else 2 if any is not accepted.
    Gate {
        id: String,
        #[arg(long)]
        variant: Option<String>,
    },
    /// Cancel a daemon experiment: no new work, its live jobs are cancelled. `R<n>` (from
    /// `optgate status`) cancels a recurrence: it submits no more executions; the one
    /// running goes on.
    Cancel { id: String },
    /// Execute one rendered run and write its manifest (used inside job scripts).
    #[command(hide = true)]
    ExecRun {
        /// The job attempt running it (1 for a block's first job, 2 for its first
        /// resubmission, …): a run a newer attempt claimed is not started, and a stale
        /// attempt's record never replaces a newer one's.
        #[arg(long, default_value_t = 1)]
        attempt: u32,
        run_dir: PathBuf,
        /// Launcher prefix, e.g. `srun -N1 -n1 -c6`.
        #[arg(last = true)]
        launcher: Vec<String>,
    },
    /// Wrap one task of a scheduler's step (used by exec-run: `srun … optgate step RUN_DIR
    /// -- bash run.sh`): run COMMAND with everything passed through, forward signals to it,
    /// record what it used in `RUN_DIR/tasks.attempt-N/`, and the governor in force once
    /// per node in `RUN_DIR/step-governor.<host>`; exit as COMMAND did.
    #[command(hide = true, alias = "step-governor")]
    Step {
        /// The job attempt whose run this is (as exec-run's `--attempt`).
        #[arg(long, default_value_t = 1)]
        attempt: u32,
        run_dir: PathBuf,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Print shell completions for bash, zsh, fish, elvish or powershell.
    Completions { shell: clap_complete::Shell },
}

#[derive(Debug, Subcommand)]
pub enum DaemonCommand {
    /// Stop the daemon: it finishes its database writes; jobs keep running and a restarted
    /// daemon picks them up.
    Stop,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Event count and summed duration per category, per name and per epoch, over every
    /// file given (folders expand to their trace files); damaged lines are reported and
    /// skipped, never fatal.
    Summary {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Event name whose intervals delimit epochs, when events carry no `args.epoch`.
        #[arg(long)]
        epoch_marker: Option<String>,
        /// Only events of this category.
        #[arg(long)]
        category: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

//! Command-line arguments: what each command takes, with the help text users read.

use clap::{Parser, Subcommand};

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

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an experiment in the foreground on this machine and print its report.
    ///
    /// Builds every distinct build, then runs every arm's replicates in blocks, one run at
    /// a time, in the seeded order recorded in plan.json. Everything goes into a new
    /// directory under the experiment's workdir (optgate-runs/NAME/TIMESTAMP) unless --out
    /// names one; pointing --out at an interrupted execution resumes it.
    Run(crate::args::RunArgs),
    /// Measure the baseline and write the experiment to run: the proposals its measured
    /// facts call for, and a verdict for every other checklist dimension.
    ///
    /// Runs the baseline of EXPERIMENT (whose `variants` may be absent) a few times on its
    /// scheduler, through the engine (locally here, on Slurm or Flux through the daemon),
    /// then writes EXPERIMENT's text with `variants:` and `checklist:` added, each entry
    /// carrying the measured fact behind it (docs/PROPOSE.md lists the rules).
    Propose(crate::args::ProposeArgs),
    /// Check an experiment file: schema errors with file:line:column, then pre-flight checks.
    Validate(crate::args::ValidateArgs),
    /// Write the plan and every rendered script into a directory, without running anything.
    Plan(crate::args::PlanArgs),
    /// Analyse per-epoch samples measured elsewhere: matched epoch-N comparison, exact rank
    /// tests, Hodges–Lehmann speed-ups with intervals, Holm over the variants, decisions.
    ///
    /// SAMPLES.csv has a header and the columns variant,replicate,epoch,seconds (an
    /// optional block column pairs runs; without it the paired design pairs by replicate).
    Analyze(crate::args::AnalyzeArgs),
    /// Work with DFTracer traces (.pfw / .pfw.gz, every format generation).
    Trace(crate::args::TraceArgs),
    /// Print the facts of this node: CPU, cores, ISA flags, NUMA, cpufreq and governors,
    /// memory, GPUs, the scheduler allocation. `--json` is the stable, documented form
    /// (crates/optgate-probe/PROBE_JSON.md).
    Probe(crate::args::ProbeArgs),
    /// Start the daemon in the background (`--foreground` for systemd or tmux), or stop it
    /// with `optgate daemon stop`. State lives in $OPTGATE_HOME, else
    /// $XDG_STATE_HOME/optgate, else ~/.local/state/optgate.
    Daemon(crate::args::DaemonArgs),
    /// Hand an experiment to the daemon (started if none is running) and print its id.
    ///
    /// The file is validated here first, with the same messages and pre-flight checks as
    /// `optgate validate`. Only the experiment id is printed on stdout. With --every (or
    /// `recheck:` in the file) the daemon submits it again at that interval, each time a
    /// new experiment of the same name; `optgate cancel R<n>` stops that.
    Submit(crate::args::SubmitArgs),
    /// Where the daemon's experiments stand, newest first: state, runs done/total, looks,
    /// decisions so far. With an ID: that experiment, with its jobs.
    Status(crate::args::StatusArgs),
    /// Every execution of experiment NAME (`optgate run` and the daemon), oldest first,
    /// with the changes found over them: the baseline's steady-state value and each
    /// variant's speed-up.
    History(crate::args::HistoryArgs),
    /// The report of a daemon experiment (its latest look).
    Report(crate::args::ReportArgs),
    /// The decision as an exit status: 0 accepted, 1 rejected, 2 inconclusive or still
    /// running, 3 or more an error (failed or cancelled experiment, unknown id, no daemon).
    /// Without --variant: 1 if any variant was rejected, else 2 if any is not accepted.
    Gate(crate::args::GateArgs),
    /// Cancel a daemon experiment: no new work, its live jobs are cancelled. `R<n>` (from
    /// `optgate status`) cancels a recurrence: it submits no more executions; the one
    /// running goes on.
    Cancel(crate::args::CancelArgs),
    /// Execute one rendered run and write its manifest (used inside job scripts).
    #[command(hide = true)]
    ExecRun(crate::args::ExecRunArgs),
    /// Wrap one task of a scheduler's step (used by exec-run: `srun … optgate step RUN_DIR
    /// -- bash run.sh`): run COMMAND with everything passed through, forward signals to it,
    /// record what it used in `RUN_DIR/tasks.attempt-N/`, and the governor in force once
    /// per node in `RUN_DIR/step-governor.<host>`; exit as COMMAND did.
    #[command(hide = true, alias = "step-governor")]
    Step(crate::args::StepArgs),
    /// Print shell completions for bash, zsh, fish, elvish or powershell.
    Completions(crate::args::CompletionsArgs),
}

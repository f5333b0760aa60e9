//! One module per command; `dispatch` is the single match from command to handler.

mod analyze;
mod campaign;
mod cancel;
mod daemon;
mod exec_run;
mod gate;
mod history;
mod plan;
pub mod probe;
mod progress;
mod propose;
mod propose_measure;
mod report;
mod run;
pub(crate) mod status;
mod submit;
mod term;
mod trace;
mod validate;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, Command};
use crate::exit;

pub fn dispatch(cli: Cli) -> Result<i32> {
    match cli.command {
        Command::Run {
            experiment,
            out,
            format,
            json,
            plot,
            quiet,
            here,
        } => run_file(
            &experiment,
            out,
            if json {
                crate::cli::Format::Json
            } else {
                format
            },
            plot,
            quiet,
            here,
        ),
        Command::Validate { experiment, strict } => validate_file(&experiment, strict),
        Command::Propose {
            experiment,
            out,
            force,
            quiet,
        } => propose::propose(&experiment, out, force, quiet),
        Command::Plan { experiment, out } => plan::plan(&experiment, &out),
        Command::Analyze {
            samples,
            baseline,
            design,
            alpha,
            min_effect_pct,
            steady_epochs,
            production_epochs,
            format,
            json,
            plot,
        } => analyze::analyze(analyze::AnalyzeArgs {
            samples,
            baseline,
            design,
            alpha,
            min_effect_pct,
            steady_epochs,
            production_epochs,
            format: if json {
                crate::cli::Format::Json
            } else {
                format
            },
            plot,
        }),
        Command::Probe { json } => probe::probe(json),
        Command::Trace {
            command:
                crate::cli::TraceCommand::Summary {
                    paths,
                    epoch_marker,
                    category,
                    json,
                },
        } => trace::summary(&paths, epoch_marker, category, json),
        Command::Daemon { foreground, action } => daemon::daemon(
            foreground,
            matches!(action, Some(crate::cli::DaemonCommand::Stop)),
        ),
        Command::Submit {
            experiment,
            no_start,
            every,
        } => submit::submit(&experiment, no_start, every.as_deref()),
        Command::Status {
            id,
            limit,
            all,
            watch,
            json,
        } => status::status(id.as_deref(), (!all).then_some(limit), watch, json),
        Command::History { name, format, json } => history::history(
            &name,
            if json {
                crate::cli::HistoryFormat::Json
            } else {
                format
            },
        ),
        Command::Report {
            id,
            format,
            json,
            plot,
        } => report::report_experiment(
            &id,
            if json {
                crate::cli::Format::Json
            } else {
                format
            },
            plot.as_deref(),
        ),
        Command::Gate { id, variant } => gate::gate(&id, variant.as_deref()),
        Command::Cancel { id } => cancel::cancel(&id),
        Command::ExecRun {
            attempt,
            run_dir,
            launcher,
        } => exec_run::exec_run(&run_dir, attempt, &launcher),
        Command::Step {
            attempt,
            run_dir,
            command,
        } => exec_run::step(&run_dir, attempt, &command),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "optgate", &mut std::io::stdout());
            Ok(exit::OK)
        }
    }
}

/// `optgate run FILE`: a campaign file (`stages:`) runs as a campaign, any other file as one
/// experiment.
fn run_file(
    path: &std::path::Path,
    out: Option<std::path::PathBuf>,
    format: crate::cli::Format,
    plot: Option<std::path::PathBuf>,
    quiet: bool,
    here: bool,
) -> Result<i32> {
    if campaign::is_campaign_file(path) {
        return campaign::run(path, out, format, quiet, here);
    }
    run::run(path, out, format, plot, quiet, here)
}

/// `optgate validate FILE`: a campaign file is checked as a whole, any other as one
/// experiment.
fn validate_file(path: &std::path::Path, strict: bool) -> Result<i32> {
    if campaign::is_campaign_file(path) {
        return campaign::validate(path, strict);
    }
    validate::validate(path, strict)
}

/// How a command shows the loader's "checklist: no verdict for N of the 10 dimensions"
/// warning, which every command loading the file would otherwise repeat in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecklistNote {
    /// In full (`validate`, whose job it is).
    Full,
    /// One short line pointing at `optgate validate --strict` (`run`, `submit`).
    Short,
    /// Not at all (`plan`).
    Silent,
}

/// Whether `w` is the loader's warning about dimensions without a verdict.
fn is_checklist_warning(w: &optgate_experiment::Diagnostic) -> bool {
    w.message.starts_with("checklist: no verdict")
}

/// Loads an experiment, printing its warnings (the checklist's as `note` says); invalid
/// files exit with INVALID_INPUT.
pub fn load_experiment(
    path: &std::path::Path,
    note: ChecklistNote,
) -> Result<optgate_experiment::Loaded> {
    if campaign::is_campaign_file(path) {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} is a campaign (it has `stages:`): this command takes an experiment;                  `optgate validate` lists its stages, `optgate run` and `optgate submit` take it",
                path.display()
            ),
        ));
    }
    match optgate_experiment::load(path) {
        Ok(loaded) => {
            const SHOWN: usize = optgate_experiment::limits::MAX_DIAGNOSTICS_SHOWN;
            for w in loaded.warnings.iter().take(SHOWN) {
                if !is_checklist_warning(w) || note == ChecklistNote::Full {
                    eprintln!("{w}");
                } else if note == ChecklistNote::Short {
                    // "checklist: no verdict for 9 of the 10 dimensions", without the list.
                    let head = w.message.split(" (").next().unwrap_or(&w.message);
                    eprintln!(
                        "optgate: {head}; `optgate validate --strict {}` lists them",
                        path.display()
                    );
                }
            }
            let more = loaded.warnings.len().saturating_sub(SHOWN);
            if more > 0 {
                eprintln!("… and {more} more warnings");
            }
            Ok(loaded)
        }
        Err(e @ optgate_experiment::LoadError::Read { .. }) => {
            Err(exit::with_code(exit::INVALID_INPUT, e))
        }
        Err(e) => Err(exit::with_code(exit::INVALID_INPUT, e)),
    }
}

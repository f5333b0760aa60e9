//! One module per command; `dispatch` is the single match from command to handler.

mod analyze;
mod campaign;
mod cancel;
mod common;
mod daemon;
mod daemon_client;
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
mod status_recurrences;
mod status_text;
mod submit;
mod term;
mod trace;
mod validate;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, Command};
use crate::exit;

pub fn dispatch(cli: Cli) -> Result<i32> {
    use crate::choices::DaemonCommand;
    match cli.command {
        Command::Run(a) => run_file(a),
        Command::Validate(a) => validate_file(&a.experiment, a.strict),
        Command::Propose(a) => propose::propose(&a.experiment, a.out, a.force, a.quiet),
        Command::Plan(a) => plan::plan(&a.experiment, &a.out),
        Command::Analyze(a) => analyze::analyze(a),
        Command::Probe(a) => probe::probe(a.json),
        Command::Trace(a) => trace::trace(a.command),
        Command::Daemon(a) => {
            daemon::daemon(a.foreground, matches!(a.action, Some(DaemonCommand::Stop)))
        }
        Command::Submit(a) => submit::submit(&a.experiment, a.no_start, a.every.as_deref()),
        Command::Status(a) => status::status(
            a.id.as_deref(),
            (!a.all).then_some(a.limit),
            a.watch,
            a.json,
        ),
        Command::History(a) => history::history(&a.name, a.format()),
        Command::Report(a) => {
            report::report_experiment(&a.id, a.output.format(), a.output.plot.as_deref())
        }
        Command::Gate(a) => gate::gate(&a.id, a.variant.as_deref()),
        Command::Cancel(a) => cancel::cancel(&a.id),
        Command::ExecRun(a) => exec_run::exec_run(&a.run_dir, a.attempt, &a.launcher),
        Command::Step(a) => exec_run::step(&a.run_dir, a.attempt, &a.command),
        Command::Completions(a) => {
            let mut cmd = Cli::command();
            clap_complete::generate(a.shell, &mut cmd, "optgate", &mut std::io::stdout());
            Ok(exit::OK)
        }
    }
}

/// `optgate run FILE`: a campaign file (`stages:`) runs as a campaign, any other file as one
/// experiment.
fn run_file(a: crate::args::RunArgs) -> Result<i32> {
    let format = a.format();
    if common::is_campaign_file(&a.experiment) {
        return campaign::run(&a.experiment, a.out, format, a.quiet, a.here);
    }
    run::run(&a.experiment, a.out, format, a.plot, a.quiet, a.here)
}

/// `optgate validate FILE`: a campaign file is checked as a whole, any other as one
/// experiment.
fn validate_file(path: &std::path::Path, strict: bool) -> Result<i32> {
    if common::is_campaign_file(path) {
        return campaign::validate(path, strict);
    }
    validate::validate(path, strict)
}

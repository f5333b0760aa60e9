//! `optgate run`: the daemon's engine in this process, on this machine
//! (`optgate_daemon::foreground`): builds, a local job per block, looks that add blocks
//! while a variant is inconclusive, the report — showing progress (`progress.rs`). Given
//! the `--out` of an interrupted execution it resumes: finished runs are kept and counted,
//! the rest run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use optgate_daemon::engine::EngineSettings;
use optgate_daemon::{foreground, foreground_setup};
use optgate_evidence::Layout;
use optgate_experiment::Experiment;
use optgate_store::ExperimentState;

use super::progress::Progress;

use crate::choices::Format;
use crate::exit;

pub fn run(
    path: &Path,
    out: Option<PathBuf>,
    format: Format,
    plot: Option<PathBuf>,
    quiet: bool,
    here: bool,
) -> Result<i32> {
    let loaded = super::common::load_experiment(path, super::common::ChecklistNote::Short)?;
    let exp = loaded.experiment;
    if exp.recheck.is_some() {
        errln!(
            "optgate: `recheck:` is for `optgate submit` (the daemon re-checks on schedule); \
             `optgate run` executes the experiment once"
        );
    }
    super::common::refuse_cluster_kind(path, exp.kind, here)?;
    let root = super::common::run_root(out, &exp.workdir, exp.name());
    let layout = Layout::new(&root);
    let finished = match execute(&exp, path, &root, quiet)? {
        Ok(finished) => finished,
        Err(code) => return Ok(code),
    };
    show_finished(&exp, &layout, finished, format, plot)
}

/// A finished execution: the experiment's final row and the runs recorded failed.
pub(super) type Finished = (optgate_store::ExperimentRow, Vec<(String, String)>);

/// Executes `exp` (read from `path`) in `root` through the daemon's engine in this process:
/// pre-flight, the machine's local-runs lock, the runs with progress, Ctrl-C as a cancel.
/// `Err(code)` inside: it was interrupted (said so, with how to resume).
pub(super) fn execute(
    exp: &Experiment,
    path: &Path,
    root: &Path,
    quiet: bool,
) -> Result<std::result::Result<Finished, i32>> {
    let root = root.to_path_buf();
    let exp = exp.clone();
    let resuming = Layout::new(&root).experiment_copy().exists();
    check_before_running(&exp, path, &root)?;
    let opts = engine_options(&root)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let interrupt = CancellationToken::new();
    errln!("optgate: experiment `{}` → {}", exp.name(), root.display());
    let mut progress: Option<Progress> = None;
    let end = runtime.block_on(async {
        tokio::spawn(foreground_setup::interrupt_on_signals(
            interrupt.clone(),
            || errln!("\noptgate: interrupted; stopping the current run…"),
        ));
        let on_event = |ev: foreground::Event| show_event(&mut progress, ev, resuming, quiet);
        foreground::run(&exp, opts, on_event, interrupt.clone()).await
    });
    if let Some(p) = &progress {
        p.finish();
    }
    match end.map_err(|e| exit::with_code(exit::FAILED, e))? {
        foreground::End::Interrupted { kept } => {
            errln!(
                "optgate: interrupted. Kept {kept} finished run(s) in {}; the interrupted run was discarded.\n\
                 Resume with: optgate run {} --out {}",
                root.display(),
                path.display(),
                root.display()
            );
            Ok(Err(exit::INTERRUPTED))
        }
        foreground::End::Finished {
            row,
            failed_runs,
            history_error,
        } => {
            if let Some(e) = history_error {
                errln!("optgate: this execution is not in the history (`optgate history`): {e}");
            }
            Ok(Ok((*row, failed_runs)))
        }
    }
}

/// Before anything is written: a root holding something else is refused, and pre-flight
/// errors (each finding printed) stop the execution.
fn check_before_running(exp: &Experiment, path: &Path, root: &Path) -> Result<()> {
    if let Err(e) = foreground_setup::plan_for_root(exp, &Layout::new(root)) {
        let code = match e.is_invalid_input() {
            true => exit::INVALID_INPUT,
            false => exit::FAILED,
        };
        return Err(exit::with_code(code, e));
    }
    super::validate::refuse_preflight_errors(path, exp, "run")?;
    Ok(())
}

/// The foreground engine's options: the machine's local-runs lock (waited for, saying so:
/// local runs must not compete for the cores with the daemon's local jobs), the user's
/// history, the no-space give-up and the binary the jobs call.
fn engine_options(root: &Path) -> Result<foreground::Options> {
    let machine_lock = foreground_setup::wait_for_local_runs(|lock| {
        errln!(
            "optgate: waiting for the daemon's local runs to finish (lock {})…",
            lock.display()
        )
    })?;
    let history = optgate_client::StatePaths::from_env()?;
    let no_space_give_up = optgate_daemon::space::no_space_give_up(std::env::var_os(
        optgate_daemon::space::NO_SPACE_GIVE_UP_VAR,
    ))
    .map_err(|e| exit::with_code(exit::INVALID_INPUT, e))?;
    let optgate_bin = optgate_sched::batch::optgate_for_jobs(
        std::env::var_os(optgate_sched::batch::OPTGATE_BIN_VAR),
        std::env::current_exe().context("cannot find the optgate binary")?,
    );
    Ok(foreground::Options {
        root: root.to_path_buf(),
        machine_lock,
        optgate_bin,
        settings: EngineSettings::default(),
        failpoints: Default::default(),
        no_space_give_up,
        history: Some(history),
    })
}

/// One event of the engine shown: the first total starts the progress (saying a resumed
/// execution's runs already done), a variant not applicable here is said, the rest go to
/// the progress.
fn show_event(progress: &mut Option<Progress>, ev: foreground::Event, resuming: bool, quiet: bool) {
    match (progress, ev) {
        (p, foreground::Event::Total { runs, done }) => match p {
            Some(p) => p.set_total(runs),
            None => {
                if resuming {
                    errln!("optgate: resuming: {done} of {runs} runs already done");
                }
                *p = Some(Progress::new(quiet, runs, done));
            }
        },
        (_, foreground::Event::NotApplicable { arm, reason }) => {
            errln!("optgate: variant `{arm}` is not applicable here: {reason}")
        }
        (Some(p), ev) => p.on_event(ev),
        (None, _) => {}
    }
}

/// Shows the end of an execution whose experiment reached a final state: the report the
/// engine wrote at its last look (`report.json` in the root — what is shown, never a second
/// collection of the runs), then the runs the engine recorded failed. Returns the exit code.
fn show_finished(
    exp: &Experiment,
    layout: &Layout,
    (row, failures): (optgate_store::ExperimentRow, Vec<(String, String)>),
    format: Format,
    plot: Option<PathBuf>,
) -> Result<i32> {
    let report = match std::fs::read_to_string(layout.report_json()) {
        Ok(text) if row.state != ExperimentState::Failed || row.state_reason.is_none() => {
            serde_json::from_str::<optgate_report::Report>(&text)
                .with_context(|| format!("{} is not a report", layout.report_json().display()))?
        }
        _ => {
            let reason = row.state_reason.unwrap_or_else(|| row.state.to_string());
            return Err(exit::with_code(
                exit::FAILED,
                anyhow::anyhow!("experiment `{}` failed: {reason}", exp.name()),
            ));
        }
    };
    if let Some(dir) = plot {
        super::report::plots(&report, &dir)?;
    }
    out!("{}", super::report::render(&report, format)?);
    // Their reasons are from their manifests, as the engine recorded them.
    if !failures.is_empty() {
        errln!(
            "\noptgate: {} run(s) failed and are not counted:",
            failures.len()
        );
        for (id, reason) in &failures {
            errln!("  {id}: {reason}");
        }
        errln!("Run directories are under {}", layout.runs_dir().display());
        return Ok(exit::FAILED);
    }
    errln!(
        "optgate: report, samples and runs are in {}",
        layout.root.display()
    );
    Ok(exit::OK)
}

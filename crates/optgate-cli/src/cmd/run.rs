//! `optgate run`: the daemon's engine in this process, on this machine
//! (`optgate_daemon::foreground`): builds, a local job per block, looks that add blocks
//! while a variant is inconclusive, the report — showing progress (`progress.rs`). Given
//! the `--out` of an interrupted execution it resumes: finished runs are kept and counted,
//! the rest run.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use optgate_daemon::engine::EngineSettings;
use optgate_daemon::foreground;
use optgate_experiment::{Experiment, Plan};
use optgate_runner::Layout;
use optgate_runner::preflight::Level;
use optgate_store::ExperimentState;

use super::progress::Progress;

use crate::cli::Format;
use crate::exit;

pub fn run(
    path: &Path,
    out: Option<PathBuf>,
    format: Format,
    plot: Option<PathBuf>,
    quiet: bool,
    here: bool,
) -> Result<i32> {
    let loaded = super::load_experiment(path, super::ChecklistNote::Short)?;
    let exp = loaded.experiment;
    if exp.recheck.is_some() {
        eprintln!(
            "optgate: `recheck:` is for `optgate submit` (the daemon re-checks on schedule); \
             `optgate run` executes the experiment once"
        );
    }
    let kind = exp.kind;
    if kind != optgate_experiment::SchedulerKind::Local && !here {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} is a `scheduler: {kind}` experiment: `optgate run` executes runs on this \
                 machine, which on a login node is the wrong place. Submit it to {kind} with \
                 `optgate submit {}`, or pass --here to run it on this machine anyway",
                path.display(),
                path.display()
            ),
        ));
    }
    let root = match out {
        Some(o) => std::path::absolute(&o).unwrap_or(o),
        None => exp
            .workdir
            .join("optgate-runs")
            .join(exp.name())
            .join(chrono::Local::now().format("%Y%m%d-%H%M%S").to_string()),
    };
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
    let layout = Layout::new(&root);
    let resuming = layout.experiment_copy().exists();
    // Refuses a root holding something else before anything is written.
    existing_or_new_plan(&exp, &layout)?;
    let findings = super::validate::preflight_findings(&exp);
    for f in &findings {
        eprintln!("{}", super::validate::show_finding(path, f));
    }
    if findings.iter().any(|f| f.level == Level::Error) {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!("pre-flight errors: nothing was run"),
        ));
    }
    // Local runs must not compete for the cores with the daemon's local jobs: each job of
    // this execution takes the same machine-wide lock; say so now if it is taken.
    let machine_lock = wait_for_local_runs()?;
    let history = optgate_daemon::paths::StatePaths::from_env()?;
    let no_space_give_up = optgate_daemon::space::no_space_give_up(std::env::var_os(
        optgate_daemon::space::NO_SPACE_GIVE_UP_VAR,
    ))
    .map_err(|e| exit::with_code(exit::INVALID_INPUT, e))?;
    let optgate_bin = optgate_sched::batch::optgate_for_jobs(
        std::env::var_os(optgate_sched::batch::OPTGATE_BIN_VAR),
        std::env::current_exe().context("cannot find the optgate binary")?,
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let interrupt = CancellationToken::new();
    eprintln!("optgate: experiment `{}` → {}", exp.name(), root.display());
    let mut progress: Option<Progress> = None;
    let end = runtime.block_on(async {
        tokio::spawn(interrupt_on_signals(interrupt.clone()));
        let opts = foreground::Options {
            root: root.clone(),
            machine_lock,
            optgate_bin,
            settings: EngineSettings::default(),
            failpoints: Default::default(),
            no_space_give_up,
            history: Some(history),
        };
        let on_event = |ev: foreground::Event| match (&mut progress, ev) {
            (p, foreground::Event::Total { runs, done }) => match p {
                Some(p) => p.set_total(runs),
                None => {
                    if resuming {
                        eprintln!("optgate: resuming: {done} of {runs} runs already done");
                    }
                    *p = Some(Progress::new(quiet, runs, done));
                }
            },
            (_, foreground::Event::NotApplicable { arm, reason }) => {
                eprintln!("optgate: variant `{arm}` is not applicable here: {reason}")
            }
            (Some(p), ev) => p.on_event(ev),
            (None, _) => {}
        };
        foreground::run(&exp, opts, on_event, interrupt.clone()).await
    });
    if let Some(p) = &progress {
        p.finish();
    }
    let finished = match end.map_err(|e| exit::with_code(exit::FAILED, e))? {
        foreground::End::Interrupted { kept } => {
            eprintln!(
                "optgate: interrupted. Kept {kept} finished run(s) in {}; the interrupted run was discarded.\n\
                 Resume with: optgate run {} --out {}",
                root.display(),
                path.display(),
                root.display()
            );
            return Ok(Err(exit::INTERRUPTED));
        }
        foreground::End::Finished {
            row,
            failed_runs,
            history_error,
        } => {
            if let Some(e) = history_error {
                eprintln!("optgate: this execution is not in the history (`optgate history`): {e}");
            }
            (*row, failed_runs)
        }
    };
    Ok(Ok(finished))
}

/// Ctrl-C, `kill`, `timeout` or a closed terminal cancel `interrupt`: the runs live in a
/// detached local job, so each of these must stop it through the engine (it would
/// otherwise go on without optgate).
async fn interrupt_on_signals(interrupt: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
    eprintln!("\noptgate: interrupted; stopping the current run…");
    interrupt.cancel();
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
    print!("{}", super::report::render(&report, format)?);
    // Their reasons are from their manifests, as the engine recorded them.
    if !failures.is_empty() {
        eprintln!(
            "\noptgate: {} run(s) failed and are not counted:",
            failures.len()
        );
        for (id, reason) in &failures {
            eprintln!("  {id}: {reason}");
        }
        eprintln!("Run directories are under {}", layout.runs_dir().display());
        return Ok(exit::FAILED);
    }
    eprintln!(
        "optgate: report, samples and runs are in {}",
        layout.root.display()
    );
    Ok(exit::OK)
}

/// Resuming: a root that already holds this experiment keeps its plan (and its recorded
/// order); a root that holds another experiment is refused rather than mixed.
fn existing_or_new_plan(exp: &Experiment, layout: &Layout) -> Result<Plan> {
    let copy = layout.experiment_copy();
    if !copy.exists() {
        if layout.root.exists() && std::fs::read_dir(&layout.root)?.next().is_some() {
            return Err(exit::with_code(
                exit::INVALID_INPUT,
                anyhow::anyhow!(
                    "{} is not empty and holds no optgate experiment; choose a new --out directory",
                    layout.root.display()
                ),
            ));
        }
        return Ok(Plan::for_experiment(exp));
    }
    let old = std::fs::read_to_string(&copy)
        .with_context(|| format!("cannot read {}", copy.display()))?;
    if old != exp.source_text {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} holds a different version of this experiment; its runs cannot be mixed with the current file's. Choose a new --out directory",
                layout.root.display()
            ),
        ));
    }
    let plan_path = layout.plan();
    let text = std::fs::read_to_string(&plan_path)
        .with_context(|| format!("cannot read {}", plan_path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a valid plan", plan_path.display()))
}

/// The machine-wide lock of local runs (the one the daemon's local jobs take). When a daemon
/// job holds it, says so and waits until it is free, so the user knows why nothing runs;
/// it is not kept: each job of this execution takes it for its own runs.
fn wait_for_local_runs() -> Result<PathBuf> {
    use nix::fcntl::{Flock, FlockArg};
    let state = optgate_daemon::paths::StatePaths::from_env()?;
    state.prepare_dir()?;
    let path = optgate_sched::local_backend::LocalBackend::new(&state.dir)
        .lock_file()
        .to_path_buf();
    let open = || {
        optgate_daemon::paths::open_state_file(&path, false)
            .with_context(|| format!("cannot open {}", path.display()))
    };
    match Flock::lock(open()?, FlockArg::LockExclusiveNonblock) {
        Ok(_free) => {}
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            eprintln!(
                "optgate: waiting for the daemon's local runs to finish (lock {})…",
                path.display()
            );
            Flock::lock(open()?, FlockArg::LockExclusive)
                .map_err(|(_, e)| anyhow::anyhow!("cannot lock {}: {e}", path.display()))?;
        }
        Err((_, e)) => return Err(anyhow::anyhow!("cannot lock {}: {e}", path.display())),
    }
    Ok(path)
}

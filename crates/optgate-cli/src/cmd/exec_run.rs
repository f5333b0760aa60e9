//! `optgate exec-run [--attempt N] RUN_DIR [-- LAUNCHER...]` (hidden): executes one
//! rendered run where the job landed (this machine or a compute node) and writes its
//! manifest. A run whose manifest says it finished is never executed again, so a requeued
//! or resubmitted job cannot produce a second sample of the same run; a run a newer job
//! attempt claimed is not started, and a stale attempt never replaces its record.

use std::path::Path;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use optgate_wrapper::claim::Claim;
use optgate_wrapper::manifest::Outcome;
use optgate_wrapper::run::{Attempt, Executed, execute_prepared};

use crate::exit;

pub fn exec_run(run_dir: &Path, attempt: u32, launcher: &[String]) -> Result<i32> {
    let attempt = Attempt {
        number: attempt,
        scheduler_job_id: optgate_wrapper::job_env::scheduler_job_id(|k| std::env::var(k).ok()),
    };
    // Inside the launcher's step (after `srun --cpu-freq` applied the arm's governor), this
    // same binary wraps every task: it records the governor actually in force there and
    // what the task used, around `bash run.sh`.
    let me = std::env::current_exe().context("cannot tell where this optgate binary is")?;
    let step_probe = vec![
        me.display().to_string(),
        "step".to_string(),
        run_dir.display().to_string(),
        "--attempt".to_string(),
        attempt.number.to_string(),
        "--".to_string(),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Schedulers stop jobs with a signal: Slurm with SIGTERM (time limit, scancel), Flux
    // with SIGALRM then SIGHUP at a time limit and SIGTERM then SIGHUP on cancel. The run's
    // process group (its own, which the scheduler's signals do not reach) is stopped and
    // the manifest says "interrupted", so the run is re-planned, never counted. The
    // handlers are in place before the app starts.
    let stops = {
        let _in_runtime = runtime.enter();
        stop_signals()?
    };
    let executed = runtime.block_on(async {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        tokio::spawn(async move {
            stops.recv().await;
            c.cancel();
        });
        execute_prepared(run_dir, launcher, &step_probe, &attempt, &cancel).await
    })?;
    Ok(exit_status(run_dir, attempt.number, &executed))
}

/// The exit status for the job script, with a line on stderr when the run did not run or
/// was not recorded. A superseded attempt exits as interrupted: its job is a stale one, and
/// the script must not go on to its next run.
fn exit_status(run_dir: &Path, attempt: u32, executed: &Executed) -> i32 {
    let dir = run_dir.display();
    match executed {
        Executed::Recorded(m) => match m.outcome {
            Outcome::Completed => exit::OK,
            Outcome::Interrupted => exit::INTERRUPTED,
            _ => exit::FAILED,
        },
        Executed::NotStarted(Claim::Finished) | Executed::NotStarted(Claim::Held) => {
            errln!("optgate exec-run: {dir} already finished; not running it again");
            exit::OK
        }
        Executed::NotStarted(Claim::Superseded { by }) => {
            errln!(
                "optgate exec-run: attempt {attempt} does not start {dir}: attempt {by} holds it"
            );
            exit::INTERRUPTED
        }
        Executed::Stale { found, manifest } => {
            let why = match found {
                Claim::Superseded { by } => format!("attempt {by} claimed the run meanwhile"),
                _ => "the run was finished meanwhile".to_string(),
            };
            errln!(
                "optgate exec-run: attempt {attempt} of {dir} is stale ({why}); its record is kept as {} and its output as stdout.attempt-{attempt} and stderr.attempt-{attempt}, the run's own is unchanged",
                manifest.display()
            );
            exit::INTERRUPTED
        }
    }
}

/// `optgate step RUN_DIR [--attempt N] -- COMMAND…`: wraps one task inside a scheduler's
/// step (`optgate_wrapper::task_step::wrap_task`: the node's governor and records once per
/// node, then COMMAND run as the task's app and its exit passed on). A failure to record
/// is reported on stderr and never stops or changes the run; a RUN_DIR that is not a real,
/// writable folder is refused (exit 2) before the app starts.
pub fn step(run_dir: &Path, attempt: u32, command: &[String]) -> Result<i32> {
    use optgate_wrapper::task_step::{TaskStepError, wrap_task};
    match wrap_task(run_dir, attempt, command, |w| errln!("optgate step: {w}")) {
        Ok(status) => Ok(status),
        Err(TaskStepError::RunDir(e)) => Err(exit::with_code(exit::INVALID_INPUT, e)),
        Err(TaskStepError::Step(e)) => Err(e.into()),
    }
}

/// The signals that mean "the job is being stopped", each with its handler.
struct StopSignals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
    alrm: tokio::signal::unix::Signal,
}

/// SIGTERM, SIGINT, SIGHUP and SIGALRM: whichever a scheduler (or a person) sends.
fn stop_signals() -> Result<StopSignals> {
    use tokio::signal::unix::{SignalKind, signal};
    let handle = |k: SignalKind, name: &str| {
        signal(k).with_context(|| format!("cannot install a {name} handler"))
    };
    Ok(StopSignals {
        term: handle(SignalKind::terminate(), "SIGTERM")?,
        int: handle(SignalKind::interrupt(), "SIGINT")?,
        hup: handle(SignalKind::hangup(), "SIGHUP")?,
        alrm: handle(SignalKind::alarm(), "SIGALRM")?,
    })
}

impl StopSignals {
    /// Returns when any of the signals arrives.
    async fn recv(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
            _ = self.hup.recv() => {}
            _ = self.alrm.recv() => {}
        }
    }
}

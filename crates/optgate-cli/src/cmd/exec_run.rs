//! `optgate exec-run RUN_DIR [-- LAUNCHER...]` (hidden): executes one rendered run where
//! the job landed (this machine or a compute node) and writes its manifest. A run whose
//! manifest says it finished is never executed again, so a requeued or resubmitted job
//! cannot produce a second sample of the same run.

use std::path::Path;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use optgate_sched::local::execute_prepared;
use optgate_sched::{Outcome, RunManifest};

use crate::exit;

pub fn exec_run(run_dir: &Path, launcher: &[String]) -> Result<i32> {
    if let Some(m) = RunManifest::read(run_dir)?
        && m.outcome != Outcome::Interrupted
    {
        eprintln!(
            "optgate exec-run: {} already finished ({:?}); not running it again",
            run_dir.display(),
            m.outcome
        );
        return Ok(exit::OK);
    }
    let job_id = std::env::var("SLURM_JOB_ID")
        .or_else(|_| std::env::var("FLUX_JOB_ID"))
        .or_else(|_| std::env::var("OPTGATE_JOB_ID"))
        .ok();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let manifest = runtime.block_on(async {
        let cancel = CancellationToken::new();
        let c = cancel.clone();
        // Schedulers stop jobs with SIGTERM (time limit, scancel); the run is stopped and
        // its manifest says "interrupted" so it is re-planned, never counted.
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
            let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
            tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
            c.cancel();
        });
        execute_prepared(run_dir, launcher, job_id, &cancel).await
    })?;
    Ok(match manifest.outcome {
        Outcome::Completed => exit::OK,
        Outcome::Interrupted => exit::INTERRUPTED,
        _ => exit::FAILED,
    })
}

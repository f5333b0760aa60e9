//! The local backend: builds and runs on this machine, strictly one at a time (timings must
//! not compete), each run in its own directory with its script, output and manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use optgate_experiment::{Build, Experiment};

use crate::manifest::{MANIFEST_SCHEMA, ManifestError, Outcome, RunManifest, write_atomic};
use crate::process::{ProcessEnd, ProcessError, run_script};
use crate::script::{RunContext, render_build, render_local_run, run_env};

pub const RUN_SCRIPT: &str = "run.sh";
pub const STDOUT_FILE: &str = "stdout";
pub const STDERR_FILE: &str = "stderr";
pub const BUILD_SCRIPT: &str = "build.sh";
pub const BUILD_LOG: &str = "build.log";
pub const BUILD_RECORD: &str = "build.json";

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LocalError + 'a {
    move |source| LocalError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// This machine's host name, for manifests.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".to_string())
}

pub fn now_rfc3339() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Renders the run script into `ctx.run_dir`, runs it, and writes the manifest.
/// The run directory must not hold a manifest yet (a finished run is never run again).
pub async fn execute_run(
    ctx: &RunContext<'_>,
    time_limit: Option<Duration>,
    cancel: &CancellationToken,
) -> Result<RunManifest, LocalError> {
    let dir = ctx.run_dir;
    std::fs::create_dir_all(dir).map_err(io("create run directory", dir))?;
    let script = dir.join(RUN_SCRIPT);
    std::fs::write(&script, render_local_run(ctx)).map_err(io("write", &script))?;
    let env_set = run_env(ctx);
    let mut environment: BTreeMap<String, String> = std::env::vars().collect();
    environment.extend(env_set.clone());
    for u in &ctx.arm.unset {
        environment.remove(u);
    }
    let started_at = now_rfc3339();
    let t0 = std::time::Instant::now();
    let end = run_script(
        &script,
        dir,
        &dir.join(STDOUT_FILE),
        &dir.join(STDERR_FILE),
        time_limit,
        cancel,
    )
    .await?;
    let elapsed_s = t0.elapsed().as_secs_f64();
    let (outcome, exit_code, signal) = match end {
        ProcessEnd::Exited(0) => (Outcome::Completed, Some(0), None),
        ProcessEnd::Exited(c) => (Outcome::Failed, Some(c), None),
        ProcessEnd::Signaled(s) => (Outcome::Failed, None, Some(s)),
        ProcessEnd::TimedOut => (Outcome::TimedOut, None, None),
        ProcessEnd::Cancelled => (Outcome::Interrupted, None, None),
    };
    let manifest = RunManifest {
        schema: MANIFEST_SCHEMA,
        experiment: ctx.experiment.name().to_string(),
        run_id: ctx.run_id.to_string(),
        arm: ctx.arm.name.clone(),
        block: ctx.block,
        replicate: ctx.replicate,
        host: hostname(),
        started_at,
        ended_at: now_rfc3339(),
        elapsed_s,
        outcome,
        exit_code,
        signal,
        env_set,
        env_unset: ctx.arm.unset.clone(),
        environment,
        script,
        scheduler_job_id: None,
        optgate_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    manifest.write(dir)?;
    Ok(manifest)
}

/// What a build did, kept beside its output as `build.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BuildRecord {
    pub id: String,
    pub command: String,
    pub started_at: String,
    pub ended_at: String,
    pub exit_code: Option<i32>,
    pub succeeded: bool,
    pub log: PathBuf,
}

/// Runs one build into `build_dir` (created fresh). stdout and stderr both go to the
/// build log, since a person reads them together.
pub async fn execute_build(
    exp: &Experiment,
    build: &Build,
    build_dir: &Path,
    cancel: &CancellationToken,
) -> Result<BuildRecord, LocalError> {
    std::fs::create_dir_all(build_dir).map_err(io("create build directory", build_dir))?;
    let script = build_dir.join(BUILD_SCRIPT);
    std::fs::write(&script, render_build(exp, build, build_dir)).map_err(io("write", &script))?;
    let log = build_dir.join(BUILD_LOG);
    let started_at = now_rfc3339();
    let end = run_script(
        &script,
        &exp.workdir,
        &log,
        &build_dir.join("build.err"),
        None,
        cancel,
    )
    .await?;
    // Fold stderr into the log so one file tells the whole story.
    let err_path = build_dir.join("build.err");
    if let Ok(err) = std::fs::read(&err_path) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&log) {
            let _ = f.write_all(&err);
        }
        let _ = std::fs::remove_file(&err_path);
    }
    let exit_code = match end {
        ProcessEnd::Exited(c) => Some(c),
        _ => None,
    };
    let record = BuildRecord {
        id: build.id.clone(),
        command: crate::script::app_command_line(build.command(), &[]),
        started_at,
        ended_at: now_rfc3339(),
        exit_code,
        succeeded: exit_code == Some(0),
        log,
    };
    let path = build_dir.join(BUILD_RECORD);
    write_atomic(
        &path,
        &serde_json::to_vec_pretty(&record).expect("serialises"),
    )
    .map_err(io("write", &path))?;
    Ok(record)
}

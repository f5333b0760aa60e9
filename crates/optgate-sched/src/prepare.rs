//! What the login node prepares for runs: a run's files rendered from the experiment
//! (`run.sh`, the warm-up script, and the plain run spec `run.json` that the run wrapper,
//! `optgate_wrapper::run`, reads), and builds, executed here before any job is submitted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use optgate_experiment::{Build, Experiment};
use optgate_wrapper::isolation::{WARMUP_DIR, WARMUP_SCRIPT};
use optgate_wrapper::manifest::write_atomic;
use optgate_wrapper::process::{ProcessEnd, ProcessError, run_script};
use optgate_wrapper::run::{RUN_RECORD, RUN_SCRIPT, RunRecord, now_rfc3339};

use crate::script::{RunContext, render_build, render_local_run, run_env};

pub const BUILD_SCRIPT: &str = "build.sh";
pub const BUILD_LOG: &str = "build.log";
pub const BUILD_RECORD: &str = "build.json";

/// Why a run's files or a build could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Process(#[from] ProcessError),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> PrepareError + 'a {
    move |source| PrepareError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// How run files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flushed to disk and renamed into place ([`write_atomic`]): a job runs from them,
    /// and they must be whole after a crash.
    Synced,
    /// Written plainly, no flush: a preview nothing runs from (`optgate plan`; 10,000 runs
    /// are 20,000 files, and two flushes each took most of its time).
    Preview,
}

fn write_file(durability: Durability, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match durability {
        Durability::Synced => write_atomic(path, bytes),
        Durability::Preview => std::fs::write(path, bytes),
    }
}

/// Renders `run.sh` and `run.json` into `ctx.run_dir` (created), written atomically.
pub fn write_run_files(
    ctx: &RunContext<'_>,
    time_limit: Option<Duration>,
) -> Result<RunRecord, PrepareError> {
    write_run_files_as(ctx, time_limit, Durability::Synced)
}

/// [`write_run_files`], written as `durability` says.
pub fn write_run_files_as(
    ctx: &RunContext<'_>,
    time_limit: Option<Duration>,
    durability: Durability,
) -> Result<RunRecord, PrepareError> {
    let write = |path: &Path, bytes: &[u8]| write_file(durability, path, bytes);
    let dir = ctx.run_dir;
    std::fs::create_dir_all(dir).map_err(io("create run directory", dir))?;
    let script = dir.join(RUN_SCRIPT);
    write(&script, render_local_run(ctx).as_bytes()).map_err(io("write", &script))?;
    let warmup = dir.join(WARMUP_SCRIPT);
    if ctx.arm.caches == optgate_experiment::CacheMode::Warm {
        // The same run, in the arm's cache folder, so that its outputs stay out of the run's.
        let warm_dir = ctx.cache_dir.join(WARMUP_DIR);
        let warm_ctx = RunContext {
            run_dir: &warm_dir,
            ..*ctx
        };
        write(&warmup, render_local_run(&warm_ctx).as_bytes()).map_err(io("write", &warmup))?;
    }
    let record = RunRecord {
        experiment: ctx.experiment.name().to_string(),
        run_id: ctx.run_id.to_string(),
        arm: ctx.arm.name.clone(),
        block: ctx.block,
        replicate: ctx.replicate,
        env_set: run_env(ctx),
        env_unset: ctx.arm.unset.clone(),
        time_limit_s: time_limit.map(|d| d.as_secs_f64()),
        caches: ctx.arm.caches,
        cache_dir: Some(ctx.cache_dir.to_path_buf()),
        page_cache: ctx.arm.page_cache,
        inputs: ctx.experiment.inputs.clone(),
        governor: ctx.arm.governor.clone(),
        governor_helper: ctx.experiment.governor_helper.clone(),
        governor_restore_file: Some(ctx.governor_restore.to_path_buf()),
    };
    let path = dir.join(RUN_RECORD);
    write(
        &path,
        &serde_json::to_vec_pretty(&record).expect("serialises"),
    )
    .map_err(io("write", &path))?;
    Ok(record)
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
) -> Result<BuildRecord, PrepareError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const EXPERIMENT: &str = r#"name: preview
workdir: .
app: { command: ./app, env: { A: "x y" } }
metric: { pattern: 'epoch (?P<epoch>\d+) took (?P<seconds>[0-9.]+) s' }
variants:
  - { name: v, dimension: l2_threading_model, caches: warm }
"#;

    /// Catches a preview that writes other bytes than a real run's files (or leaves one
    /// out): `optgate plan` shows what a run would get.
    #[test]
    fn preview_files_are_the_synced_files() {
        let root = tempfile::tempdir().unwrap();
        let exp = optgate_experiment::load_str(EXPERIMENT, &root.path().join("e.yaml"))
            .unwrap()
            .experiment;
        let files = |durability: Durability| {
            let dir = root.path().join(format!("{durability:?}"));
            let cache = dir.join("cache");
            let restore = dir.join("restore.json");
            let ctx = RunContext {
                experiment: &exp,
                arm: exp.arm("v").unwrap(),
                run_id: "b001-v",
                block: 1,
                replicate: 1,
                run_dir: &dir,
                build_dir: None,
                cache_dir: &cache,
                governor_restore: &restore,
            };
            write_run_files_as(&ctx, None, durability).unwrap();
            let mut names: Vec<_> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            names.sort();
            let text = |n: &std::ffi::OsString| std::fs::read_to_string(dir.join(n)).unwrap();
            let dir_text = dir.display().to_string();
            names
                .iter()
                .map(|n| (n.clone(), text(n).replace(&dir_text, "DIR")))
                .collect::<Vec<_>>()
        };
        let synced = files(Durability::Synced);
        assert_eq!(synced.len(), 3, "run.sh, run.json, warm-up: {synced:?}");
        assert_eq!(files(Durability::Preview), synced);
    }

    #[test]
    fn the_wrapper_visits_as_many_input_files_as_the_documented_limit() {
        assert_eq!(
            optgate_wrapper::isolation::MAX_INPUT_FILES,
            optgate_experiment::limits::MAX_INPUT_FILES
        );
    }
}

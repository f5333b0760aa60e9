//! `optgate run`: the whole loop in the foreground on this machine — build, run every
//! replicate in its recorded order showing progress (`progress.rs`), collect, analyse,
//! report. Given the `--out` of an interrupted execution it resumes: finished runs are
//! kept and counted, the rest run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use optgate_experiment::{Experiment, Plan};
use optgate_runner::drive::{self, DriveError, Event};

use super::progress::Progress;
use optgate_runner::preflight::{self, Level};
use optgate_runner::{Layout, RunStatus};
use optgate_sched::manifest::write_atomic;

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
    let kind = exp.file.scheduler.kind;
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
    let resuming = layout.experiment_copy().exists();
    let plan = existing_or_new_plan(&exp, &layout)?;
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
    let sysfs_root = optgate_probe::sysfs_root();
    let probe = super::probe::node_probe();
    let not_applicable: BTreeMap<String, String> =
        preflight::not_applicable(&exp, &probe, &sysfs_root);
    for (arm, reason) in &not_applicable {
        eprintln!("optgate: variant `{arm}` is not applicable here: {reason}");
    }

    // Local runs must not compete for the cores with the daemon's local jobs: both take the
    // same machine-wide lock, held here for the whole execution.
    let _machine = lock_local_runs()?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let cancel = CancellationToken::new();
    let outcome = runtime.block_on(async {
        let c = cancel.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("\noptgate: interrupted; stopping the current run…");
                c.cancel();
            }
        });
        drive::prepare(&exp, &plan, &layout)?;
        eprintln!("optgate: experiment `{}` → {}", exp.name(), root.display());
        let runs: Vec<_> = plan
            .runs()
            .into_iter()
            .filter(|r| !not_applicable.contains_key(&r.arm))
            .collect();
        let done = runs
            .iter()
            .filter(|r| drive::already_finished(&layout, r))
            .count();
        if resuming {
            eprintln!(
                "optgate: resuming: {done} of {} runs already done",
                runs.len()
            );
        }
        let mut progress = Progress::new(quiet, runs.len(), done);
        let mut on_event = |ev: Event| progress.on_event(ev);
        drive::build_all(&exp, &layout, &mut on_event, &cancel).await?;
        let r = drive::run_all(
            &exp,
            &plan,
            &layout,
            &not_applicable,
            &sysfs_root,
            &mut on_event,
            &cancel,
        )
        .await;
        progress.finish();
        r
    });
    match outcome {
        Ok(()) => {}
        Err(DriveError::Interrupted) => {
            let kept = optgate_runner::collect(&exp, &plan, &layout, &not_applicable)
                .runs
                .iter()
                .filter(|r| r.status == RunStatus::Complete)
                .count();
            eprintln!(
                "optgate: interrupted. Kept {kept} finished run(s) in {}; the interrupted run was discarded.\n\
                 Resume with: optgate run {} --out {}",
                root.display(),
                path.display(),
                root.display()
            );
            return Ok(exit::INTERRUPTED);
        }
        Err(e @ DriveError::BuildFailed { .. }) => return Err(exit::with_code(exit::FAILED, e)),
        Err(e) => return Err(e.into()),
    }
    let collected = optgate_runner::collect(&exp, &plan, &layout, &not_applicable);
    let samples = optgate_runner::analysis::samples_csv(&collected);
    write_atomic(&layout.samples(), samples.as_bytes())
        .with_context(|| format!("cannot write {}", layout.samples().display()))?;
    let failures = optgate_runner::analysis::failures(&collected);
    let report =
        super::report::build_run_report(&exp, &plan, &layout, &collected, &not_applicable)?;
    write_atomic(
        &layout.report_json(),
        super::report::render(&report, Format::Json)?.as_bytes(),
    )
    .with_context(|| format!("cannot write {}", layout.report_json().display()))?;
    if let Some(dir) = plot {
        super::report::plots(&report, &dir)?;
    }
    print!("{}", super::report::render(&report, format)?);
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
        root.display()
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

/// Takes the machine-wide lock of local runs (the one the daemon's local jobs take), waiting
/// with a message if a daemon job holds it.
fn lock_local_runs() -> Result<nix::fcntl::Flock<std::fs::File>> {
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
        Ok(lock) => Ok(lock),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
            eprintln!(
                "optgate: waiting for the daemon's local runs to finish (lock {})…",
                path.display()
            );
            Flock::lock(open()?, FlockArg::LockExclusive)
                .map_err(|(_, e)| anyhow::anyhow!("cannot lock {}: {e}", path.display()))
        }
        Err((_, e)) => Err(anyhow::anyhow!("cannot lock {}: {e}", path.display())),
    }
}

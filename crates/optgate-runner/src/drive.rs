//! Running an experiment in the foreground on this machine: write the layout, run every
//! build, then every planned run one at a time in the recorded order. Runs whose manifest
//! already exists are skipped, so an interrupted execution can be resumed without running
//! anything twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use optgate_experiment::{Experiment, Plan, PlannedRun};
use optgate_probe::governor::{GovernorError, Tunability, restore_from_file, tunability};
use optgate_sched::local::{BuildRecord, LocalError, execute_build, execute_run};
use optgate_sched::manifest::write_atomic;
use optgate_sched::script::RunContext;
use optgate_sched::{Outcome, RunManifest};

use crate::collect::{RunStatus, collect_run};
use crate::layout::Layout;

#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("build {id} failed (exit status {status}); its log is {log}:\n{tail}")]
    BuildFailed {
        id: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error(transparent)]
    Local(#[from] LocalError),
    #[error("interrupted")]
    Interrupted,
    #[error("CPU governor: {0}")]
    Governor(#[source] GovernorError),
    #[error("the CPU governor cannot be changed: {0}")]
    GovernorNotTunable(String),
    /// Fail fast: what the finished runs say already decides that more runs cannot help.
    #[error("{0}")]
    Stopped(String),
}

/// Records the governors a run changed, so a killed execution can put them back.
pub const GOVERNOR_RESTORE_FILE: &str = "governor-restore.json";

/// Progress reports for whoever shows them (a progress bar, the daemon's log).
#[derive(Debug, Clone)]
pub enum Event {
    BuildStarted {
        id: String,
    },
    BuildFinished {
        id: String,
    },
    RunStarted {
        run: PlannedRun,
        index: usize,
        total: usize,
    },
    RunFinished {
        run: PlannedRun,
        status: RunStatus,
    },
    RunSkipped {
        run: PlannedRun,
        reason: String,
    },
}

/// Creates `layout.root` with the experiment copy and the plan. Refuses a root that holds
/// a different experiment, so a new execution never mixes with an old one's data. The
/// root is 0700: runs' outputs, scripts and manifests stay the user's (the parents it
/// creates keep the umask's mode, so others still see that `optgate-runs/` exists).
pub fn prepare(exp: &Experiment, plan: &Plan, layout: &Layout) -> Result<(), DriveError> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let io = |op: &'static str, path: PathBuf| move |source| DriveError::Io { op, path, source };
    if let Some(parent) = layout.root.parent() {
        std::fs::create_dir_all(parent).map_err(io("create", parent.to_path_buf()))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&layout.root) {
        Ok(()) => {}
        // Resuming: an existing root keeps its contents but not a mode others can read.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::set_permissions(&layout.root, std::fs::Permissions::from_mode(0o700))
                .map_err(io("restrict the permissions of", layout.root.clone()))?;
        }
        Err(e) => return Err(io("create", layout.root.clone())(e)),
    }
    let copy = layout.experiment_copy();
    write_atomic(&copy, exp.source_text.as_bytes()).map_err(io("write", copy.clone()))?;
    let plan_path = layout.plan();
    let json = serde_json::to_vec_pretty(plan).expect("plan serialises");
    write_atomic(&plan_path, &json).map_err(io("write", plan_path.clone()))?;
    Ok(())
}

/// Builds every distinct build of the experiment into its own directory.
pub async fn build_all(
    exp: &Experiment,
    layout: &Layout,
    on_event: &mut (dyn FnMut(Event) + Send),
    cancel: &CancellationToken,
) -> Result<Vec<BuildRecord>, DriveError> {
    let mut records = Vec::new();
    for build in &exp.builds {
        if cancel.is_cancelled() {
            return Err(DriveError::Interrupted);
        }
        on_event(Event::BuildStarted {
            id: build.id.clone(),
        });
        let dir = layout.build_dir(&build.id);
        let record = execute_build(exp, build, &dir, cancel).await?;
        if cancel.is_cancelled() {
            return Err(DriveError::Interrupted);
        }
        if !record.succeeded {
            let log = std::fs::read_to_string(&record.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            return Err(DriveError::BuildFailed {
                id: build.id.clone(),
                status: record
                    .exit_code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "none (killed)".into()),
                log: record.log.clone(),
                tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            });
        }
        on_event(Event::BuildFinished {
            id: build.id.clone(),
        });
        records.push(record);
    }
    Ok(records)
}

/// Whether `run` has the manifest of a finished attempt (completed or failed, not
/// interrupted): [`run_all`] skips it, and a resumed execution counts it as done.
pub fn already_finished(layout: &Layout, run: &PlannedRun) -> bool {
    matches!(
        RunManifest::read(&layout.run_dir(&run.id)),
        Ok(Some(m)) if m.outcome != Outcome::Interrupted
    )
}

/// Runs every planned run that has no manifest yet, in plan order, one at a time.
/// Arms in `not_applicable` are skipped. Stops at cancellation; the interrupted run gets a
/// manifest saying so and is not counted. `sysfs_root` is `/` except in tests, which point
/// it at a fake cpufreq tree.
pub async fn run_all(
    exp: &Experiment,
    plan: &Plan,
    layout: &Layout,
    not_applicable: &BTreeMap<String, String>,
    sysfs_root: &Path,
    on_event: &mut (dyn FnMut(Event) + Send),
    cancel: &CancellationToken,
) -> Result<(), DriveError> {
    let restore_file = layout.root.join(GOVERNOR_RESTORE_FILE);
    if restore_file.exists() {
        // A previous execution was killed while a governor was changed: put it back first.
        let undone = restore_from_file(&restore_file).map_err(DriveError::Governor)?;
        tracing::warn!(
            "restored {} cpufreq policies left changed by a killed run",
            undone.len()
        );
    }
    let runs = plan.runs();
    let total = runs.len();
    // Fail fast: every finished run so far, judged each time a block is complete.
    let mut done: Vec<crate::RunResult> = Vec::new();
    let mut stopped: BTreeMap<String, String> = BTreeMap::new();
    let mut current_block = None;
    for (index, run) in runs.into_iter().enumerate() {
        if current_block.is_some_and(|b| b != run.block) && !done.is_empty() {
            let verdict =
                crate::failfast::judge(exp, layout, current_block.unwrap_or_default(), &done);
            if let Some(reason) = verdict.stop_experiment {
                return Err(DriveError::Stopped(reason));
            }
            for (arm, reason) in verdict.stop_arms {
                if let std::collections::btree_map::Entry::Vacant(e) = stopped.entry(arm) {
                    tracing::warn!("{reason}");
                    e.insert(reason);
                }
            }
        }
        current_block = Some(run.block);
        if let Some(reason) = not_applicable.get(&run.arm).or(stopped.get(&run.arm)) {
            on_event(Event::RunSkipped {
                run,
                reason: reason.clone(),
            });
            continue;
        }
        let dir = layout.run_dir(&run.id);
        if already_finished(layout, &run) {
            done.push(collect_run(exp, &run, &dir));
            on_event(Event::RunSkipped {
                run,
                reason: "already finished".into(),
            });
            continue;
        }
        if cancel.is_cancelled() {
            return Err(DriveError::Interrupted);
        }
        // An interrupted attempt leaves a directory behind; start the run afresh.
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|source| DriveError::Io {
                op: "clear interrupted run",
                path: dir.clone(),
                source,
            })?;
        }
        let arm = exp
            .arm(&run.arm)
            .expect("plan arms come from the experiment");
        let build_dir = arm.build.map(|b| layout.build_dir(&exp.builds[b].id));
        let cache_dir = layout.cache_dir(arm, &run.id);
        let ctx = RunContext {
            experiment: exp,
            arm,
            run_id: &run.id,
            block: run.block,
            replicate: run.replicate,
            run_dir: &dir,
            build_dir: build_dir.as_deref(),
            cache_dir: &cache_dir,
            governor_restore: &restore_file,
        };
        on_event(Event::RunStarted {
            run: run.clone(),
            index,
            total,
        });
        // The run wrapper changes the governor for this run only and restores it after
        // (`execute_prepared`, the same code for every backend). Not tunable here: stop
        // before running, as the pre-flight said.
        if arm.governor.is_some()
            && let Tunability::NotTunable { reason } =
                tunability(sysfs_root, exp.file.preflight.governor_helper.as_deref())
        {
            return Err(DriveError::GovernorNotTunable(reason));
        }
        let manifest = execute_run(&ctx, exp.run_time_limit, cancel).await?;
        if manifest.outcome == Outcome::Interrupted {
            return Err(DriveError::Interrupted);
        }
        let result = collect_run(exp, &run, &dir);
        let status = result.status.clone();
        done.push(result);
        on_event(Event::RunFinished { run, status });
    }
    Ok(())
}

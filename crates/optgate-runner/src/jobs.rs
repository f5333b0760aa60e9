//! Turning planned work into scheduler jobs: one job per block (blocked design) or per run
//! (independent design), the allocation sized for the largest run (pure), and the runs'
//! `run.sh`/`run.json` written when a job is about to be submitted.

use std::path::Path;
use std::time::Duration;

use optgate_experiment::{
    Design, Experiment, MAX_TIME_LIMIT, PlannedBlock, PlannedRun, plan::run_id,
};
use optgate_sched::prepare::{LocalError, write_run_files};
use optgate_sched::script::RunContext;
use optgate_sched::{JobRun, JobSpec};

use crate::layout::Layout;

/// A run's wall-clock budget when the experiment gives none (for sizing allocations).
pub const DEFAULT_RUN_LIMIT: Duration = Duration::from_secs(30 * 60);
/// Slack added to a derived allocation time limit: probe, start-up, file-system latency.
pub const ALLOCATION_SLACK: Duration = Duration::from_secs(5 * 60);

/// The allocation time limit of a job of `runs` runs when the experiment sets none: each
/// run's limit (or [`DEFAULT_RUN_LIMIT`]) times the runs, plus [`ALLOCATION_SLACK`], counted
/// without overflow and never more than [`MAX_TIME_LIMIT`] (no queue grants more; a run's
/// own limit is at most that, so at least one run always fits).
pub fn derived_allocation_limit(run_limit: Option<Duration>, runs: usize) -> Duration {
    let per_run = run_limit.unwrap_or(DEFAULT_RUN_LIMIT);
    u32::try_from(runs)
        .ok()
        .and_then(|n| per_run.checked_mul(n))
        .and_then(|d| d.checked_add(ALLOCATION_SLACK))
        .map_or(MAX_TIME_LIMIT, |d| d.min(MAX_TIME_LIMIT))
}

/// The scheduler job name of a block or run: carries the experiment id and the work's id,
/// so a job can be found by name after a crash between submitting and recording it.
pub fn job_name(experiment_id: &str, work_id: &str) -> String {
    format!("og-{experiment_id}-{work_id}")
}

/// The jobs of one block, with every run's files written (see [`block_jobs`] and
/// [`write_job_files`]): for `optgate plan` and the backend tests, which submit them as they
/// are. The engine plans with [`block_jobs`] and writes only the runs it submits.
pub fn jobs_for_block(
    exp: &Experiment,
    block: &PlannedBlock,
    layout: &Layout,
    experiment_id: &str,
    optgate_bin: &Path,
) -> Result<Vec<JobSpec>, LocalError> {
    let jobs = block_jobs(exp, block, layout, experiment_id, optgate_bin);
    for job in &jobs {
        write_job_files(exp, layout, job)?;
    }
    Ok(jobs)
}

/// The jobs of one block: one job holding every run (blocked) or one job per run
/// (independent). Pure: nothing is written (a job is often reduced to some of its runs
/// before it is submitted; [`write_job_files`] then writes those).
pub fn block_jobs(
    exp: &Experiment,
    block: &PlannedBlock,
    layout: &Layout,
    experiment_id: &str,
    optgate_bin: &Path,
) -> Vec<JobSpec> {
    let runs: Vec<PlannedRun> = block
        .order
        .iter()
        .enumerate()
        .map(|(pos, arm)| PlannedRun {
            id: run_id(block.index, arm),
            block: block.index,
            replicate: block.index,
            arm: arm.clone(),
            position: pos as u32,
        })
        .collect();
    let job_runs: Vec<JobRun> = runs.iter().map(|r| job_run(exp, r, layout)).collect();
    match exp.design {
        Design::Blocked => {
            let name = job_name(experiment_id, &format!("b{:03}", block.index));
            vec![job_spec(exp, name, layout, job_runs, optgate_bin)]
        }
        Design::Independent => job_runs
            .into_iter()
            .map(|jr| {
                let name = job_name(experiment_id, &jr.run_id);
                job_spec(exp, name, layout, vec![jr], optgate_bin)
            })
            .collect(),
    }
}

/// Writes the files of every run of `job` (`run.sh`, `run.json`, each written atomically):
/// once, just before the job is submitted.
pub fn write_job_files(exp: &Experiment, layout: &Layout, job: &JobSpec) -> Result<(), LocalError> {
    for r in &job.runs {
        let planned = PlannedRun {
            id: r.run_id.clone(),
            block: r.block,
            replicate: r.replicate,
            arm: r.arm.clone(),
            position: 0,
        };
        write_run(exp, &planned, layout)?;
    }
    Ok(())
}

/// Renders one run's files and describes it for a job.
pub fn prepare_run(
    exp: &Experiment,
    r: &PlannedRun,
    layout: &Layout,
) -> Result<JobRun, LocalError> {
    write_run(exp, r, layout)?;
    Ok(job_run(exp, r, layout))
}

/// Writes one run's files into its directory.
fn write_run(exp: &Experiment, r: &PlannedRun, layout: &Layout) -> Result<(), LocalError> {
    let arm = exp.arm(&r.arm).expect("plan arms come from the experiment");
    let run_dir = layout.run_dir(&r.id);
    let build_dir = arm.build.map(|b| layout.build_dir(&exp.builds[b].id));
    let cache_dir = layout.cache_dir(arm, &r.id);
    let governor_restore = layout.root.join(crate::root::GOVERNOR_RESTORE_FILE);
    let ctx = RunContext {
        experiment: exp,
        arm,
        run_id: &r.id,
        block: r.block,
        replicate: r.replicate,
        run_dir: &run_dir,
        build_dir: build_dir.as_deref(),
        cache_dir: &cache_dir,
        governor_restore: &governor_restore,
    };
    write_run_files(&ctx, exp.run_time_limit)?;
    Ok(())
}

/// How one run is described in a job (its directory, its launch shape). Pure.
fn job_run(exp: &Experiment, r: &PlannedRun, layout: &Layout) -> JobRun {
    let arm = exp.arm(&r.arm).expect("plan arms come from the experiment");
    let run_dir = layout.run_dir(&r.id);
    let res = &arm.resources;
    JobRun {
        run_id: r.id.clone(),
        arm: r.arm.clone(),
        block: r.block,
        replicate: r.replicate,
        run_dir,
        nodes: res.nodes,
        tasks_per_node: res.tasks_per_node,
        cpus_per_task: res.cpus_per_task,
        gpus_per_task: res.gpus_per_task,
        launcher_args: res.extra_args.clone(),
        time_limit: exp.run_time_limit,
        governor: arm.governor.clone(),
    }
}

fn job_spec(
    exp: &Experiment,
    name: String,
    layout: &Layout,
    runs: Vec<JobRun>,
    optgate_bin: &Path,
) -> JobSpec {
    let s = &exp.file.scheduler;
    // The allocation must fit the largest arm; each arm's launch line asks for its own shape.
    let nodes = runs.iter().map(|r| r.nodes).max().unwrap_or(1);
    let tasks_per_node = runs.iter().map(|r| r.tasks_per_node).max().unwrap_or(1);
    let cpus_per_task = runs.iter().map(|r| r.cpus_per_task).max().unwrap_or(1);
    let gpus_per_task = runs.iter().map(|r| r.gpus_per_task).max().unwrap_or(0);
    let time_limit = exp
        .allocation_time_limit
        .unwrap_or_else(|| derived_allocation_limit(exp.run_time_limit, runs.len()));
    JobSpec {
        dir: layout.job_dir(&name),
        name,
        runs,
        nodes,
        tasks_per_node,
        cpus_per_task,
        gpus_per_task,
        time_limit,
        queue: s.queue.clone(),
        account: s.account.clone(),
        exclusive: exclusive_nodes(exp),
        extra_directives: s.extra_directives.clone(),
        optgate_bin: optgate_bin.to_path_buf(),
        // The engine names a resubmission's attempt when it plans it.
        attempt: 1,
    }
}

/// Whether each job asks for whole nodes: `scheduler.exclusive` when given, else yes for
/// the blocked design — one block at a time per node, so blocks never disturb each other's
/// timings — and no for the independent design.
pub fn exclusive_nodes(exp: &optgate_experiment::Experiment) -> bool {
    exp.file
        .scheduler
        .exclusive
        .unwrap_or(exp.design == Design::Blocked)
}

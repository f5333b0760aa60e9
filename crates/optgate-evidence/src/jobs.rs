//! Turning planned work into scheduler jobs: one job per block (blocked design) or per run
//! (independent design), the allocation sized for the largest run (pure), and the runs'
//! `run.sh`/`run.json` written when a job is about to be submitted.

use std::path::Path;
use std::time::Duration;

use optgate_experiment::{
    Design, Experiment, MAX_TIME_LIMIT, PlannedBlock, PlannedRun, plan::run_id,
};
use optgate_sched::prepare::{Durability, PrepareError, write_run_files_as};
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

/// The jobs of one block: one job holding every run (blocked) or one job per run
/// (independent). Pure: nothing is written (a job is often reduced to some of its runs
/// before it is submitted; [`write_job_files`] then writes those). The engine plans with it
/// (through `optgate_daemon::jobplan::plan_jobs`); `optgate plan` writes every run once
/// with [`preview_run`] and describes the jobs with it.
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
pub fn write_job_files(
    exp: &Experiment,
    layout: &Layout,
    job: &JobSpec,
) -> Result<(), PrepareError> {
    for r in &job.runs {
        let planned = PlannedRun {
            id: r.run_id.clone(),
            block: r.block,
            replicate: r.replicate,
            arm: r.arm.clone(),
            position: 0,
        };
        write_run(exp, &planned, layout, Durability::Synced)?;
    }
    Ok(())
}

/// Renders one run's files and describes it for a job.
pub fn prepare_run(
    exp: &Experiment,
    r: &PlannedRun,
    layout: &Layout,
) -> Result<JobRun, PrepareError> {
    write_run(exp, r, layout, Durability::Synced)?;
    Ok(job_run(exp, r, layout))
}

/// Renders one run's files as [`prepare_run`] does, without flushing them to disk: for
/// `optgate plan`, which runs nothing from them.
pub fn preview_run(exp: &Experiment, r: &PlannedRun, layout: &Layout) -> Result<(), PrepareError> {
    write_run(exp, r, layout, Durability::Preview)
}

/// Writes one run's files into its directory.
fn write_run(
    exp: &Experiment,
    r: &PlannedRun,
    layout: &Layout,
    durability: Durability,
) -> Result<(), PrepareError> {
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
    write_run_files_as(&ctx, exp.run_time_limit, durability)?;
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
    let s = &exp.allocation;
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
        exclusive: s.exclusive,
        extra_directives: s.extra_directives.clone(),
        optgate_bin: optgate_bin.to_path_buf(),
        // The engine names a resubmission's attempt when it plans it.
        attempt: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use optgate_experiment::Plan;

    /// A Slurm experiment: the baseline on 1 CPU, `wide` on 2 nodes × 4 tasks × 6 CPUs
    /// with a GPU each, `env` on 1 CPU; `extra` is appended at the top level.
    fn experiment(extra: &str) -> Experiment {
        experiment_with(
            "scheduler: { kind: slurm, queue: batch, account: acc }",
            extra,
        )
    }

    /// [`experiment`] with its own `scheduler` line.
    fn experiment_with(scheduler: &str, extra: &str) -> Experiment {
        let yaml = format!(
            "name: t\napp: {{ command: [app], time_limit: 2m }}\n\
             metric: {{ pattern: '(?P<epoch>\\d) (?P<seconds>\\d)' }}\n\
             {scheduler}\n{extra}\
             replicates: 6\nvariants:\n\
             \x20 - {{ name: wide, dimension: l2_threading_model, launcher: {{ nodes: 2, tasks_per_node: 4, cpus_per_task: 6, gpus_per_task: 1 }} }}\n\
             \x20 - {{ name: env, dimension: l2_threading_model, env: {{ X: '1' }} }}\n"
        );
        optgate_experiment::load_str(&yaml, Path::new("/tmp/t.yaml"))
            .unwrap()
            .experiment
    }

    fn layout() -> Layout {
        Layout::new("/scratch/og/t/e1")
    }

    fn block(plan: &Plan, index: u32) -> &PlannedBlock {
        &plan.blocks[index as usize - 1]
    }

    #[test]
    fn a_blocked_block_is_one_job_of_its_runs_in_the_block_order() {
        let exp = experiment("");
        let plan = Plan::for_experiment(&exp);
        let layout = layout();
        for index in [1, 3, 6] {
            let b = block(&plan, index);
            let jobs = block_jobs(&exp, b, &layout, "e1", Path::new("/opt/og/optgate"));
            assert_eq!(jobs.len(), 1, "one job per block");
            let job = &jobs[0];
            let name = format!("og-e1-b{index:03}");
            assert_eq!(job.name, name);
            assert_eq!(job.dir, layout.job_dir(&name));
            // Every arm once, in the block's recorded order, each in its own directory.
            let arms: Vec<&str> = job.runs.iter().map(|r| r.arm.as_str()).collect();
            assert_eq!(arms, b.order, "block {index}");
            for r in &job.runs {
                assert_eq!(r.run_id, format!("b{index:03}-{}", r.arm));
                assert_eq!(r.run_dir, layout.run_dir(&r.run_id));
                assert_eq!((r.block, r.replicate), (index, index));
                assert_eq!(r.time_limit, Some(Duration::from_secs(120)));
            }
            // Each run keeps its own launch shape; the allocation fits the largest.
            let wide = job.runs.iter().find(|r| r.arm == "wide").unwrap();
            assert_eq!(
                (
                    wide.nodes,
                    wide.tasks_per_node,
                    wide.cpus_per_task,
                    wide.gpus_per_task
                ),
                (2, 4, 6, 1)
            );
            let base = job.runs.iter().find(|r| r.arm == "baseline").unwrap();
            assert_eq!(
                (base.nodes, base.cpus_per_task, base.gpus_per_task),
                (1, 1, 0)
            );
            assert_eq!(
                (
                    job.nodes,
                    job.tasks_per_node,
                    job.cpus_per_task,
                    job.gpus_per_task
                ),
                (2, 4, 6, 1)
            );
            // No allocation limit given: each run's 2 minutes, three runs, plus the slack.
            assert_eq!(
                job.time_limit,
                3 * Duration::from_secs(120) + ALLOCATION_SLACK
            );
            assert_eq!(job.queue.as_deref(), Some("batch"));
            assert_eq!(job.account.as_deref(), Some("acc"));
            assert!(job.exclusive, "a blocked design takes whole nodes");
            assert_eq!(job.optgate_bin, Path::new("/opt/og/optgate"));
        }
    }

    #[test]
    fn an_independent_block_is_one_job_per_run_named_for_the_run() {
        let exp = experiment("design: independent\n");
        let plan = Plan::for_experiment(&exp);
        let layout = layout();
        let b = block(&plan, 2);
        let jobs = block_jobs(&exp, b, &layout, "e1", Path::new("/bin/optgate"));
        assert_eq!(jobs.len(), 3, "one job per run");
        for (job, arm) in jobs.iter().zip(&b.order) {
            let run_id = format!("b002-{arm}");
            assert_eq!(job.name, format!("og-e1-{run_id}"));
            assert_eq!(job.dir, layout.job_dir(&job.name));
            assert_eq!(job.runs.len(), 1);
            assert_eq!(job.runs[0].run_id, run_id);
            assert_eq!(job.runs[0].run_dir, layout.run_dir(&run_id));
            // Sized for its own run only.
            let want = if arm == "wide" { (2, 6, 1) } else { (1, 1, 0) };
            assert_eq!(
                (job.nodes, job.cpus_per_task, job.gpus_per_task),
                want,
                "{arm}"
            );
            assert_eq!(job.time_limit, Duration::from_secs(120) + ALLOCATION_SLACK);
            assert!(!job.exclusive, "independent runs share nodes by default");
        }
    }

    #[test]
    fn a_jobs_script_runs_exec_run_for_each_of_its_runs_in_order() {
        let exp = experiment("");
        let plan = Plan::for_experiment(&exp);
        let layout = layout();
        let b = block(&plan, 4);
        let job = block_jobs(&exp, b, &layout, "e1", Path::new("/bin/optgate")).remove(0);
        let script = optgate_sched::slurm::render_script(&job).unwrap();
        let runs: Vec<String> = script
            .lines()
            .filter(|l| l.contains(" exec-run "))
            .map(|l| {
                // `exec-run RUN_DIR --attempt N -- …`: the run directory is the first word.
                let dir = l
                    .split(" exec-run ")
                    .nth(1)
                    .unwrap()
                    .split_whitespace()
                    .next();
                dir.unwrap().trim_matches('\'').to_string()
            })
            .collect();
        let want: Vec<String> = b
            .order
            .iter()
            .map(|arm| {
                let id = format!("b004-{arm}");
                layout.run_dir(&id).display().to_string()
            })
            .collect();
        assert_eq!(runs, want, "{script}");
    }

    #[test]
    fn an_allocation_limit_given_is_used_as_it_is() {
        let exp = experiment_with("scheduler: { kind: slurm, time_limit: 7m }", "");
        let plan = Plan::for_experiment(&exp);
        let job = block_jobs(&exp, block(&plan, 1), &layout(), "e1", Path::new("/x")).remove(0);
        assert_eq!(job.time_limit, Duration::from_secs(7 * 60));
        assert_eq!(job.queue, None);
    }
}

//! `optgate plan`: render the plan and every script into a directory, run nothing. For a
//! Slurm or Flux experiment that includes each job's batch script (one per block, or per
//! run in an independent design), exactly as the backend would submit it.

use std::path::Path;

use anyhow::{Context, Result};

use optgate_experiment::{Experiment, Plan, SchedulerKind};
use optgate_runner::Layout;
use optgate_sched::script::render_build;
use optgate_sched::{batch, flux, slurm};

use crate::exit;

pub fn plan(path: &Path, out: &Path) -> Result<i32> {
    let loaded = super::load_experiment(path, super::ChecklistNote::Silent)?;
    let exp = &loaded.experiment;
    if out.exists()
        && std::fs::read_dir(out)
            .with_context(|| format!("cannot read {}", out.display()))?
            .next()
            .is_some()
    {
        return Err(exit::with_code(
            exit::INVALID_INPUT,
            anyhow::anyhow!(
                "{} is not empty; plan writes into a new or empty directory",
                out.display()
            ),
        ));
    }
    let out = std::path::absolute(out).unwrap_or_else(|_| out.to_path_buf());
    let layout = Layout::new(&out);
    let plan = Plan::for_experiment(exp);
    optgate_runner::root::prepare(exp, &plan, &layout)?;
    let write = |p: &Path, text: String| -> Result<()> {
        std::fs::create_dir_all(p.parent().expect("has a parent"))
            .with_context(|| format!("cannot create {}", p.display()))?;
        std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    for b in &exp.builds {
        let dir = layout.build_dir(&b.id);
        write(
            &dir.join(optgate_sched::prepare::BUILD_SCRIPT),
            render_build(exp, b, &dir),
        )?;
    }
    let runs = plan.runs();
    for r in &runs {
        // The same rendering a real execution does: run.sh and run.json in the run's
        // directory (not flushed to disk: nothing runs from a plan).
        optgate_runner::jobs::preview_run(exp, r, &layout)?;
    }
    let jobs = write_job_scripts(exp, &plan, &layout)?;
    println!(
        "wrote {} build script(s), {} run scripts{} and plan.json to {}",
        exp.builds.len(),
        runs.len(),
        match jobs {
            Some(n) => format!(
                ", {n} {} job script(s) (jobs/*/{})",
                exp.kind,
                batch::JOB_SCRIPT
            ),
            None => String::new(),
        },
        out.display()
    );
    if jobs.is_some() {
        println!(
            "  {}",
            if exp.allocation.exclusive {
                "jobs ask for whole nodes (exclusive): one block at a time per node, nothing \
                 else beside it while it is timed"
            } else {
                "jobs share nodes (scheduler.exclusive: false): blocks may run side by side \
                 and disturb each other; the report flags runs that overlapped"
            }
        );
    }
    for b in &plan.blocks {
        println!("  block {:>3}: {}", b.index, b.order.join(" → "));
    }
    Ok(exit::OK)
}

/// Renders every job's batch script into its job directory; `None` for the local scheduler
/// (it has no batch scripts). Job names carry the experiment's name where the daemon would
/// put its experiment id, and the scripts call this optgate binary.
fn write_job_scripts(exp: &Experiment, plan: &Plan, layout: &Layout) -> Result<Option<usize>> {
    let render: fn(&optgate_sched::JobSpec) -> Result<String, optgate_sched::SchedError> =
        match exp.kind {
            SchedulerKind::Local => return Ok(None),
            SchedulerKind::Slurm => slurm::render_script,
            SchedulerKind::Flux => flux::render_script,
        };
    let bin = batch::optgate_for_jobs(
        std::env::var_os(batch::OPTGATE_BIN_VAR),
        std::env::current_exe().context("cannot find the optgate binary's path")?,
    );
    let mut count = 0;
    for block in &plan.blocks {
        // The runs' files are written above; the jobs are only described here.
        let jobs = optgate_runner::jobs::block_jobs(exp, block, layout, exp.name(), &bin);
        for job in jobs {
            let script = render(&job).map_err(|e| exit::with_code(exit::INVALID_INPUT, e))?;
            let path = job.dir.join(batch::JOB_SCRIPT);
            std::fs::create_dir_all(&job.dir)
                .with_context(|| format!("cannot create {}", job.dir.display()))?;
            std::fs::write(&path, script)
                .with_context(|| format!("cannot write {}", path.display()))?;
            count += 1;
        }
    }
    Ok(Some(count))
}

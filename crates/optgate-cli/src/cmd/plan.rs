//! `optgate plan`: render the plan and every script into a directory, run nothing. For a
//! Slurm or Flux experiment that includes each job's batch script (one per block, or per
//! run in an independent design), exactly as the backend would submit it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use optgate_evidence::Layout;
use optgate_experiment::{Experiment, Plan, SchedulerKind};
use optgate_sched::script::render_build;
use optgate_sched::{batch, flux, slurm};

use crate::exit;

pub fn plan(path: &Path, out: &Path) -> Result<i32> {
    let loaded = super::common::load_experiment(path, super::common::ChecklistNote::Silent)?;
    let exp = &loaded.experiment;
    // The job scripts would carry them: refused as `validate` and `submit` refuse them.
    super::validate::refuse_unknown_directives(path, exp)?;
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
    // The scripts name their own absolute paths, so they are written in place; what this
    // call wrote goes again if any write fails (a full disk leaves nothing half-written).
    let written = HalfWritten::guard(&out);
    let plan = Plan::for_experiment(exp);
    let jobs = write_plan(exp, &plan, &out)?;
    written.keep();
    print_summary(exp, &plan, &out, jobs);
    Ok(exit::OK)
}

/// Writes the plan, each build's script, each run's files and (Slurm, Flux) each job's
/// batch script under `out`; the number of job scripts (`None`: a local experiment).
fn write_plan(exp: &Experiment, plan: &Plan, out: &Path) -> Result<Option<usize>> {
    let layout = Layout::new(out);
    optgate_evidence::root::prepare(exp, plan, &layout)?;
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
        optgate_evidence::jobs::preview_run(exp, r, &layout)?;
    }
    write_job_scripts(exp, plan, &layout)
}

/// What `plan` writes, removed when dropped before [`HalfWritten::keep`]: the output
/// directory's contents, and the directory itself (with any parents) when `plan` made it.
struct HalfWritten {
    /// The output directory.
    out: PathBuf,
    /// The topmost directory of `out`'s path that did not exist before (`out` or one of its
    /// parents); `None` when `out` existed (empty).
    created: Option<PathBuf>,
    kept: bool,
}

impl HalfWritten {
    fn guard(out: &Path) -> HalfWritten {
        let created = out
            .ancestors()
            .take_while(|p| !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err())
            .last()
            .map(Path::to_path_buf);
        HalfWritten {
            out: out.to_path_buf(),
            created,
            kept: false,
        }
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for HalfWritten {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let removed = match &self.created {
            Some(top) => std::fs::remove_dir_all(top),
            None => std::fs::read_dir(&self.out).and_then(|entries| {
                entries.flatten().try_for_each(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => std::fs::remove_dir_all(e.path()),
                    _ => std::fs::remove_file(e.path()),
                })
            }),
        };
        if let Err(e) = removed {
            errln!(
                "optgate: warning: cannot remove what plan half-wrote in {}: {e}",
                self.out.display()
            );
        }
    }
}

/// What `plan` wrote, and each block's order.
fn print_summary(exp: &Experiment, plan: &Plan, out: &Path, jobs: Option<usize>) {
    outln!(
        "wrote {} build script(s), {} run scripts{} and plan.json to {}",
        exp.builds.len(),
        plan.runs().len(),
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
        outln!(
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
        outln!("  block {:>3}: {}", b.index, b.order.join(" → "));
    }
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
        let jobs = optgate_evidence::jobs::block_jobs(exp, block, layout, exp.name(), &bin);
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

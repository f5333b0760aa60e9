//! `optgate plan`: render the plan and every script into a directory, run nothing.

use std::path::Path;

use anyhow::{Context, Result};

use optgate_experiment::Plan;
use optgate_runner::Layout;
use optgate_sched::script::{RunContext, render_build, render_local_run};

use crate::exit;

pub fn plan(path: &Path, out: &Path) -> Result<i32> {
    let loaded = super::load_experiment(path)?;
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
    optgate_runner::drive::prepare(exp, &plan, &layout)?;
    let write = |p: &Path, text: String| -> Result<()> {
        std::fs::create_dir_all(p.parent().expect("has a parent"))
            .with_context(|| format!("cannot create {}", p.display()))?;
        std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    for b in &exp.builds {
        let dir = layout.build_dir(&b.id);
        write(
            &dir.join(optgate_sched::local::BUILD_SCRIPT),
            render_build(exp, b, &dir),
        )?;
    }
    let runs = plan.runs();
    for r in &runs {
        let arm = exp.arm(&r.arm).expect("plan arms exist");
        let dir = layout.run_dir(&r.id);
        let build_dir = arm.build.map(|i| layout.build_dir(&exp.builds[i].id));
        let ctx = RunContext {
            experiment: exp,
            arm,
            run_id: &r.id,
            block: r.block,
            replicate: r.replicate,
            run_dir: &dir,
            build_dir: build_dir.as_deref(),
        };
        write(
            &dir.join(optgate_sched::local::RUN_SCRIPT),
            render_local_run(&ctx),
        )?;
    }
    println!(
        "wrote {} build script(s), {} run scripts and plan.json to {}",
        exp.builds.len(),
        runs.len(),
        out.display()
    );
    for b in &plan.blocks {
        println!("  block {:>3}: {}", b.index, b.order.join(" → "));
    }
    Ok(exit::OK)
}

//! Batch scripts from one directive table per scheduler: a [`Dialect`] names the
//! scheduler, the prefix of its directive lines and its [`Directive`] rows — which option
//! carries which part of the job, and how its value is written. [`render_script`] is the
//! one renderer both batch backends use: it checks the job, writes the rows in table order
//! (then the job's extra directives) behind the prefix, then the shared body
//! ([`crate::batch::render_body`]). Pure.

use std::fmt::Display;

use crate::backend::{JobRun, JobSpec, SchedError};
use crate::batch::{check_common, check_job_dir, render_body};
use crate::shell::join;

/// What one directive row writes for a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectiveValue {
    /// No line: the job leaves this option to the scheduler's default.
    Omitted,
    /// The option alone, `--exclusive`.
    Flag,
    /// `--option=value`.
    Text(String),
}

/// One row of a scheduler's directive table: `option` and how a job's value for it is
/// written (or an error when the job holds a value the scheduler cannot be given).
pub struct Directive {
    pub option: &'static str,
    pub value: fn(&JobSpec) -> Result<DirectiveValue, SchedError>,
}

/// How one scheduler's batch scripts are written.
pub struct Dialect {
    /// The scheduler's name in the script's opening comment (`Slurm`, `Flux`).
    pub scheduler: &'static str,
    /// What opens each directive line (`#SBATCH `, `# flux: `).
    pub prefix: &'static str,
    /// The directives every job gets, in the order they are written.
    pub directives: &'static [Directive],
}

/// A value that is always written.
pub fn text(value: impl Display) -> Result<DirectiveValue, SchedError> {
    Ok(DirectiveValue::Text(value.to_string()))
}

/// A count written only when it is above zero (GPUs).
pub fn positive(n: impl Into<u64>) -> Result<DirectiveValue, SchedError> {
    let n = n.into();
    Ok(if n > 0 {
        DirectiveValue::Text(n.to_string())
    } else {
        DirectiveValue::Omitted
    })
}

/// A value written only when the experiment sets it (queue, account).
pub fn optional(value: &Option<String>) -> Result<DirectiveValue, SchedError> {
    Ok(value
        .as_ref()
        .map_or(DirectiveValue::Omitted, |v| DirectiveValue::Text(v.clone())))
}

/// An option written alone when `on`.
pub fn flag(on: bool) -> Result<DirectiveValue, SchedError> {
    Ok(if on {
        DirectiveValue::Flag
    } else {
        DirectiveValue::Omitted
    })
}

/// The directive lines' options for `job`: the dialect's rows, then its extra directives.
pub fn directive_options(dialect: &Dialect, job: &JobSpec) -> Result<Vec<String>, SchedError> {
    let mut options = Vec::with_capacity(dialect.directives.len() + job.extra_directives.len());
    for row in dialect.directives {
        match (row.value)(job)? {
            DirectiveValue::Omitted => {}
            DirectiveValue::Flag => options.push(row.option.to_string()),
            DirectiveValue::Text(v) => options.push(format!("{}={v}", row.option)),
        }
    }
    options.extend(job.extra_directives.iter().cloned());
    Ok(options)
}

/// The batch script of `job` in `dialect`; `launcher` gives a run's launcher words (or
/// refuses the run). Fails on values a directive line cannot carry, before anything is
/// written. Directives come first: both schedulers stop reading them at the first line
/// that is neither a comment nor blank.
pub fn render_script(
    dialect: &Dialect,
    job: &JobSpec,
    launcher: &dyn Fn(&JobRun) -> Result<Vec<String>, SchedError>,
) -> Result<String, SchedError> {
    check_common(job, &[])?;
    check_job_dir(&job.dir)?;
    let options = directive_options(dialect, job)?;
    let mut launches = Vec::with_capacity(job.runs.len());
    for run in &job.runs {
        launches.push(join(launcher(run)?));
    }
    let mut s = String::from("#!/bin/bash\n");
    for option in options {
        s.push_str(dialect.prefix);
        s.push_str(&option);
        s.push('\n');
    }
    s.push_str(&render_body(job, dialect.scheduler, &launches));
    Ok(s)
}
